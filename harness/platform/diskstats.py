"""The block-device edge for `harness observe`: /proc/diskstats, whole devices only.

`parse(text)` is pure; `read(root)` reads the file and keeps the devices listed in
/sys/block (whole disks, loop and md devices; partitions have no entry there).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

SECTOR = 512  # /proc/diskstats counts 512-byte sectors whatever the device's block size


@dataclass(frozen=True)
class DiskStat:
    """One device's cumulative counters."""

    name: str
    dev: str  # "major:minor", as cgroups name devices
    read_bytes: int
    write_bytes: int
    io_ms: int  # time with at least one I/O in flight (utilisation)
    queue_ms: int  # weighted time in flight: its rate is the average queue depth
    in_flight: int


def parse(text: str) -> dict[str, DiskStat]:
    """/proc/diskstats -> {name: DiskStat}; short or malformed lines are skipped."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 14 or not (f[0].isdigit() and f[1].isdigit()):
            continue
        try:
            out[f[2]] = DiskStat(name=f[2], dev=f"{f[0]}:{f[1]}", read_bytes=int(f[5]) * SECTOR,
                                 write_bytes=int(f[9]) * SECTOR, io_ms=int(f[12]), queue_ms=int(f[13]),
                                 in_flight=int(f[11]))
        except ValueError:
            continue
    return out


def read(root: Path = Path("/")) -> Optional[dict[str, DiskStat]]:
    """Whole devices' counters; None without /proc/diskstats. Idle RAM disks are left out."""
    try:
        text = (root / "proc" / "diskstats").read_text()
    except OSError:
        return None
    try:
        block: Optional[list[str]] = os.listdir(root / "sys" / "block")
    except OSError:
        block = None
    return whole_devices(text, block)


def whole_devices(text: str, block: Optional[Iterable[str]]) -> dict[str, DiskStat]:
    """The whole devices (those /sys/block lists; every one where it could not be listed) of a
    /proc/diskstats text, RAM disks left out."""
    stats = parse(text)
    whole = set(stats) if block is None else set(block)
    return {n: s for n, s in stats.items() if n in whole and not n.startswith(("ram", "zram"))}
