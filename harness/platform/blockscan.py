"""The data-loss guard's deeper probes: what `blkid -p` and `wipefs` at offset 0 do not see.

* A file system (or LVM PV, RAID member, LUKS) that does not start at offset 0: a disk whose
  partition table was wiped still holds the ext4 that began at 1 MiB. Every place a partition
  starts is probed with `blkid -p -O OFFSET` when it holds any non-zero byte: every MiB
  boundary in the first 64 MiB, the classic sector starts (34: `sgdisk -a1`, 40, 63: DOS, 64,
  128, 256), and every partition a table names (with `-S` its size, so blkid sees its end
  too); the MiB boundaries up to 1 GiB when they hold a known superblock magic (one blkid
  per MiB of a disk fio filled would take minutes).
* The tables that name partitions: every GPT header (with its signature, or erased by wipefs,
  which leaves the rest) and a DOS table's entries and EBR chain, even without its 0x55AA.
* Superblock magics at libblkid's places relative to the start and the end of the device and
  of every named partition (blkoffsets: md 0.90/1.0 and ZFS L2/L3 at the end, RAID metadata
  in the last sectors, btrfs mirrors, LUKS2 secondary headers, ...).
* A GPT header anywhere a table could have been left: LBA 1, the last sector, the sector its
  primary names, and the last sector of every MiB in the first GiB and of every GiB after
  (the backup of a disk that grew stays where the old disk ended).
* Another loop device that maps an overlapping range of the same backing file, or whose
  backing file is this device (or one of its partitions).
* Another process that holds the device (or one of its partitions) open for writing.

Each returns the reasons it found to refuse; each refuses when it cannot look.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

from harness.platform import blkoffsets

MIB = 1024 * 1024
GIB = 1024 * MIB
SCAN_MIB = 1024
WINDOW = 128 * 1024  # the bytes looked at from each offset (btrfs's magic is at 64 KiB + 64)
SECTOR_STARTS = (34, 40, 63, 64, 128, 256)  # 512-byte sectors where partitions start below 1 MiB
EVERY_MIB = 64  # below this, any data at a MiB boundary is probed; above, only a known magic
OFFSETS = (*(n * 512 for n in SECTOR_STARTS), *(k * MIB for k in range(1, SCAN_MIB)))
# (offset in the window, bytes): the magics of what a wiped partition most often held, as
# libblkid reads them (ext2/3/4, f2fs, xfs, btrfs, LVM2 PV in sectors 0-3, LUKS 1/2, md 1.1 and
# 1.2, bcache, swap with 4 KiB pages, NTFS, FAT, squashfs, ISO 9660, a DOS table, a GPT)
MAGICS = ((1024 + 56, b"\x53\xef"), (1024, b"\x10\x20\xf5\xf2"), (0, b"XFSB"), (65536 + 64, b"_BHRfS_M"),
          *((512 * n, b"LABELONE") for n in range(4)), (0, b"LUKS\xba\xbe"), (0, b"SKUL\xba\xbe"),
          (0, b"\xfc\x4e\x2b\xa9"), (4096, b"\xfc\x4e\x2b\xa9"),
          (4096 + 24, bytes.fromhex("c68573f64e1a45ca8265f57f48ba6d81")), (4086, b"SWAPSPACE2"),
          (4086, b"SWAP-SPACE"), (3, b"NTFS    "), (54, b"FAT"), (82, b"FAT32"), (0, b"hsqs"),
          (32769, b"CD001"), (510, b"\x55\xaa"), (512, b"EFI PART"))
MAX_GPT_ENTRIES = 1024

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


GPT_REV_AND_SIZE = b"\x00\x00\x01\x00\x5c\x00\x00\x00"  # revision 1.0, header size 92
EXTENDED = (0x05, 0x0F, 0x85)  # DOS extended partitions: a chain of EBRs
MAX_EBRS = 128
MAX_REGIONS = 128  # partition regions scanned for superblocks (a GPT names up to 128 as a rule)

Region = tuple[int, int]  # [start, end) in bytes


def _gpt_at(dev: Path, offset: int, block: int, strict: bool) -> tuple[bool, list[Region]] | None:
    """(signature erased, the partitions it names) of a GPT header at `offset`; None when there is
    none. `strict`: only a header with its signature that names this place as its own LBA counts
    (the places searched by the MiB and GiB could hold a stray copy in a file system's data). A
    header whose "EFI PART" was erased (wipefs erases just those 8 bytes) counts when not strict
    and the rest of it (revision 1.0, size 92, its own LBA) still says what it was."""
    head = _read_direct(dev, offset, block)
    if len(head) < 92:
        return None
    my_lba, entries_lba = struct.unpack_from("<Q", head, 24)[0], struct.unpack_from("<Q", head, 72)[0]
    erased = head[:8] != b"EFI PART"
    if erased and (strict or head[8:16] != GPT_REV_AND_SIZE or my_lba * block != offset):
        return None
    if my_lba * block != offset:
        return None if strict else (erased, [])
    count, size = struct.unpack_from("<II", head, 80)
    if not (0 < count <= MAX_GPT_ENTRIES and 128 <= size <= 4096):
        return erased, []
    table = _read_direct(dev, entries_lba * block, count * size)
    regions = []
    for i in range(len(table) // size):
        entry = table[i * size:(i + 1) * size]
        if entry[:16].strip(b"\0"):  # a used entry: its type GUID is not zero
            first, last = struct.unpack_from("<QQ", entry, 32)
            regions.append((first * block, (last + 1) * block))
    return erased, regions


def _gpt_places(dev: Path, size: int, block: int) -> dict[int, bool]:
    """Where GPT headers may lie, each with whether it must name itself (strict): LBA 1, the
    last sector and the backup LBA 1's header names (not strict), and the last sector of every
    MiB in the first GiB and of every GiB after (strict)."""
    places = {k * MIB - block: True for k in range(1, SCAN_MIB + 1)}
    places.update({k * GIB - block: True for k in range(2, size // GIB + 1)})
    places.update({block: False, size - block: False})
    head = _read_direct(dev, block, block)
    if len(head) >= 40 and (head[:8] == b"EFI PART" or head[8:16] == GPT_REV_AND_SIZE):
        places[struct.unpack_from("<Q", head, 32)[0] * block] = False  # its alternate LBA
    return {p: strict for p, strict in sorted(places.items()) if 0 < p <= size - block}


def gpt_tables(dev: Path, size: int, block: int) -> tuple[list[str], list[Region]]:
    """(reasons, partition regions) from every GPT header found on the device."""
    found: list[str] = []
    regions: list[Region] = []
    for place, strict in _gpt_places(dev, size, block).items():
        got = _gpt_at(dev, place, block, strict)
        if got is None:
            continue
        erased, named = got
        regions += named
        if place == size - block:
            where = "a backup GPT header in the last sector (the primary table was wiped?)"
        elif place == block:
            where = "a GPT header at LBA 1"
        else:
            where = (f"a GPT header at offset {place} ({place / MIB:g} MiB; not in the last sector: "
                     "the backup of a disk that grew?)")
        if erased:
            where = where.replace("a GPT header", "a GPT header whose signature was erased (wipefs?)", 1)
            where = where.replace("a backup GPT header", "a backup GPT header whose signature was erased "
                                  "(wipefs?)", 1)
        found.append(where + (f" naming {len(named)} partition(s) from offset {min(named)[0]}"
                              if named else ""))
    return found, sorted(set(regions))


def mbr_regions(dev: Path, size: int) -> list[Region]:
    """The partitions a DOS table (or what wipefs left of it: the entries without 0x55AA) names,
    logical ones through the chain of EBRs (each with its signature), protective entries aside.
    Not a reason by itself: a disk fio filled with noise may look like one; its places are probed."""
    sectors = size // 512
    out: list[Region] = []

    def entries(sector: bytes, base: int) -> list[tuple[int, int, int]]:
        got = []
        for i in range(4):
            e = sector[446 + 16 * i:462 + 16 * i]
            if len(e) < 16 or e[0] not in (0, 0x80) or e[4] in (0, 0xEE):
                continue
            lba, count = struct.unpack_from("<II", e, 8)
            if lba and count and base + lba + count <= sectors:
                got.append((e[4], base + lba, count))
        return got

    first = entries(_read_direct(dev, 0, 512), 0)
    for kind, lba, count in first:
        if kind not in EXTENDED:
            out.append((lba * 512, (lba + count) * 512))
            continue
        ebr, seen = lba, set[int]()
        while ebr not in seen and len(seen) < MAX_EBRS:
            seen.add(ebr)
            sector = _read_direct(dev, ebr * 512, 512)
            if sector[510:512] != b"\x55\xaa":
                break
            links = entries(sector, 0)
            nxt = None
            for k, rel, n in links:
                if k in EXTENDED:
                    nxt = lba + rel  # the next EBR, relative to the extended partition's start
                elif ebr + rel + n <= sectors:
                    out.append(((ebr + rel) * 512, (ebr + rel + n) * 512))
            if nxt is None:
                break
            ebr = nxt
    return sorted(set(out))


def _magic(window: bytes) -> bool:
    """Whether the bytes at a possible partition start hold a known superblock magic."""
    return any(window[at:at + len(magic)] == magic for at, magic in MAGICS)


def _blkid_at(dev: Path, off: int, length: int | None, probe: Probe) -> list[str]:
    """What `blkid -p -O OFF [-S LENGTH]` finds in a region (a partition start or a MiB)."""
    argv = ["blkid", "-p", "-O", str(off), *(["-S", str(length)] if length else []), "-o", "export", str(dev)]
    rc, out, err = probe(argv)
    if rc == 0:
        tags = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        kind = tags.get("TYPE") or tags.get("PTTYPE") or "unknown"
        return [f"{kind} signature found at offset {off} ({off / MIB:g} MiB; "
                "blkid -p -O: a file system whose partition table is gone?)"]
    if rc == 8:
        return [f"ambivalent signatures at offset {off} (blkid -p -O)"]
    if not (rc == 2 and not err.strip()):
        why = err.strip()[:200] or "no reason given"
        return [f"cannot be probed at offset {off}: blkid exit {rc}: {why}"]
    return []


def _where(off: int, size: int, region: Region) -> str:
    start, end = region
    if region == (0, size):
        tail = f"{end - off} bytes before the device's end" if off - start > end - off else ""
        return f"offset {off} ({off / MIB:g} MiB{'; ' + tail if tail else ''})"
    return f"offset {off} ({off / MIB:g} MiB), in the partition from {start} to {end} a table names"


def region_signatures(dev: Path, size: int, block: int, regions: list[Region]) -> list[str]:
    """Superblock magics at libblkid's places from the start and the end of the whole device and
    of every partition a table names (blkoffsets). Weak magics are left to blkid: the whole
    device's `blkid -p` and each region's `blkid -p -O START -S SIZE` look at them with checksums."""
    found: list[str] = []
    for region in [(0, size), *regions[:MAX_REGIONS]]:
        start, end = region
        hits = blkoffsets.scan(lambda off, n: _read_direct(dev, off, n), start, end - start, block)
        found += [f"{h.kind} superblock magic at {_where(h.offset, size, region)}"
                  for h in hits if not h.weak]
    return found


def offset_signatures(dev: Path, size: int, logical_block: int, probe: Probe) -> list[str]:
    """Signatures at the plausible starts of a file system past offset 0, at libblkid's places
    from the start and end of the device and of every partition a table names, and GPT headers."""
    found: list[str] = []
    try:
        tables, regions = gpt_tables(dev, size, logical_block)
        found += tables
        regions = sorted({*regions, *mbr_regions(dev, size)})
        regions = sorted({(s, min(e, size)) for s, e in regions if 0 < s < min(e, size)})
        ends = {s: e for s, e in regions}
        for off in sorted({*OFFSETS, *ends}):
            if off + 4096 > size:
                continue
            window = _read_direct(dev, off, min(WINDOW, size - off))
            if not window.strip(b"\0"):
                continue  # nothing written there: nothing can start there
            if off > EVERY_MIB * MIB and off not in ends and not _magic(window):
                continue
            found += _blkid_at(dev, off, ends[off] - off if off in ends else None, probe)
        found += region_signatures(dev, size, logical_block, regions)
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


def backed_loops(numbers: set[str], sys_block: Path = Path("/sys/block")) -> list[str]:
    """Loop devices whose backing file is one of these devices (major:minor): writing this device
    rewrites theirs, and whatever is mounted from them (the kernel lists no holder for it)."""
    found = []
    for other in sorted(sys_block.glob("loop*")):
        try:
            backing = (other / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        backing = backing.removesuffix(" (deleted)")
        try:
            rdev = os.stat(backing).st_rdev if stat.S_ISBLK(os.stat(backing).st_mode) else None
        except OSError:
            continue
        if rdev is not None and f"{os.major(rdev)}:{os.minor(rdev)}" in numbers:
            found.append(f"it backs loop device {other.name} (its backing file is {backing})")
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
