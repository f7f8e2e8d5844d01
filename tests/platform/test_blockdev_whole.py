"""The guard looks at the whole device's known superblock places (issue #26.3), on real loop
devices over sparse files: libblkid's offsets from the end (md 0.90/1.0, ZFS L2/L3, RAID
metadata) and the start (LUKS2 secondary headers, btrfs mirrors), and every partition a
backup GPT, a wipefs-erased GPT or a DOS table (signature erased, EBR chain) still names, far
past the first GiB. A clean large device still passes, in a few dozen reads per region."""

# ruff: noqa: F811 (the `loops` fixture comes from tests/support/loopdevs.py, as an argument here)
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from loopdevs import MIB, loops, need, refusal, sh  # noqa: F401

from harness.platform import blkoffsets, blockdev, blockscan

GIB = 1024 * MIB
TIB = 1024 * GIB
ODD = 2 * TIB + 3072  # 2 TiB and 3 KiB: not a multiple of 4 KiB, 64 KiB or 256 KiB


def _sparse_loop(loops, size: int) -> Path:
    backing = loops.tmp / f"sparse{len(loops.devices)}.img"
    with open(backing, "wb") as f:
        f.truncate(size)
    dev = Path(sh("losetup", "--direct-io=on", "-f", "--show", str(backing)).stdout.strip())
    loops.devices.append(dev)
    return dev


def _plant(dev: Path, offset: int, data: bytes) -> None:
    fd = os.open(dev, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def _tools(*names: str) -> None:
    for name in names:
        need(shutil.which(name) is not None, f"{name} not found (scripts/setup.sh --test)")


# (what, where from the device's start on a device of ODD bytes, the bytes planted, whether
# `blkid -p` misses it: no checksum, no nvlist, not a place it looks): offsets written out by
# hand from libblkid's formulas, so a slip in blkoffsets cannot hide itself.
END_MAGICS = [
    ("linux_raid_member (md 1.0)", 2 * TIB - 8192, bytes.fromhex("fc4e2ba9") + b"\1\0\0\0", True),
    ("linux_raid_member (md 0.90)", 2 * TIB - 65536, bytes.fromhex("a92b4efc"), False),
    ("zfs_member (label L2)", 2 * TIB - 512 * 1024 + 128 * 1024, bytes.fromhex("0cb1ba0000000000"), True),
    ("zfs_member (label L3)", 2 * TIB - 128 * 1024 + 5 * 1024, bytes.fromhex("0000000000bab10c"), True),
    ("ddf_raid_member", ODD - 512, bytes.fromhex("de11de11"), False),
    ("isw_raid_member", ODD - 1024, b"Intel Raid ISM Cfg Sig. ", False),
    ("promise_fasttrack_raid_member", ODD - 3087 * 512, b"Promise Technology, Inc.", False),
]


def _plant_at(dev: Path, offset: int, magic: bytes) -> None:
    """`magic` at `offset`, written as whole sectors (the loop device does direct I/O)."""
    head = offset % 512
    _plant(dev, offset - head, bytes(head) + magic + bytes(-(head + len(magic)) % 512))


@pytest.mark.parametrize(("kind", "offset", "magic", "blind"), END_MAGICS, ids=[m[0] for m in END_MAGICS])
def test_a_signature_at_the_end_of_a_large_device_is_refused(loops, kind: str, offset: int, magic: bytes,
                                                             blind: bool) -> None:
    dev = _sparse_loop(loops, ODD)
    _plant_at(dev, offset, magic)
    if blind:
        assert sh("blkid", "-p", str(dev), check=False).returncode == 2  # what fooled the guard
    msg = refusal(dev)
    assert f"{kind} superblock magic at offset {offset} (" in msg, msg
    assert f"{ODD - offset} bytes before the device's end" in msg


@pytest.mark.parametrize(("kind", "offset", "magic"), [
    ("crypto_LUKS (LUKS2 secondary header)", 0x8000, b"SKUL\xba\xbe"),
    ("btrfs (mirror 1)", 64 * MIB + 0x40, b"_BHRfS_M"),
    ("btrfs (mirror 2)", 256 * GIB + 0x40, b"_BHRfS_M"),
])
def test_a_secondary_header_near_the_start_is_refused(loops, kind: str, offset: int, magic: bytes) -> None:
    dev = _sparse_loop(loops, ODD)
    _plant_at(dev, offset, magic)
    if "btrfs" in kind:  # blkid reads btrfs's first superblock only (a LUKS2 one it may find)
        assert sh("blkid", "-p", str(dev), check=False).returncode == 2
    assert f"{kind} superblock magic at offset {offset} (" in refusal(dev)


def test_a_clean_large_device_passes_in_a_few_dozen_reads_per_region(loops) -> None:
    dev = _sparse_loop(loops, ODD)
    blockdev.check_writable(dev)
    reads: list[tuple[int, int]] = []

    def read(off: int, n: int) -> bytes:
        reads.append((off, n))
        return blockscan._read_direct(dev, off, n)

    assert blkoffsets.scan(read, 0, ODD) == []
    assert len(reads) <= 64, len(reads)
    assert sum(n for _, n in reads) <= 2 * MIB


def _ext4_at(dev: Path, offset: int) -> None:
    sh("mkfs.ext4", "-q", "-F", "-E", f"offset={offset}", str(dev), "16M")


def test_ext4_at_2_gib_named_only_by_the_backup_gpt(loops) -> None:
    _tools("sgdisk", "mkfs.ext4")
    dev = _sparse_loop(loops, 3 * GIB)
    start = 2 * GIB + 4 * MIB  # 4 MiB past a GiB: no MiB or GiB scan would come by
    sh("sgdisk", "-n", "1:1M:+64M", "-n", f"2:{start // 512}:+64M", str(dev))
    _ext4_at(dev, start)
    _plant(dev, 0, bytes(MIB))  # the protective MBR, the primary header and its entries
    assert sh("blkid", "-p", str(dev), check=False).returncode == 2
    msg = refusal(dev)
    assert "a backup GPT header in the last sector" in msg
    assert f"ext4 signature found at offset {2 * GIB + 4 * MIB} (2052 MiB" in msg


def test_a_gpt_erased_by_wipefs_still_names_ext4_past_2_gib(loops) -> None:
    """`wipefs -a` erases "EFI PART" in both headers and the protective MBR's 0x55AA, nothing else:
    the entries still say where the file system lies."""
    _tools("sgdisk", "mkfs.ext4", "wipefs")
    dev = _sparse_loop(loops, 3 * GIB)
    start = 2 * GIB + 4 * MIB + 4096
    sh("sgdisk", "-a", "8", "-n", f"1:{start // 512}:+64M", str(dev))
    _ext4_at(dev, start)
    sh("wipefs", "-a", str(dev))
    assert sh("blkid", "-p", str(dev), check=False).returncode == 2
    assert sh("wipefs", "-n", str(dev)).stdout.strip() == ""
    msg = refusal(dev)
    assert "a GPT header whose signature was erased (wipefs?) at LBA 1 naming 1 partition(s)" in msg
    assert f"ext4 signature found at offset {start} (" in msg


def test_a_dos_table_erased_by_wipefs_still_names_its_partitions(loops) -> None:
    """A primary partition at 2 GiB and a logical one (in an extended partition, its EBR kept) at
    2.5 GiB; wipefs erased only the table's 0x55AA."""
    _tools("sfdisk", "mkfs.ext4", "wipefs")
    dev = _sparse_loop(loops, 3 * GIB)
    primary, logical = 2 * GIB + 8 * MIB, 2 * GIB + 512 * MIB + 2 * MIB
    sh("sfdisk", "-q", str(dev), input=(
        f"start={primary // 512}, size={64 * MIB // 512}, type=83\n"
        f"start={(2 * GIB + 512 * MIB) // 512}, size={128 * MIB // 512}, type=5\n"
        f"start={logical // 512}, size={64 * MIB // 512}, type=83\n"))
    _ext4_at(dev, primary)
    _ext4_at(dev, logical)
    sh("wipefs", "-a", str(dev))
    assert sh("blkid", "-p", str(dev), check=False).returncode == 2
    msg = refusal(dev)
    assert f"ext4 signature found at offset {primary} (" in msg
    assert f"ext4 signature found at offset {logical} (" in msg


@pytest.mark.parametrize(("kind", "before_end", "magic"), [
    ("linux_raid_member (md 1.0)", 8192, bytes.fromhex("fc4e2ba9")),
    ("linux_raid_member (md 0.90)", 65536, bytes.fromhex("fc4e2ba9")),
    ("zfs_member (label L3)", 128 * 1024, bytes.fromhex("0cb1ba0000000000")),
])
def test_a_member_at_the_end_of_a_partition_only_the_backup_gpt_names(loops, kind: str, before_end: int,
                                                                      magic: bytes) -> None:
    """md and ZFS keep their superblocks at their partition's end, not the disk's: with the
    primary table gone, only the backup GPT says where that is."""
    _tools("sgdisk")
    dev = _sparse_loop(loops, 3 * GIB)
    sh("sgdisk", "-n", "1:1M:+1G", str(dev))
    end = MIB + GIB
    _plant_at(dev, end - before_end, magic)
    _plant(dev, 0, bytes(MIB))
    msg = refusal(dev)
    at = end - before_end
    assert (f"{kind} superblock magic at offset {at} ({at / MIB:g} MiB), in the partition from {MIB} "
            f"to {end} a table names") in msg, msg


def test_noise_where_a_dos_table_would_be_is_no_reason(loops) -> None:
    """Entries that look like a DOS table without its 0x55AA (a disk fio wrote) are only probed."""
    dev = _sparse_loop(loops, 3 * GIB)
    entry = bytes([0, 0, 0, 0, 0x83, 0, 0, 0]) + (2 * GIB // 512).to_bytes(4, "little")
    entry += (8192).to_bytes(4, "little")
    _plant(dev, 0, bytes(446) + entry + bytes(50))
    _plant(dev, 2 * GIB, os.urandom(MIB))
    blockdev.check_writable(dev)


def test_any_holder_in_sysfs_is_refused(tmp_path: Path) -> None:
    """dm, md and bcache cannot be made on this kernel: the holders branch reads a planted sysfs
    directory (a device and a partition, each with one holder)."""
    sysdir = tmp_path / "sdz"
    for d in (sysdir, sysdir / "sdz1"):
        (d / "holders").mkdir(parents=True)
    (sysdir / "sdz1" / "partition").write_text("1\n")
    (sysdir / "holders" / "md127").symlink_to(tmp_path)
    (sysdir / "sdz1" / "holders" / "bcache0").symlink_to(tmp_path)
    found = blockdev._partitions_and_holders(sysdir)
    assert "sdz is held by md127 (LVM, RAID or device-mapper)" in found
    assert "sdz1 is held by bcache0 (LVM, RAID or device-mapper)" in found
    (sysdir / "holders" / "md127").unlink()
    (sysdir / "sdz1" / "holders" / "bcache0").unlink()
    assert blockdev._partitions_and_holders(sysdir) == ["it has partition sdz1"]
