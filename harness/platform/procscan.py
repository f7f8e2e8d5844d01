"""Finding processes in /proc: identity (pid + start time + owner), and a run's marked tools.

Every tool the harness starts carries HARNESS_RUN_TOKEN=<random> in its environment, and so
does everything it starts, even a daemon that called setsid() and left the tool's process
group (`setsid sh -c "exec sleep 7777" &`). `marked(token)` finds them all by that token,
among the processes the caller's user owns, so that they can be killed with the group.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

TOKEN_VAR = "HARNESS_RUN_TOKEN"


@dataclass(frozen=True)
class ProcInfo:
    """The fields of /proc/PID/stat that identify a process and its group, and its owner."""

    pid: int
    state: str
    pgrp: int
    start: int  # clock ticks after boot
    uid: int = -1  # owner (the uid of /proc/PID); -1 when unknown

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, start time) from /proc/PID/stat, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    rest = stat[stat.rfind(")") + 2:].split()  # comm may hold spaces and parentheses
    try:
        return rest[0], int(rest[2]), int(rest[19])
    except (IndexError, ValueError):
        return None


def proc_info(pid: int) -> ProcInfo | None:
    """The process `pid`, or None when there is none."""
    fields = _stat(pid)
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
    return None if fields is None else ProcInfo(pid, *fields, uid)


def all_procs() -> Iterator[ProcInfo]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for d in names:
        if d.isdigit():
            info = proc_info(int(d))
            if info is not None:
                yield info


def cmdline(pid: int) -> tuple[str, ...]:
    """argv of `pid` ('' parts dropped), () when unreadable or a kernel thread."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ()
    return tuple(a.decode(errors="replace") for a in raw.split(b"\0") if a)


def has_token(pid: int, token: str) -> bool:
    """True when `pid`'s HARNESS_RUN_TOKEN holds `token` (a nested run's: 'inner:outer')."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    prefix = f"{TOKEN_VAR}=".encode()
    for entry in env.split(b"\0"):
        if entry.startswith(prefix):
            return token.encode() in entry[len(prefix):].split(b":")
    return False


def marked(tokens: Iterable[str], since: int = 0) -> list[ProcInfo]:
    """Live processes of our own user, started at or after `since`, carrying one of `tokens`."""
    wanted = [t for t in tokens if t]
    if not wanted:
        return []
    me, mine = os.geteuid(), os.getpid()
    found = []
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return []
    for pid in pids:
        fields = _stat(pid)  # cheap filters first: most processes are older than the tool
        if fields is None or fields[2] < since or fields[0] in ("Z", "X") or pid == mine:
            continue
        p = proc_info(pid)
        if p is not None and p.alive and p.uid == me and any(has_token(pid, t) for t in wanted):
            found.append(p)
    return found


def signal_same(procs: Iterable[ProcInfo], sig: int) -> None:
    """Send `sig` to each process that is still the one seen (same start time and owner)."""
    for p in procs:
        now = proc_info(p.pid)
        if now is not None and now.alive and now.start == p.start and now.uid == p.uid:
            try:
                os.kill(p.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def kill_marked(tokens: Iterable[str], grace_s: float, since: int = 0) -> int:
    """TERM every process carrying a token, KILL what is left after grace_s; how many were found."""
    tokens = list(tokens)
    found = marked(tokens, since)
    if not found:
        return 0
    signal_same(found, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and marked(tokens, since):
        time.sleep(0.05)
    signal_same(marked(tokens, since), signal.SIGKILL)  # children forked meanwhile included
    return len(found)
