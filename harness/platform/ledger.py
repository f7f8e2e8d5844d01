"""The process groups a run has started, kept in RUN_DIR/.running, and cleanup of stale ones.

The harness kills its tools' process groups itself, except when it is SIGKILLed (or dies
otherwise without running its handlers): then a tool such as fio, which runs in its own
session, keeps running and would disturb the next measurement. While a run is live, every
tool group is recorded with its leader's start time and the boot id; `reap_stale()` (called
by --resume and when the run lock is taken) kills exactly those processes and no recycled PID.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.fsutil import atomic_write_json
from harness.platform import proc, scratch

RUNNING = ".running"
GRACE_S = 3.0


class RunDirBusy(HarnessError):
    """The run directory belongs to a harness process that is still alive."""


@dataclass(frozen=True)
class ProcInfo:
    """The fields of /proc/PID/stat that identify a process and its group."""

    pid: int
    state: str
    pgrp: int
    start: int  # clock ticks after boot

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


def proc_info(pid: int) -> ProcInfo | None:
    """The process `pid`, or None when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    rest = stat[stat.rfind(")") + 2:].split()  # comm may hold spaces and parentheses
    try:
        return ProcInfo(pid, rest[0], int(rest[2]), int(rest[19]))
    except (IndexError, ValueError):
        return None


def _all_procs() -> Iterator[ProcInfo]:
    for d in os.listdir("/proc"):
        if d.isdigit():
            info = proc_info(int(d))
            if info is not None:
                yield info


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
        self.scratch: list[str] = []
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
                self.groups[pid] = {"pgid": pid, "start": info.start, "argv": list(argv[:8])}
            elif self.groups.pop(pid, None) is None:
                return
            self._write()

    def _scratch(self, path: Path, created: bool) -> None:
        with self.lock:
            if created:
                self.scratch.append(str(path))
            elif str(path) in self.scratch:
                self.scratch.remove(str(path))
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


def _members(pgid: int, start: int) -> list[ProcInfo]:
    """Live processes of group `pgid` that started no earlier than its recorded leader."""
    return [p for p in _all_procs() if p.pgrp == pgid and p.start >= start and p.alive]


def _signal(procs: list[ProcInfo], sig: int) -> None:
    for p in procs:
        now = proc_info(p.pid)
        if now is not None and now.start == p.start and now.alive:
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass


def reap_stale(run_dir: Path, log: logging.Logger | None = None, *, busy_ok: bool = False,
               grace_s: float = GRACE_S) -> list[str]:
    """Kill the tool processes a dead harness left behind in `run_dir`; say what was killed.

    RunDirBusy when the harness that owns `run_dir` is still alive (unless busy_ok, which
    leaves its groups alone). Groups whose leader PID now belongs to another process are left.
    """
    path = run_dir / RUNNING
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        groups = [(int(g["pgid"]), int(g["start"]), [str(a) for a in g.get("argv", [])][:3])
                  for g in data.get("groups", [])]
        dirs = [Path(str(d)) for d in data.get("scratch", [])]
        owner = data.get("owner") or {}
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        if log:
            log.warning("ignoring unreadable %s: %s", path, e)
        return []
    if data.get("boot_id") != boot_id():
        # the node rebooted since: nothing of it runs any more, but its files may be left
        notes = [f"{n} from {run_dir}" for d in dirs if (n := scratch.remove_stale(d))]
        path.unlink(missing_ok=True)
        return notes
    holder = proc_info(int(owner.get("pid") or 0)) if owner.get("pid") else None
    if holder is not None and holder.alive and holder.start == owner.get("start") \
            and holder.pid != os.getpid():
        if busy_ok:
            return []
        raise RunDirBusy(f"{run_dir} belongs to a harness that is still running (PID {holder.pid})")
    ours = []
    for pgid, start, argv in groups:
        leader = proc_info(pgid)
        if leader is not None and leader.alive and leader.start != start:
            continue  # the PID was recycled: that group is not ours
        ours.append((pgid, start, argv))
    victims: list[ProcInfo] = []
    notes = []
    for pgid, start, argv in ours:
        found = _members(pgid, start)
        if found:
            victims += found
            notes.append(f"killed {len(found)} leftover process(es) of `{' '.join(argv)}` "
                         f"(process group {pgid}) from {run_dir}")
    if victims:
        _signal(victims, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_members(g, s) for g, s, _ in ours):
            time.sleep(0.05)
        for pgid, start, _ in ours:  # anything left, including children forked meanwhile
            _signal(_members(pgid, start), signal.SIGKILL)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_members(g, s) for g, s, _ in ours):
            time.sleep(0.05)
    for d in dirs:  # after the kills: no tool writes there any more
        note = scratch.remove_stale(d)
        if note:
            notes.append(f"{note} from {run_dir}")
    for n in notes:
        if log:
            log.warning("%s", n)
    path.unlink(missing_ok=True)
    return notes
