"""The data-loss guard's deeper probes: what `blkid -p` and `wipefs` at offset 0 do not see.

* A file system (or LVM PV, RAID member, LUKS) that does not start at offset 0: a disk whose
  partition table was wiped still holds the ext4 that began at 1 MiB. Every MiB boundary in
  the first 64 MiB (and the old DOS start, sector 63) that holds any non-zero byte is probed
  with `blkid -p -O OFFSET`; a backup GPT header in the last sector is looked for too.
* Another loop device that maps an overlapping range of the same backing file.
* Another process that holds the device (or one of its partitions) open for writing.

Each returns the reasons it found to refuse; each refuses when it cannot look.
"""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

MIB = 1024 * 1024
SCAN_MIB = 64
WINDOW = 128 * 1024  # the bytes looked at from each offset (btrfs's magic is at 64 KiB + 64)
OFFSETS = (63 * 512, *(k * MIB for k in range(1, SCAN_MIB)))

Probe = Callable[[list[str]], tuple[int, str, str]]


def _read_direct(path: Path, offset: int, length: int) -> bytes:
    """`length` bytes from `offset` as on the medium (O_DIRECT, aligned: no stale page cache)."""
    start = offset - offset % 4096
    size = (offset - start + length + 4095) // 4096 * 4096
    buf = mmap.mmap(-1, size)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
    try:
        got = os.preadv(fd, [buf], start)
    finally:
        os.close(fd)
    return bytes(buf[offset - start:min(got, offset - start + length)])


def offset_signatures(dev: Path, size: int, logical_block: int, probe: Probe) -> list[str]:
    """Signatures at the plausible starts of a file system past offset 0."""
    found: list[str] = []
    try:
        for off in OFFSETS:
            if off + 4096 > size:
                break
            if not _read_direct(dev, off, min(WINDOW, size - off)).strip(b"\0"):
                continue  # nothing written there: nothing can start there
            rc, out, err = probe(["blkid", "-p", "-O", str(off), "-o", "export", str(dev)])
            if rc == 0:
                tags = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
                kind = tags.get("TYPE") or tags.get("PTTYPE") or "unknown"
                found.append(f"{kind} signature found at offset {off} ({off / MIB:g} MiB; "
                             "blkid -p -O: a file system whose partition table is gone?)")
            elif rc == 8:
                found.append(f"ambivalent signatures at offset {off} (blkid -p -O)")
            elif not (rc == 2 and not err.strip()):
                found.append(f"cannot be probed at offset {off}: blkid exit {rc}: "
                             f"{err.strip()[:200] or 'no reason given'}")
        if size >= 2 * logical_block:
            last = _read_direct(dev, size - logical_block, logical_block)
            if last[:8] == b"EFI PART":
                found.append("a backup GPT header in the last sector (the primary table was wiped?)")
    except OSError as e:
        found.append(f"cannot be probed: reading the device failed: {e.strerror}")
    return found


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _loop_map(sysdir: Path) -> tuple[str, int, int] | None:
    """(backing file, offset, end or -1) of a bound loop device, from sysfs."""
    try:
        backing = (sysdir / "loop" / "backing_file").read_text().strip()
        offset = int((sysdir / "loop" / "offset").read_text())
        limit = int((sysdir / "loop" / "sizelimit").read_text())
    except (OSError, ValueError):
        return None
    return backing, offset, offset + limit if limit else -1


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    a_end = a[1] if a[1] >= 0 else 1 << 62
    b_end = b[1] if b[1] >= 0 else 1 << 62
    return a[0] < b_end and b[0] < a_end


def loop_overlaps(sysdir: Path | None, sys_block: Path = Path("/sys/block")) -> list[str]:
    """Other loop devices mapping an overlapping range of this loop device's backing file."""
    if sysdir is None or not (sysdir / "loop").is_dir():
        return []
    mine = _loop_map(sysdir)
    if mine is None:
        return ["cannot be probed: loop device without a readable mapping in sysfs"]
    my_id = _file_id(mine[0])
    found = []
    for other in sorted(sys_block.glob("loop*")):
        if other.name == sysdir.name:
            continue
        theirs = _loop_map(other)
        if theirs is None:
            continue
        same = theirs[0] == mine[0] or (my_id is not None and _file_id(theirs[0]) == my_id)
        if same and _overlap(mine[1:], theirs[1:]):
            found.append(f"{other.name} maps an overlapping range of the same file {mine[0]} "
                         f"(offset {theirs[1]})")
    return found


def _fds(pid: str) -> Iterator[tuple[str, int]]:
    """(fd, rdev of the block device it names) for each block-device fd of `pid`."""
    base = Path("/proc") / pid / "fd"
    try:
        names = os.listdir(base)
    except OSError:
        return
    for fd in names:
        try:
            st = os.stat(base / fd)
        except OSError:
            continue
        if stat.S_ISBLK(st.st_mode):
            yield fd, st.st_rdev


def writers(numbers: set[str]) -> list[str]:
    """Other processes with one of these devices (major:minor) open for writing."""
    me = str(os.getpid())
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        for fd, rdev in _fds(pid):
            if f"{os.major(rdev)}:{os.minor(rdev)}" not in numbers:
                continue
            try:
                info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
                flags = int(next(ln.split()[1] for ln in info.splitlines() if ln.startswith("flags:")), 8)
            except (OSError, StopIteration, ValueError, IndexError):
                continue
            if flags & os.O_ACCMODE != os.O_RDONLY:
                try:
                    comm = Path(f"/proc/{pid}/comm").read_text().strip()
                except OSError:
                    comm = "?"
                found.append(f"it is open for writing by PID {pid} ({comm})")
    return found
