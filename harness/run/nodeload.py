"""The node's load at one moment (a Snapshot), read from /proc, and a run's first look at it.

The contention gate (run.contention) judges the load between two snapshots. The first one of a
run is taken as its process starts (first_look(), begun by run.early before the command line
loads), so this module loads only what reading the node needs: the run's other modules load
while the look runs.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.parsers.sysinfo import parse_meminfo
from harness.platform import diskstats
from harness.platform.diskstats import DiskStat
from harness.platform.procfs import ProcFs

MODES = ("gate", "record", "off")
VIRTUAL_DISKS = ("loop", "md", "dm-", "zram", "ram", "nbd")  # their I/O lands on a physical disk too


def mode_of(env: Mapping[str, str]) -> str:
    """The gate's mode from $HARNESS_CONTENTION (default "gate"; an unknown value gates)."""
    value = env.get("HARNESS_CONTENTION", "").strip().lower()
    return value if value in MODES else "gate"


@dataclass(frozen=True)
class Snapshot:
    """The node's counters at one moment, the check's own processes' share set apart."""

    t: float
    steal: int = 0
    cpu_total: int = 0
    ncpu: int = 1
    running: int = 0  # runnable tasks of other processes
    psi: Mapping[str, int] = field(default_factory=dict)  # resource -> `some` total, us
    disk_bytes: int | None = None  # the disks watched (every physical disk by default), read + written
    per_disk: Mapping[str, int] | None = None  # every disk's bytes read + written (on_disks sums them)
    own_io: Mapping[int, int] = field(default_factory=dict)  # pid of ours -> bytes read + written
    mem_available: float | None = None  # share of MemTotal


def snapshot(fs: ProcFs, clock: Callable[[], float] = time.monotonic,
             disks_of: frozenset[str] | None = None) -> Snapshot:
    """Read the node now (each source only where present); disk I/O of `disks_of`, else of every
    physical disk."""
    own = fs.descendants([os.getpid()])
    own_running = sum(1 for pid in own for tid in fs.threads(pid)
                      if (t := fs.task(pid, tid)) is not None and t.state == "R")
    try:
        cpu = fs.stat()
    except ValueError:  # a /proc/stat without its cpu line (a broken or partial read): left out
        cpu = None
    psi = {r: p.some_us for r in ("cpu", "io", "memory") if (p := fs.pressure(r)) is not None}
    disks = fs.disks()
    per_disk = None if disks is None else {n: d.read_bytes + d.write_bytes for n, d in disks.items()}
    disk_bytes = _disk_bytes(per_disk, disks_of)
    own_io = {pid: r + w for pid in own if (io := fs.io(pid)) is not None for r, w in [io]}
    mem: float | None = None
    meminfo = fs.text("meminfo")
    if meminfo is not None:
        m = parse_meminfo(meminfo)
        mem = m["MemAvailable"] / m["MemTotal"] if m.get("MemTotal") and "MemAvailable" in m else None
    if cpu is None:
        return Snapshot(clock(), psi=psi, disk_bytes=disk_bytes, per_disk=per_disk, own_io=own_io,
                        mem_available=mem)
    return Snapshot(clock(), cpu.steal, cpu.total, cpu.ncpu, max(0, cpu.running - own_running), psi,
                    disk_bytes, per_disk, own_io, mem)


def _disk_bytes(per_disk: Mapping[str, int] | None, disks_of: frozenset[str] | None) -> int | None:
    if per_disk is None:
        return None
    return sum(v for n, v in per_disk.items()
               if (n in disks_of if disks_of is not None else not n.startswith(VIRTUAL_DISKS)))


def on_disks(s: Snapshot, disks_of: frozenset[str] | None) -> Snapshot:
    """`s` with its disk I/O that of `disks_of` (every physical disk for None): a snapshot taken
    before a check's disks were known, made its start."""
    return dataclasses.replace(s, disk_bytes=_disk_bytes(s.per_disk, disks_of))


def first_look(env: Mapping[str, str] = os.environ,
               captured: Mapping[str, Any] | None = None) -> Snapshot | None:
    """The start of a run's first window, read as the run starts (None when the gate is off): the
    run's own preparation (imports, config, inventory) then takes the place of the sleep of the
    gate's first look (Gate(start=...)). `captured`: the files that reading was made of, read
    earlier by run.early.capture (before this module loaded), read here as they were then."""
    if mode_of(env) == "off":
        return None
    if captured is None:
        return snapshot(ProcFs())
    return snapshot(Captured(captured), lambda: float(captured["t"]))


class Captured(ProcFs):
    """/proc as run.early.capture read it: the files a snapshot of that process reads, and
    nothing else (a file it did not read is absent)."""

    def __init__(self, captured: Mapping[str, Any]) -> None:
        super().__init__(Path(captured["root"]))
        self._texts: Mapping[str, str | None] = captured["texts"]
        self._tasks: Mapping[int, list[str]] = captured["tasks"]
        self._block: list[str] | None = captured["block"]

    def text(self, *parts: str) -> str | None:
        return self._texts.get("/".join(parts))

    def threads(self, pid: int) -> list[int]:
        return [int(t) for t in self._tasks.get(pid, ()) if t.isdigit()]

    def descendants(self, roots: Iterable[int], limit: int = 4096) -> list[int]:
        return super().descendants([p for p in roots if p in self._tasks], limit)

    def disks(self) -> dict[str, DiskStat] | None:
        text = self._texts.get("diskstats")
        return None if text is None else diskstats.whole_devices(text, self._block)
