"""Storage facts beyond one block device: /proc/mdstat, mounts, and whether a disk carries the OS.

Reads only. `system_use` answers "is this drive in use by the running system?": the drive, one of
its partitions, or anything stacked on them (md, dm) is mounted or is swap. Drives in such use are
left out of `targets: all-nvme`. `in_memory` / `device_in_memory` answer "is this storage really
RAM?": tmpfs, ramfs, zram, a brd RAM disk, an overlay whose upper layer is one of those, or a loop
device over a file on one of those.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from harness.platform.sysfs import PROC, SYS, read_value


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    major_minor: str
    mount_point: str
    fstype: str
    source: str
    options: str = ""  # the super block's options (overlay: lowerdir=...,upperdir=...)


def _unescape(text: str) -> str:
    return (text.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")
            .replace("\\134", "\\"))


def parse_mountinfo(text: str) -> list[Mount]:
    """Mounts from /proc/self/mountinfo text (pure; malformed lines are skipped)."""
    out = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 2:
            continue
        out.append(Mount(fields[2], _unescape(fields[4]), rest[0], _unescape(rest[1]),
                         _unescape(rest[2]) if len(rest) > 2 else ""))
    return out


def read_mdstat(proc_root: Path = PROC) -> Optional[str]:
    """The text of /proc/mdstat, or None when the md driver is not loaded."""
    try:
        return (proc_root / "mdstat").read_text(errors="replace")
    except OSError:
        return None


def mounts(proc_root: Path = PROC) -> list[Mount]:
    try:
        return parse_mountinfo((proc_root / "self" / "mountinfo").read_text(errors="replace"))
    except OSError:
        return []


def mount_of(path: str | Path, table: Optional[list[Mount]] = None) -> Optional[Mount]:
    """The mount holding `path` (the longest mount point that is a prefix of its real path)."""
    real = os.path.realpath(path)
    best: Optional[Mount] = None
    for m in table if table is not None else mounts():
        mp = m.mount_point.rstrip("/") or "/"
        inside = real == mp or real.startswith(mp + "/") or mp == "/"
        if inside and (best is None or len(mp) >= len(best.mount_point.rstrip("/") or "/")):
            best = m
    return best


def _stack(name: str, sys_root: Path, seen: set[str]) -> dict[str, str]:
    """name -> major:minor for a block device, its partitions and all that hold them."""
    if name in seen:
        return {}
    seen.add(name)
    node = sys_root / "class" / "block" / name
    out: dict[str, str] = {}
    number = read_value(node / "dev")
    if number:
        out[name] = number
    try:
        children = [p.name for p in node.iterdir() if (p / "partition").is_file()]
    except OSError:
        children = []
    for part in children:
        out.update(_stack(part, sys_root, seen))
    try:
        holders = [p.name for p in (node / "holders").iterdir()]
    except OSError:
        holders = []
    for holder in holders:
        out.update(_stack(holder, sys_root, seen))
    return out


def system_use(device: str, sys_root: Path = SYS, proc_root: Path = PROC) -> list[str]:
    """Why `device` (e.g. /dev/nvme0n1) is in use by the system: mounts and swap on its stack."""
    stack = _stack(Path(device).name, sys_root, set())
    by_number = {v: k for k, v in stack.items()}
    reasons = [f"/dev/{by_number[m.major_minor]} is mounted at {m.mount_point}"
               for m in mounts(proc_root) if m.major_minor in by_number]
    swaps = read_value(proc_root / "swaps") or ""
    for line in swaps.splitlines()[1:]:
        parts = line.split()
        if parts and Path(_unescape(parts[0])).name in stack:
            reasons.append(f"{parts[0]} is in use as swap")
    return reasons


MEMORY_FS = frozenset({"tmpfs", "ramfs", "devtmpfs"})
_RAM_DEVICE = re.compile(r"^(zram|ram)\d+$")  # zram (compressed RAM), brd RAM disks


def _ram_device(name: str) -> str | None:
    m = _RAM_DEVICE.match(name)
    if m is None:
        return None
    return f"zram (compressed RAM) /dev/{name}" if m.group(1) == "zram" else f"a RAM disk /dev/{name}"


def in_memory(path: str | Path, table: Optional[list[Mount]] = None, sys_root: Path = SYS,
              _depth: int = 0) -> Optional[str]:
    """What RAM the file system holding `path` lives in ('tmpfs /mnt/x', 'overlay whose upperdir is
    on tmpfs /run'), or None for storage (or when the mount is not known)."""
    table = mounts() if table is None else table
    m = mount_of(path, table)
    if m is None or _depth > 8:
        return None
    if m.fstype in MEMORY_FS:
        return f"{m.fstype} {m.mount_point}"
    ram = _ram_device(Path(m.source).name) if m.source.startswith("/dev/") else None
    if ram:
        return ram
    if m.fstype == "overlay":
        upper = next((o.split("=", 1)[1] for o in m.options.split(",") if o.startswith("upperdir=")), None)
        if upper:
            below = in_memory(upper, [t for t in table if t is not m], sys_root, _depth + 1)
            if below:
                return f"overlay whose upperdir is on {below}"
    if m.source.startswith("/dev/loop"):
        return device_in_memory(m.source, table, sys_root, _depth + 1)
    return None


def device_in_memory(device: str, table: Optional[list[Mount]] = None, sys_root: Path = SYS,
                     _depth: int = 0) -> Optional[str]:
    """What RAM a block device is: zram, a RAM disk, or a loop device over a file in memory."""
    name = Path(os.path.realpath(device)).name
    ram = _ram_device(name)
    if ram:
        return ram
    backing = read_value(sys_root / "block" / name / "loop" / "backing_file")
    if name.startswith("loop") and backing:
        below = in_memory(backing, table, sys_root, _depth + 1)
        if below:
            return f"/dev/{name} over {backing} on {below}"
    return None


def mem_available(proc_root: Path = PROC) -> Optional[int]:
    """MemAvailable of /proc/meminfo in bytes: what the page cache can grow to without swapping."""
    for line in (read_value(proc_root / "meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        if key == "MemAvailable" and rest.split() and rest.split()[0].isdigit():
            return int(rest.split()[0]) * 1024
    return None
