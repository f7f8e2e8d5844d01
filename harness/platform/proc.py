"""Run a tool as a subprocess in its own process group, with a timeout, output to files.

Never a shell. On timeout or interrupt the whole group is killed (TERM, then KILL), so
nothing the tool started is left running. `kill_all()` is what the signal handler calls.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ToolMissing

# Debian package that provides each tool we run, for "not found; install it with ..." errors.
INSTALL_HINTS: Mapping[str, str] = {
    "fio": "apt-get install fio",
    "lsblk": "apt-get install util-linux",
    "blkid": "apt-get install util-linux",
    "wipefs": "apt-get install util-linux",
    "losetup": "apt-get install util-linux",
    "iperf3": "apt-get install iperf3",
    "stress-ng": "apt-get install stress-ng",
    "ipmitool": "apt-get install ipmitool",
    "nvme": "apt-get install nvme-cli",
    "smartctl": "apt-get install smartmontools",
    "ibstat": "apt-get install infiniband-diags",
    "ethtool": "apt-get install ethtool",
    "ip": "apt-get install iproute2",
}

KILL_GRACE_S = 3.0

_active: set[subprocess.Popen[bytes]] = set()
_lock = threading.Lock()
# Told (pid, argv, started) when a tool's process group starts and once it is reaped; the runner
# records live groups in RUN_DIR/.running (platform/ledger.py) for cleanup after a SIGKILL.
_watchers: list[Callable[[int, tuple[str, ...], bool], None]] = []


def watch(fn: Callable[[int, tuple[str, ...], bool], None]) -> None:
    _watchers.append(fn)


def unwatch(fn: Callable[[int, tuple[str, ...], bool], None]) -> None:
    if fn in _watchers:
        _watchers.remove(fn)


def _notify(pid: int, argv: tuple[str, ...], started: bool) -> None:
    for fn in list(_watchers):
        fn(pid, argv, started)


@dataclass(frozen=True)
class ProcResult:
    """What one finished (or killed) subprocess left behind."""

    argv: tuple[str, ...]
    rc: int | None  # negative: killed by that signal (Popen convention)
    duration_s: float
    stdout_path: Path
    stderr_path: Path
    timed_out: bool
    interrupted: bool

    def stdout(self, limit: int | None = None) -> str:
        return _read(self.stdout_path, limit)

    def stderr(self, limit: int | None = None) -> str:
        return _read(self.stderr_path, limit)

    def tail(self, n_bytes: int = 2000) -> str:
        """The last bytes of stderr, else stdout: for error messages."""
        text = _read_tail(self.stderr_path, n_bytes) or _read_tail(self.stdout_path, n_bytes)
        return text.strip()


def _read(path: Path, limit: int | None) -> str:
    with open(path, "rb") as f:
        data = f.read() if limit is None else f.read(limit)
    return data.decode("utf-8", errors="replace")


def _read_tail(path: Path, n: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def which(tool: str) -> str:
    """Resolve a tool on PATH or raise ToolMissing with the install hint."""
    found = shutil.which(tool)
    if found is None:
        hint = INSTALL_HINTS.get(os.path.basename(tool))
        msg = f"{tool} not found" + (f"; install it with: {hint}" if hint else " on PATH")
        raise ToolMissing(msg, argv=(tool,))
    return found


def run(argv: Sequence[str], stdout_path: Path, stderr_path: Path, timeout: float | None,
        env: Mapping[str, str] | None = None, cwd: Path | None = None) -> ProcResult:
    """Run argv (no shell) with output to the given files; kill its process group on timeout."""
    argv = tuple(str(a) for a in argv)
    exe = which(argv[0])
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    stderr_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = None if env is None else {**os.environ, **env}
    t0 = time.monotonic()
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        try:
            proc = subprocess.Popen(
                (exe, *argv[1:]), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True, env=full_env, cwd=cwd,
            )
        except OSError as e:
            raise ToolMissing(f"cannot execute {argv[0]}: {e.strerror}", argv=argv) from e
        with _lock:
            _active.add(proc)
        timed_out = False
        try:
            _notify(proc.pid, argv, True)
            _wait(proc, timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # Always reap the whole group: the leader may be gone while children linger.
            _kill_group(proc)
            with _lock:
                _active.discard(proc)
            _notify(proc.pid, argv, False)
    interrupted = getattr(proc, "_harness_interrupted", False)
    return ProcResult(argv, proc.returncode, time.monotonic() - t0, stdout_path, stderr_path,
                      timed_out, interrupted)


def _wait(proc: subprocess.Popen[bytes], timeout: float | None) -> None:
    """proc.wait(timeout), woken by the kernel the moment the tool exits.

    Popen.wait with a timeout polls with sleeps of up to 50 ms; a pidfd makes the wait exact,
    which is most of the harness's own overhead on a short tool run. Falls back to polling
    where pidfds are unsupported (Linux < 5.3, other systems).
    """
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        proc.wait(timeout=timeout)
        return
    try:
        ready, _, _ = select.select([fd], [], [], timeout)  # retried on EINTR (PEP 475)
        if not ready:
            raise subprocess.TimeoutExpired(proc.args, timeout or 0.0)
        proc.wait()
    finally:
        os.close(fd)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """TERM the process group, wait up to KILL_GRACE_S, then KILL it; reap the leader."""
    pgid = proc.pid
    if proc.poll() is None or _group_alive(pgid):
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + KILL_GRACE_S
        while time.monotonic() < deadline:
            proc.poll()
            if not _group_alive(pgid):
                break
            time.sleep(0.02)
        else:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
        pass


def kill_all() -> None:
    """Kill every running tool's process group (called from the signal handler)."""
    with _lock:
        procs = list(_active)
    for p in procs:
        p._harness_interrupted = True  # type: ignore[attr-defined]
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def capture(argv: Sequence[str], timeout: float = 30.0) -> str:
    """Run a quick read-only query tool and return its stdout (for platform probes).

    Raises ToolMissing when absent; a non-zero exit is returned as-is in the text's absence
    to callers that check `capture_rc` instead.
    """
    return capture_rc(argv, timeout)[1]


def capture_rc(argv: Sequence[str], timeout: float = 30.0) -> tuple[int, str, str]:
    """Run a quick query tool; return (rc, stdout, stderr). Kills the group on timeout."""
    argv = tuple(str(a) for a in argv)
    exe = which(argv[0])
    proc = subprocess.Popen(
        (exe, *argv[1:]), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True,
    )
    with _lock:
        _active.add(proc)
    try:
        _notify(proc.pid, argv, True)
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return -1, out.decode(errors="replace"), f"timed out after {timeout:g}s"
    finally:
        with _lock:
            _active.discard(proc)
        _notify(proc.pid, argv, False)
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
