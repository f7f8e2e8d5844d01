"""A cgroup of a tool's own (cgroup v2, where the system has it and lets us make one): whatever the
tool starts stays in it (setsid, a double fork, a cleared environment), so ending the tool ends
all of it. Where there is no cgroup v2 or it cannot be written, nothing is made and the run token
and the process group are all there is (harness.platform.proc).

The tool joins its cgroup itself before it runs: it is started as `/bin/sh -c 'echo 0 >
CG/cgroup.procs; exec TOOL ARGS'`, so nothing it forks can be outside it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

SHELL = "/bin/sh"
PREFIX = "harness-tool-"
JOIN = 'echo 0 > "$0/cgroup.procs" 2>/dev/null; exec "$@"'


def v2_root(mounts: str | None = None, own: str | None = None) -> Path | None:
    """This process's cgroup v2 directory (the cgroup2 mount, pure or hybrid, plus our path in
    /proc/self/cgroup's '0::' line), or None."""
    try:
        mounts = Path("/proc/self/mounts").read_text() if mounts is None else mounts
        own = Path("/proc/self/cgroup").read_text() if own is None else own
    except OSError:
        return None
    mount = next((line.split()[1] for line in mounts.splitlines()
                  if len(line.split()) > 2 and line.split()[2] == "cgroup2"), None)
    path = next((line[3:] for line in own.splitlines() if line.startswith("0::")), None)
    if mount is None or path is None:
        return None
    d = Path(mount) / path.lstrip("/")
    return d if d.is_dir() else None


STALE_S = 60.0  # an empty tool cgroup this old was left by a harness that was killed: removed


def sweep(base: Path, now: float | None = None) -> None:
    """Remove the empty tool cgroups a killed harness left under `base` (rmdir removes only an
    empty one; a young one may be another run's, about to be joined, and is left alone)."""
    now = time.time() if now is None else now
    for d in base.glob(f"{PREFIX}*"):
        try:
            if now - d.stat().st_ctime > STALE_S:
                d.rmdir()
        except OSError:
            pass


def make(token: str) -> Path | None:
    """A new, empty cgroup for one tool under ours, or None where none can be made."""
    base = v2_root()
    if base is None:
        return None
    sweep(base)
    d = base / f"{PREFIX}{token}"
    try:
        d.mkdir(mode=0o755)
    except OSError:
        return None
    if not os.access(d / "cgroup.procs", os.W_OK):
        remove(d)
        return None
    return d


def wrap(argv: tuple[str, ...], cg: Path) -> tuple[str, ...]:
    """argv started so that it joins `cg` first (the same pid, session and argv once it execs)."""
    return (SHELL, "-c", JOIN, str(cg), *argv)


def members(cg: Path) -> list[int]:
    try:
        return [int(x) for x in (cg / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def kill(cg: Path, grace_s: float) -> int:
    """SIGKILL everything in `cg` (cgroup.kill where the kernel has it), wait up to grace_s for it
    to empty, then remove it; how many processes were in it."""
    found = members(cg)
    if found:
        try:
            (cg / "cgroup.kill").write_text("1")
        except OSError:
            for pid in found:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        deadline = time.monotonic() + grace_s
        while members(cg) and time.monotonic() < deadline:
            time.sleep(0.02)
    remove(cg)
    return len(found)


def remove(cg: Path) -> None:
    try:
        cg.rmdir()
    except OSError:
        pass
