"""Where superblocks live relative to the start AND the end of a device or partition, and a
cheap raw scan of those places (a few dozen 4 KiB reads per region).

The offsets are libblkid's (util-linux, libblkid/src/superblocks/<file>.c, cited per row) and,
for btrfs's mirrors and ZFS's uberblocks, the file systems' own. `blkid -p` on the whole
device already looks at most of them, but only with checksums and priorities: a half-wiped
md or ZFS member, a LUKS2 secondary header (skipped by blkid's safe probe), a btrfs mirror,
or any of these at the end of a partition whose table is gone stay invisible to it.

A hit on a magic of 8 or more bytes (or a multi-byte magic at its exact place near the end)
is reason enough to refuse; `weak` magics (ext's two bytes, silicon's mostly-zero word) are
only a reason to ask `blkid -p -O START -S SIZE` about that region.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
PAGE = 4096

MD_MAGIC_LE = bytes.fromhex("fc4e2ba9")  # linux_raid.c: MD_SB_MAGIC 0xa92b4efc, little endian
MD_MAGIC_BE = bytes.fromhex("a92b4efc")  # md 0.90 may be big endian (linux_raid.c probe_raid0)
ZFS_UB_MAGICS = (bytes.fromhex("0cb1ba0000000000"), bytes.fromhex("0000000000bab10c"))  # 0x00bab10c
ZFS_LABEL = 256 * KIB  # zfs.c VDEV_LABEL_SIZE; 4 labels, L0/L1 at the start, L2/L3 at the end
ZFS_UB_RING = (128 * KIB, 256 * KIB)  # OpenZFS vdev_impl.h: pad 8K + boot 8K + nvlist 112K, then
ZFS_UB_STRIDE = KIB  # the 128K uberblock ring (slots of 1 KiB << max(0, ashift - 10))
ZFS_MINDEVSIZE = 64 * MIB  # zfs.c
MD_RESERVED = 0x10000  # linux_raid.c MD_RESERVED_BYTES
PROMISE_SECTORS = (63, 255, 256, 16, 399, 591, 675, 735, 911, 974, 991, 951, 3087)  # promise_raid.c
LUKS2_SECONDARY = (0x4000, 0x8000, 0x10000, 0x20000, 0x40000, 0x80000, 0x100000, 0x200000,
                   0x400000)  # luks.c LUKS2_HDR2_OFFSETS


@dataclass(frozen=True)
class Place:
    """A magic expected `offset` bytes from the region's start (already resolved for the end)."""

    kind: str
    offset: int
    magic: bytes
    weak: bool = False


@dataclass(frozen=True)
class Hit:
    kind: str
    offset: int  # absolute, in bytes from the device's start
    weak: bool


def start_places() -> list[Place]:
    """Magics at fixed offsets from the start of a region."""
    p = [
        Place("ext2/3/4", 0x400 + 0x38, b"\x53\xef", weak=True),  # ext.c EXT_SB_OFF + EXT_MAG_OFF
        Place("xfs", 0, b"XFSB"),  # xfs.c
        Place("btrfs", 64 * KIB + 0x40, b"_BHRfS_M"),  # btrfs.c kboff 64, sboff 0x40
        # btrfs mirrors (kernel fs/btrfs/disk-io.h btrfs_sb_offset: 16 KiB << 12 * mirror)
        Place("btrfs (mirror 1)", 64 * MIB + 0x40, b"_BHRfS_M"),
        Place("btrfs (mirror 2)", 256 * GIB + 0x40, b"_BHRfS_M"),
        *(Place("LVM2_member", 512 * n + 0x18, b"LVM2 001") for n in range(4)),  # lvm.c, sectors 0-3
        Place("linux_raid_member (md 1.1)", 0, MD_MAGIC_LE),  # linux_raid.c probe_raid1(pr, 0)
        Place("linux_raid_member (md 1.2)", 0x1000, MD_MAGIC_LE),  # probe_raid1(pr, 0x1000)
        Place("bcache", 0x1000 + 24, bytes.fromhex("c68573f64e1a45ca8265f57f48ba6d81")),  # bcache.c
        *(Place("swap", page - 10, magic) for page in (0x1000, 0x2000, 0x4000, 0x8000, 0x10000)
          for magic in (b"SWAPSPACE2", b"SWAP-SPACE")),  # swap.c sboff 0xff6 ... 0xfff6
        Place("crypto_LUKS", 0, b"LUKS\xba\xbe"),  # luks.c LUKS_MAGIC
        *(Place("crypto_LUKS (LUKS2 secondary header)", off, b"SKUL\xba\xbe") for off in LUKS2_SECONDARY),
        *(Place("stratis", off + 4, b"!Stra0tis\x86\xff\x02^\x41rh") for off in (512, 512 * 9)),  # stratis.c
        Place("vdo", 0, b"dmvdo001"),  # vdo.c
        Place("ceph_bluestore", 0, b"bluestore block device"),  # bluestore.c
        *(Place("hpt37x_raid_member", 4 * KIB + 544, m)
          for m in (b"\xf0\x16\x78\x5a", b"\xfd\x16\x78\x5a")),  # highpoint_raid.c kboff 4, sboff 544
    ]
    return p


def end_places(size: int, sector: int = 512) -> list[Place]:
    """Magics placed relative to the end of a region of `size` bytes (offsets from its start)."""
    p: list[Place] = []
    if size > MD_RESERVED:  # linux_raid.c probe_raid: 0.90 in the last 64K-aligned 64 KiB
        md090 = (size & ~(MD_RESERVED - 1)) - MD_RESERVED
        p += [Place("linux_raid_member (md 0.90)", md090, m) for m in (MD_MAGIC_LE, MD_MAGIC_BE)]
        p.append(Place("linux_raid_member (md 1.0)", (size & ~(PAGE - 1)) - 0x2000, MD_MAGIC_LE))
    last = (size // 512 - 1) * 512
    # ddf_raid.c: the anchor header 1 or 257 sectors before the end; isw_raid.c: 2 sectors
    p += [Place("ddf_raid_member", (size // 512 - n) * 512, b"\xde\x11\xde\x11") for n in (1, 257)]
    p.append(Place("isw_raid_member", (size // sector - 2) * sector, b"Intel Raid ISM Cfg Sig. "))
    p.append(Place("lsi_mega_raid_member", last, b"$XIDE$"))  # lsi_raid.c
    p.append(Place("nvidia_raid_member", (size // 512 - 2) * 512, b"NVIDIA  "))  # nvidia_raid.c
    p += [Place("promise_fasttrack_raid_member", (size // 512 - n) * 512, b"Promise Technology, Inc.")
          for n in PROMISE_SECTORS if size // 512 >= n]  # promise_raid.c
    p += [Place("hpt45x_raid_member", (size // 512 - 11) * 512, m)
          for m in (b"\xf3\x16\x78\x5a", b"\xfd\x16\x78\x5a")]  # highpoint_raid.c
    # silicon_raid.c: SILICON_MAGIC 0x2F000000 at 0x60 of the last sector
    p.append(Place("silicon_medley_raid_member", last + 0x60, b"\x00\x00\x00\x2f", weak=True))
    if size >= 0x10000:  # drbd.c: kboff -4 (4 KiB before the end), magic at offset 60 of md_on_disk_08
        p += [Place("drbd", size - 4096 + 60, b"\x83\x74\x02" + bytes([v])) for v in (0x6b, 0x6c, 0x6d)]
    return [q for q in p if q.offset >= 0 and q.offset + len(q.magic) <= size]


def zfs_rings(size: int) -> list[tuple[str, int]]:
    """(label, offset of its uberblock ring) of the four ZFS labels (zfs.c label_offset)."""
    if size < ZFS_MINDEVSIZE:
        return []
    align = size % ZFS_LABEL
    labels = [n * ZFS_LABEL + (0 if n < 2 else size - 4 * ZFS_LABEL - align) for n in range(4)]
    return [(f"zfs_member (label L{n})", off + ZFS_UB_RING[0]) for n, off in enumerate(labels)]


Reader = Callable[[int, int], bytes]  # (offset, length) -> the bytes there (short at the end)


def scan(read: Reader, start: int, size: int, sector: int = 512) -> list[Hit]:
    """The magics found in the region [start, start + size), each at its absolute offset."""
    pages: dict[int, bytes] = {}

    def at(off: int, length: int) -> bytes:
        first = off - off % PAGE
        out = b""
        for page in range(first, off + length, PAGE):
            if page not in pages:
                pages[page] = read(page, PAGE)
            out += pages[page]
        return out[off - first:off - first + length]

    hits: list[Hit] = []
    for place in [*(q for q in start_places() if q.offset + len(q.magic) <= size), *end_places(size, sector)]:
        if at(start + place.offset, len(place.magic)) == place.magic:
            hits.append(Hit(place.kind, start + place.offset, place.weak))
    ring = ZFS_UB_RING[1] - ZFS_UB_RING[0]
    for kind, off in zfs_rings(size):
        data = read(start + off, ring)
        for slot in range(0, len(data), ZFS_UB_STRIDE):
            if data[slot:slot + 8] in ZFS_UB_MAGICS:
                hits.append(Hit(kind, start + off + slot, False))
                break
    return hits
