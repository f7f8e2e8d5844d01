"""The guard's blind spots of issue #26.3, on real loop devices: a device that backs another loop
device (whose file system is mounted), a file system at 100 MiB or at 17 KiB (`sgdisk -a1`) once
the partition table is gone, and the backup GPT of a disk that grew (not in the last sector)."""

# ruff: noqa: F811 (the `loops` fixture comes from tests/support/loopdevs.py, as an argument here)
from __future__ import annotations

import os
import shutil
from pathlib import Path

from loopdevs import MIB, head_sha, loops, need, refusal, sh, sysfs  # noqa: F401

from harness.platform import blockdev


def _sgdisk() -> None:
    need(shutil.which("sgdisk") is not None, "sgdisk not found (apt-get install gdisk)")


def _zero(dev: Path, offset: int, length: int) -> None:
    fd = os.open(dev, os.O_WRONLY)
    try:
        os.pwrite(fd, bytes(length), offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def test_a_device_that_backs_a_mounted_loop_device_is_refused(loops, tmp_path: Path) -> None:
    """The file system lies past every offset the guard probes (1100 MiB + 4 KiB, inside a loop
    device made over the target): only the loop mapping tells that writing would destroy it."""
    dev = loops.make(1200)
    inner = Path(sh("losetup", "-f", "--show", "-o", str(1100 * MIB + 4096), str(dev)).stdout.strip())
    loops.devices.insert(0, inner)  # detached (and unmounted) before the device under it
    sh("mkfs.ext4", "-q", "-F", str(inner))
    (tmp_path / "mnt").mkdir()
    sh("mount", str(inner), str(tmp_path / "mnt"))
    (tmp_path / "mnt" / "data").write_text("precious")
    msg = refusal(dev)
    assert f"it backs loop device {inner.name} (its backing file is {dev})" in msg
    assert (tmp_path / "mnt" / "data").read_text() == "precious"


def test_a_device_with_a_loop_device_over_it_but_nothing_mounted_is_still_refused(loops) -> None:
    dev = loops.make(16)
    inner = Path(sh("losetup", "-f", "--show", str(dev)).stdout.strip())
    loops.devices.insert(0, inner)
    assert f"it backs loop device {inner.name}" in refusal(dev)
    sh("losetup", "-d", str(inner))
    blockdev.check_writable(dev)  # once the mapping is gone the blank device passes


def test_ext4_at_100_mib_after_the_table_is_wiped(loops) -> None:
    _sgdisk()
    dev = loops.make(160)
    sh("sgdisk", "-n", "1:100M:+40M", str(dev))
    sh("mkfs.ext4", "-q", "-F", "-E", f"offset={100 * MIB}", str(dev), "16M")
    sh("sgdisk", "-Z", str(dev))  # both GPT copies and the protective MBR gone
    assert sh("blkid", "-p", str(dev), check=False).returncode == 2  # nothing at offset 0
    before = head_sha(dev, 120)
    assert f"ext4 signature found at offset {100 * MIB} (100 MiB" in refusal(dev)
    assert head_sha(dev, 120) == before


def test_ext4_at_17_kib_from_sgdisk_a1_after_the_table_is_wiped(loops) -> None:
    _sgdisk()
    dev = loops.make(48)
    sh("sgdisk", "-a", "1", "-n", "1:34:+20M", str(dev))  # the first usable sector: 17 KiB
    sh("mkfs.ext4", "-q", "-F", "-E", f"offset={34 * 512}", str(dev), "16M")
    sh("sgdisk", "-Z", str(dev))
    assert sh("blkid", "-p", str(dev), check=False).returncode == 2
    assert f"ext4 signature found at offset {34 * 512} (0.0166016 MiB" in refusal(dev)


def test_the_backup_gpt_of_a_disk_that_grew_is_found(loops) -> None:
    """A GPT made on a 64 MiB disk keeps its backup at the old end when the disk grows to 96 MiB;
    the primary wiped, nothing is in the last sector, and the old backup still names partition 1."""
    _sgdisk()
    dev = loops.make(64)
    sh("sgdisk", "-n", "1:1M:+16M", str(dev))
    backing = Path((sysfs(dev) / "loop" / "backing_file").read_text().strip())
    os.truncate(backing, 96 * MIB)
    sh("losetup", "-c", str(dev))
    assert blockdev.describe(dev)["size_bytes"] == 96 * MIB
    _zero(dev, 0, MIB)  # the protective MBR, the primary header and its entries
    assert sh("blkid", "-p", str(dev), check=False).returncode == 2
    msg = refusal(dev)
    assert f"a GPT header at offset {64 * MIB - 512} (63.9995 MiB; not in the last sector" in msg
    assert f"naming 1 partition(s) from offset {MIB}" in msg
