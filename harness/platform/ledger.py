"""The process groups a run has started, kept in RUN_DIR/.running, and cleanup of stale ones.

The harness kills its tools' process groups itself, except when it is SIGKILLed (or dies
otherwise without running its handlers): then a tool such as fio, which runs in its own
session, keeps running and would disturb the next measurement. While a run is live, every
tool group is recorded with its leader's start time, its run token (procscan.py) and the boot
id; `reap_stale()` (called by --resume and when the run lock is taken) kills exactly those
processes and no recycled PID: only processes of this user that carry the recorded token, or
share the group of a leader that still carries it. It acts only on a run directory and ledger
that this user owns and no one else may write, and removes only scratch directories that are
still the very ones recorded (device and inode).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.fsutil import atomic_write_json
from harness.platform import proc, procscan, scratch
from harness.platform.procscan import ProcInfo, proc_info
from harness.platform.runlock import trust_problem

RUNNING = ".running"
GRACE_S = 3.0


class RunDirBusy(HarnessError):
    """The run directory belongs to a harness process that is still alive."""


class UntrustedRunDir(HarnessError):
    """A run directory (or its .running) that someone other than this user could have written."""


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


class Ledger:
    """Keeps RUN_DIR/.running up to date while a run is live; never fails the run.

    Tools may start from several threads (telemetry samplers), so updates are serialised."""

    def __init__(self, run_dir: Path, log: logging.Logger) -> None:
        self.path = run_dir / RUNNING
        self.log = log
        self.groups: dict[int, dict[str, Any]] = {}
        self.scratch: list[dict[str, Any]] = []
        me = proc_info(os.getpid())
        self.head = {"boot_id": boot_id(),
                     "owner": {"pid": os.getpid(), "start": me.start if me else None}}
        self.failed = False
        self.lock = threading.Lock()

    def open(self) -> None:
        self._write()
        proc.watch(self._event)
        scratch.watch(self._scratch)

    def close(self) -> None:
        proc.unwatch(self._event)
        scratch.unwatch(self._scratch)
        try:
            self.path.unlink(missing_ok=True)
        except OSError as e:
            self.log.warning("could not remove %s: %s", self.path, e)

    def _event(self, pid: int, argv: tuple[str, ...], started: bool) -> None:
        info = proc_info(pid) if started else None
        with self.lock:
            if started:
                if info is None or not info.alive:
                    return
                self.groups[pid] = {"pgid": pid, "start": info.start, "argv": list(argv[:8]),
                                    "token": proc.token_of(pid), "uid": info.uid}
            elif self.groups.pop(pid, None) is None:
                return
            self._write()

    def _scratch(self, path: Path, created: bool) -> None:
        with self.lock:
            if created:
                try:
                    st = os.lstat(path)
                except OSError:
                    return
                self.scratch.append({"path": str(path), "dev": st.st_dev, "ino": st.st_ino})
            else:
                self.scratch = [d for d in self.scratch if d["path"] != str(path)]
            self._write()

    def _write(self) -> None:
        try:
            # no fsync: the file serves after the harness process dies, when the page cache
            # lives on; after a power loss no process it names is left (the boot id changes)
            atomic_write_json(self.path, {**self.head, "groups": list(self.groups.values()),
                                          "scratch": list(self.scratch)},
                              durable=False)
        except HarnessError as e:  # a full disk: the run stops on its own results, not here
            if not self.failed:
                self.log.warning("cannot record running tools: %s", e)
            self.failed = True


@dataclass(frozen=True)
class _Group:
    """One recorded tool: its group, its leader's start time, argv and run token."""

    pgid: int
    start: int
    argv: tuple[str, ...]
    token: str


def _victims(g: _Group, me: int) -> list[ProcInfo]:
    """This user's live processes the tool left: those carrying its token, and its group's
    members (started no earlier than the leader) while the leader is gone or still carries it."""
    leader = proc_info(g.pgid)
    group_ok = leader is None or not leader.alive or (
        leader.start == g.start and leader.uid == me and procscan.has_token(g.pgid, g.token))
    found = {p.pid: p for p in procscan.marked([g.token], since=g.start)}
    if group_ok:
        for p in procscan.all_procs():
            if p.pgrp == g.pgid and p.start >= g.start and p.alive and p.uid == me \
                    and p.pid != os.getpid():
                found.setdefault(p.pid, p)
    return list(found.values())


def check_trusted(run_dir: Path) -> None:
    """UntrustedRunDir unless run_dir, its ancestors and its .running are safe to act on:
    run_dir and .running this user's and writable by no one else (no symlinks), each
    ancestor root's or this user's and not writable by others unless sticky."""
    path = Path(os.path.abspath(run_dir))
    checks: list[tuple[Path, bool]] = [(path / RUNNING, False), (path, True)]
    checks += [(p, True) for p in path.parents]
    for p, is_dir in checks:
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            if p.name == RUNNING:
                continue
            raise UntrustedRunDir(f"{run_dir}: {p} does not exist") from None
        except OSError as e:
            raise UntrustedRunDir(f"{run_dir}: cannot inspect {p}: {e.strerror}") from e
        if is_dir and not stat.S_ISDIR(st.st_mode):
            problem = "not a directory (a symbolic link?)"
        elif p == path and st.st_uid != os.geteuid():
            problem = f"owned by uid {st.st_uid}, not by uid {os.geteuid()}"
        elif p == path and st.st_mode & 0o022:
            problem = f"writable by others (mode {stat.S_IMODE(st.st_mode):o})"
        else:
            problem = trust_problem(st, dir_ok=is_dir)
        if problem:
            raise UntrustedRunDir(f"refusing to clean up after {run_dir}: {p} is {problem}; "
                                  "only a run directory of this user's that no one else can write "
                                  "is acted on")


def _parse(data: Any) -> tuple[list[_Group], list[dict[str, Any]], dict[str, Any]]:
    groups = [_Group(int(g["pgid"]), int(g["start"]), tuple(str(a) for a in g.get("argv", []))[:3],
                     str(g.get("token") or "")) for g in data.get("groups", [])]
    dirs = [d for d in data.get("scratch", []) if isinstance(d, dict)]
    owner = data.get("owner") or {}
    if not isinstance(owner, dict):
        raise TypeError("owner is not an object")
    return groups, dirs, owner


def _remove_dirs(dirs: list[dict[str, Any]], run_dir: Path) -> list[str]:
    notes = []
    for d in dirs:
        try:
            note = scratch.remove_stale(Path(str(d["path"])), int(d["dev"]), int(d["ino"]))
        except (KeyError, TypeError, ValueError):
            continue
        if note:
            notes.append(f"{note} from {run_dir}")
    return notes


def reap_stale(run_dir: Path, log: logging.Logger | None = None, *, busy_ok: bool = False,
               grace_s: float = GRACE_S) -> list[str]:
    """Kill the tool processes a dead harness left behind in `run_dir`; say what was killed.

    RunDirBusy when the harness that owns `run_dir` is still alive (unless busy_ok, which
    leaves its groups alone); UntrustedRunDir when someone else could have written it.
    Groups whose leader PID now belongs to another process are left; so are groups recorded
    without a run token (nothing would prove a process is the tool's).
    """
    path = run_dir / RUNNING
    if not os.path.lexists(run_dir):  # deleted since: no ledger, so nothing we could prove is its own
        return [f"the crashed run's directory {run_dir} no longer exists: nothing to clean up"]
    check_trusted(run_dir)
    try:
        with open(path, encoding="utf-8", opener=_nofollow) as f:
            data = json.load(f)
        groups, dirs, owner = _parse(data)
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        if log:
            log.warning("ignoring unreadable %s: %s", path, e)
        return []
    if data.get("boot_id") != boot_id():
        # the node rebooted since: nothing of it runs any more, but its files may be left
        notes = _remove_dirs(dirs, run_dir)
        path.unlink(missing_ok=True)
        return notes
    holder = proc_info(int(owner.get("pid") or 0)) if owner.get("pid") else None
    if holder is not None and holder.alive and holder.start == owner.get("start") \
            and holder.pid != os.getpid():
        if busy_ok:
            return []
        raise RunDirBusy(f"{run_dir} belongs to a harness that is still running (PID {holder.pid})")
    me = os.geteuid()
    ours = [g for g in groups if g.token]
    victims: dict[int, ProcInfo] = {}
    notes = []
    for g in ours:
        found = _victims(g, me)
        if found:
            victims.update((p.pid, p) for p in found)
            notes.append(f"killed {len(found)} leftover process(es) of `{' '.join(g.argv)}` "
                         f"(process group {g.pgid}) from {run_dir}")
    if victims:
        procscan.signal_same(victims.values(), signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_victims(g, me) for g in ours):
            time.sleep(0.05)
        for g in ours:  # anything left, including children forked meanwhile
            procscan.signal_same(_victims(g, me), signal.SIGKILL)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_victims(g, me) for g in ours):
            time.sleep(0.05)
    notes += _remove_dirs(dirs, run_dir)  # after the kills: no tool writes there any more
    for n in notes:
        if log:
            log.warning("%s", n)
    path.unlink(missing_ok=True)
    return notes


def _nofollow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)
