"""Run a tool as a subprocess in its own process group, with a timeout, output to files.

Never a shell. On timeout or interrupt the whole group is killed (TERM, then KILL), and with
it every process carrying the tool's run token (procscan.py), so nothing the tool started is
left running, not even a daemon that called setsid(). Every wait has a bound: a process that
outlives SIGKILL is abandoned to a reaper thread. `kill_all()` is what the signal handler calls.
"""

from __future__ import annotations

import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ToolError, ToolMissing, ToolTimeout
from harness.platform import procscan, toolcg

# Debian package that provides each tool the harness runs: the one table, for "not found; install
# it with ..." errors and for the install hints `harness list --tools` shows (checks/needs).
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
    "dmesg": "apt-get install util-linux",
    "journalctl": "apt-get install systemd",
    "ibv_devinfo": "apt-get install ibverbs-utils",
    "mpirun": "apt-get install openmpi-bin",
}

KILL_GRACE_S = 3.0
# A stop (SIGINT/SIGTERM: scancel, a time limit) gives each tool this long after kill_all()'s TERM,
# then KILLs it: a tool that ignores TERM must not keep the harness past Slurm's KillWait (30 s by
# default, 5 s in the lab), after which the job's processes are KILLed with the results unwritten.
STOP_GRACE_S = 2.0

_active: set[subprocess.Popen[bytes]] = set()
_tokens: dict[int, str] = {}  # pid of a live tool -> its run token
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


MAX_OUTPUT_BYTES = 64 * 1024 * 1024  # of a stream held in memory: its tail (results come last)
MAX_RAW_BYTES = 1024 * 1024 * 1024  # of a stream kept in raw/: a tool that prints more is stopped
_WATCH_S = 0.1  # how often a running tool's output files are measured


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
    overflowed: bool = False  # stopped for printing more than MAX_RAW_BYTES

    def stdout(self, limit: int | None = None) -> str:
        """The output (its first `limit` bytes, else at most its last MAX_OUTPUT_BYTES)."""
        return _read(self.stdout_path, limit)

    def stderr(self, limit: int | None = None) -> str:
        return _read(self.stderr_path, limit)

    def cut(self) -> list[str]:
        """The output files larger than what stdout()/stderr() read of them, with their sizes."""
        return cut_files((self.stdout_path, self.stderr_path))

    def tail(self, n_bytes: int = 2000) -> str:
        """The last bytes of stderr, else stdout: for error messages."""
        text = _read_tail(self.stderr_path, n_bytes) or _read_tail(self.stdout_path, n_bytes)
        return text.strip()


def _read(path: Path, limit: int | None) -> str:
    with open(path, "rb") as f:
        if limit is None:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - MAX_OUTPUT_BYTES))
        data = f.read(MAX_OUTPUT_BYTES if limit is None else limit)
    return data.decode("utf-8", errors="replace")


def cut_files(paths: Sequence[Path]) -> list[str]:
    """'PATH (N bytes)' for each file larger than the MAX_OUTPUT_BYTES a reader takes of it."""
    out = []
    for path in paths:
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if size > MAX_OUTPUT_BYTES:
            out.append(f"{path} ({size} bytes)")
    return out


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


# environment variables no tool inherits: BMC passwords (REDFISH_PASSWORD, IPMI_PASSWORD, a
# profile's password_env) and anything named like a secret; a tool that needs one is given it
_SECRET = re.compile(r"PASS(WORD|WD)|SECRET|CREDENTIAL|(^|_)(TOKEN|API_?KEY|PW)$", re.IGNORECASE)


def is_secret(name: str) -> bool:
    """Whether an environment variable is one that tools never inherit."""
    return name != procscan.TOKEN_VAR and bool(_SECRET.search(name))


def tool_environ() -> dict[str, str]:
    """Our environment without its secrets (is_secret): what every tool we start inherits."""
    return {k: v for k, v in os.environ.items() if not is_secret(k)}


def _tool_env(env: Mapping[str, str] | None, token: str) -> dict[str, str]:
    """The tool's environment: ours without secrets, its own settings, and the run token (nested
    ones kept)."""
    full = {**tool_environ(), **(env or {})}
    outer = full.get(procscan.TOKEN_VAR)
    full[procscan.TOKEN_VAR] = f"{token}:{outer}" if outer else token
    return full


def popen(argv: Sequence[str], *, stdout: Any, stderr: Any, env: Mapping[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """Start a tool in a session of its own, marked with a fresh run token, and track it.

    Refuses (ToolError) once the run is stopping or the check's deadline has passed. Every
    tool started here must be ended with `reap()`."""
    argv = tuple(str(a) for a in argv)
    exe = which(argv[0])
    _refuse_if_stopping(argv)
    token = secrets.token_hex(8)
    launch: tuple[str, ...] = (exe, *argv[1:])
    cg = toolcg.make(token) if os.access(exe, os.X_OK) else None  # else Popen says why it cannot
    try:
        p = subprocess.Popen(toolcg.wrap(launch, cg) if cg else launch, stdin=subprocess.DEVNULL,
                             stdout=stdout, stderr=stderr, start_new_session=True,
                             env=_tool_env(env, token), cwd=cwd)
    except OSError as e:
        if cg:
            toolcg.remove(cg)
        raise ToolMissing(f"cannot execute {argv[0]}: {e.strerror}", argv=argv) from e
    p._harness_token = token  # type: ignore[attr-defined]
    p._harness_cgroup = cg  # type: ignore[attr-defined]
    info = procscan.proc_info(p.pid)
    p._harness_start = info.start if info else 0  # type: ignore[attr-defined]
    with _lock:
        _active.add(p)
        _tokens[p.pid] = token
    _notify(p.pid, argv, True)
    return p


def reap(p: subprocess.Popen[bytes], argv: Sequence[str]) -> bool:
    """Kill what is left of a tool (its group and every process carrying its token); untrack it.

    False when the tool outlived SIGKILL and was abandoned to a reaper thread."""
    try:
        return _kill_group(p)
    finally:
        with _lock:
            _active.discard(p)
        _notify(p.pid, tuple(str(a) for a in argv), False)
        with _lock:
            _tokens.pop(p.pid, None)


def token_of(pid: int) -> str:
    """The run token of a tool started by `popen()` and not yet reaped ('' if none)."""
    with _lock:
        return _tokens.get(pid, "")


def run(argv: Sequence[str], stdout_path: Path, stderr_path: Path, timeout: float | None,
        env: Mapping[str, str] | None = None, cwd: Path | None = None) -> ProcResult:
    """Run argv (no shell) with output to the given files; kill its process group on timeout."""
    argv = tuple(str(a) for a in argv)
    which(argv[0])
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    stderr_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        p = popen(argv, stdout=out, stderr=err, env=env, cwd=cwd)
        timed_out = overflowed = False
        try:
            overflowed = not _wait(p, timeout, (out.fileno(), err.fileno()))
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # Always reap the whole group: the leader may be gone while children linger.
            reap(p, argv)
    interrupted = getattr(p, "_harness_interrupted", False)
    return ProcResult(argv, p.returncode, time.monotonic() - t0, stdout_path, stderr_path,
                      timed_out, interrupted, overflowed)


def _wait(proc: subprocess.Popen[bytes], timeout: float | None, files: Sequence[int] = ()) -> bool:
    """proc.wait(timeout), woken by the kernel the moment the tool exits; False, with the tool
    still running, as soon as one of `files` (its output) passes MAX_RAW_BYTES.

    Popen.wait with a timeout polls with sleeps of up to 50 ms; a pidfd makes the wait exact,
    which is most of the harness's own overhead on a short tool run. Falls back to polling
    where pidfds are unsupported (Linux < 5.3, other systems). Returns (True) once kill_all()'s
    STOP_GRACE_S has passed with the tool still running: the caller's reap() KILLs it.
    """
    end = None if timeout is None else time.monotonic() + timeout
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = None
    try:
        while True:
            left = None if end is None else max(0.0, end - time.monotonic())
            step = _WATCH_S if left is None else min(left, _WATCH_S)  # wakes to see a stop
            if fd is not None:
                done = bool(select.select([fd], [], [], step)[0])  # retried on EINTR (PEP 475)
            else:
                try:
                    proc.wait(timeout=step)
                    done = True
                except subprocess.TimeoutExpired:
                    done = False
            if done:
                proc.wait()
                return True
            stop_at = getattr(proc, "_harness_stop_at", None)
            if stop_at is not None and time.monotonic() >= stop_at + STOP_GRACE_S:
                return True  # stopped and still running: reap() KILLs it
            if any(os.fstat(f).st_size > MAX_RAW_BYTES for f in files):
                return False
            if left is not None and step is not None and left <= step:
                raise subprocess.TimeoutExpired(proc.args, timeout or 0.0)
    finally:
        if fd is not None:
            os.close(fd)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group `pgid` is still alive (one we may not signal counts)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_group(proc: subprocess.Popen[bytes]) -> bool:
    """TERM the process group, wait up to KILL_GRACE_S, then KILL it; then every process that
    carries the tool's token (a daemon that left the group). Reap the leader, waiting at most
    KILL_GRACE_S: one that does not die (D state) is left to a reaper thread. True when reaped."""
    pgid = proc.pid
    stop_at = getattr(proc, "_harness_stop_at", None)  # kill_all() TERMed it then: its grace runs from there
    grace = KILL_GRACE_S if stop_at is None else max(0.0, stop_at + STOP_GRACE_S - time.monotonic())
    if proc.poll() is None or group_alive(pgid):
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()
            if not group_alive(pgid):
                break
            time.sleep(0.02)
        else:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    token = getattr(proc, "_harness_token", "")
    if token:
        procscan.kill_marked([token], KILL_GRACE_S if stop_at is None else min(KILL_GRACE_S, STOP_GRACE_S),
                             since=getattr(proc, "_harness_start", 0))
    cg = getattr(proc, "_harness_cgroup", None)
    if cg is not None:  # what left the session and cleared its environment is still in here
        toolcg.kill(cg, KILL_GRACE_S)
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:  # unkillable (D state): never wait on it again here
        _abandon(proc)
        return False
    return True


def _abandon(proc: subprocess.Popen[bytes]) -> None:
    """Leave a process that outlived SIGKILL to a daemon thread that reaps it if it ever dies."""
    for f in (proc.stdout, proc.stderr):
        if f is not None:
            try:
                f.close()
            except OSError:
                pass
    threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()


# -- deadlines and stopping: probes inherit what is left of the check's time -----------------

@dataclass
class _Scope:
    """One check's time limit (a monotonic deadline) and whether the run is stopping."""

    deadline: float | None
    stopping: bool = False


_scope: ContextVar[_Scope | None] = ContextVar("harness_proc_scope", default=None)
_live_scopes: dict[int, _Scope] = {}


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Within this block (this thread), probes get at most what is left of `seconds`, and no
    tool starts once the deadline has passed or kill_all() was called."""
    scope = _Scope(None if seconds is None else time.monotonic() + seconds)
    token = _scope.set(scope)
    with _lock:
        _live_scopes[id(scope)] = scope
    try:
        yield
    finally:
        with _lock:
            _live_scopes.pop(id(scope), None)
        _scope.reset(token)


def remaining(timeout: float | None) -> float | None:
    """`timeout` cut to what is left of the current deadline (None: no limit either way)."""
    scope = _scope.get()
    if scope is None or scope.deadline is None:
        return timeout
    left = max(0.0, scope.deadline - time.monotonic())
    return left if timeout is None else min(timeout, left)


def _refuse_if_stopping(argv: tuple[str, ...]) -> None:
    scope = _scope.get()
    if scope is None:
        return
    if scope.stopping:
        raise ToolError(f"{argv[0]} not started: the run is stopping", argv=argv)
    if scope.deadline is not None and time.monotonic() >= scope.deadline:
        raise ToolTimeout(f"{argv[0]} not started: the check's time is up", argv=argv)


def kill_all() -> None:
    """TERM every running tool's process group (called from the signal handler); each is KILLed
    STOP_GRACE_S later if still running (_wait, _kill_group). No tool starts any more inside a
    live deadline() block."""
    now = time.monotonic()
    with _lock:
        procs = list(_active)
        for scope in _live_scopes.values():
            scope.stopping = True
    for p in procs:
        p._harness_interrupted = True  # type: ignore[attr-defined]
        if getattr(p, "_harness_stop_at", None) is None:  # a second signal does not extend the grace
            p._harness_stop_at = now  # type: ignore[attr-defined]
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
    """Run a quick query tool; return (rc, stdout, stderr); rc -1 when it was killed.

    Bounded: at most `timeout` (cut to the check's remaining time, see deadline()), then the
    kill, whose wait is bounded too. Output goes to unnamed files, not pipes, so a descendant
    that keeps them open cannot hold the call; a probe that does not die is abandoned."""
    argv = tuple(str(a) for a in argv)
    limit = remaining(timeout)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = popen(argv, stdout=out, stderr=err)
        timed_out = False
        try:
            _wait(p, limit)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            reaped = reap(p, argv)
        texts = []
        for f in (out, err):  # the tail, at most MAX_OUTPUT_BYTES, as ProcResult.stdout reads
            f.seek(max(0, os.fstat(f.fileno()).st_size - MAX_OUTPUT_BYTES))
            texts.append(f.read(MAX_OUTPUT_BYTES).decode(errors="replace"))
    if timed_out:
        why = f"`{' '.join(argv)}` timed out after {limit or 0:g}s"
        if not reaped:
            why += " and did not exit after SIGKILL (abandoned: a hung device?)"
        return -1, texts[0], why
    return p.returncode, texts[0], texts[1]
