"""What the guard must find that `blkid -p`/`wipefs` at offset 0 miss (issue #17.2), on real
loop devices: a file system past offset 0, a backup GPT, an overlapping loop mapping, another
process writing, and a mkfs attempted while fio writes."""

# ruff: noqa: F811 (the `loops` fixture comes from tests/support/loopdevs.py, as an argument here)
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from loopdevs import MIB, WRITE_JOB, head_sha, loops, refusal, run_fio, sh  # noqa: F401

from harness.platform import blockdev, blockscan


@pytest.mark.parametrize("offset_mib", [1, 63])
def test_ext4_past_offset_0_is_found(loops, offset_mib: int) -> None:
    dev = loops.make(96)
    sh("mkfs.ext4", "-q", "-F", "-E", f"offset={offset_mib * MIB}", str(dev), "16M")
    assert sh("blkid", "-p", str(dev), check=False).returncode == 2  # what fooled the guard
    before = head_sha(dev, 80)
    msg = refusal(dev)
    assert f"ext4 signature found at offset {offset_mib * MIB} ({offset_mib} MiB" in msg
    assert head_sha(dev, 80) == before


def _plant(dev: Path, image: bytes, offset_mib: int) -> None:
    """Write a header made elsewhere into `dev` at a MiB offset (where a wiped partition began)."""
    with open(dev, "r+b") as f:
        f.seek(offset_mib * MIB)
        f.write(image)
        os.fsync(f.fileno())


@pytest.mark.parametrize("offset_mib", [1, 32])
def test_xfs_past_offset_0_is_found(loops, tmp_path: Path, offset_mib: int) -> None:
    """An XFS made in a partition that started at OFFSET, its partition table since wiped."""
    if not shutil.which("mkfs.xfs"):
        pytest.skip("mkfs.xfs not found (apt-get install xfsprogs)")
    img = tmp_path / "xfs.img"
    with open(img, "wb") as f:
        f.truncate(300 * MIB)  # XFS's smallest file system
    sh("mkfs.xfs", "-q", "-f", str(img))
    dev = loops.make(96)
    _plant(dev, img.read_bytes()[:4 * MIB], offset_mib)  # the superblock and what follows it
    assert sh("blkid", "-p", str(dev), check=False).returncode == 2  # invisible at offset 0
    msg = refusal(dev)
    assert f"xfs signature found at offset {offset_mib * MIB} ({offset_mib} MiB" in msg


def test_an_lvm_physical_volume_past_offset_0_is_found(loops) -> None:
    """An LVM PV label (pvcreate on a partition that started at 1 MiB), the table since wiped."""
    if not shutil.which("pvcreate"):
        pytest.skip("pvcreate not found (apt-get install lvm2)")
    helper, dev = loops.make(16), loops.make(96)
    sh("pvcreate", "-ff", "-y", "--devicesfile", "", str(helper))
    with open(helper, "rb") as f:
        label = f.read(MIB)
    sh("pvremove", "-ff", "-y", "--devicesfile", "", str(helper), check=False)
    _plant(dev, label, 1)
    assert sh("blkid", "-p", str(dev), check=False).returncode == 2
    msg = refusal(dev)
    assert f"LVM2_member signature found at offset {MIB} (1 MiB" in msg


def test_a_backup_gpt_alone_is_found(loops) -> None:
    dev = loops.make(8)
    fd = os.open(dev, os.O_WRONLY)
    try:
        os.pwrite(fd, b"EFI PART" + b"\1" * 504, 8 * MIB - 512)
    finally:
        os.close(fd)
    sh("sync")
    assert "backup GPT header" in refusal(dev)


def test_random_data_without_signatures_passes(loops) -> None:
    dev = loops.make(8)
    fd = os.open(dev, os.O_WRONLY)
    try:
        for k in range(1, 8):  # noise at MiB boundaries (a disk fio wrote before): no signature
            os.pwrite(fd, os.urandom(4096), k * MIB)
    finally:
        os.close(fd)
    sh("sync")
    blockdev.check_writable(dev)


def test_overlapping_loop_mapping_is_refused(loops, tmp_path: Path) -> None:
    dev = loops.make(32)
    backing = tmp_path / "backing0.img"
    other = Path(sh("losetup", "-f", "--show", "-o", str(4 * MIB), str(backing)).stdout.strip())
    loops.devices.append(other)
    assert f"{other.name} maps an overlapping range of the same file {backing}" in refusal(dev)
    assert f"{dev.name} maps an overlapping range" in refusal(other)


def test_disjoint_loop_mappings_pass(loops, tmp_path: Path) -> None:
    backing = tmp_path / "disjoint.img"
    backing.write_bytes(b"")
    os.truncate(backing, 16 * MIB)
    a = Path(sh("losetup", "-f", "--show", "--sizelimit", str(8 * MIB), str(backing)).stdout.strip())
    loops.devices.append(a)
    b = Path(sh("losetup", "-f", "--show", "-o", str(8 * MIB), str(backing)).stdout.strip())
    loops.devices.append(b)
    blockdev.check_writable(a)
    assert blockscan.loop_overlaps(blockdev._sysfs_dir(b)) == []


def test_a_device_another_process_writes_is_refused(loops) -> None:
    dev = loops.make(8)
    code = (f"import os, time; fd = os.open({str(dev)!r}, os.O_RDWR); print('open', flush=True); "
            "time.sleep(60)")
    holder = subprocess.Popen(["python3", "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        assert f"it is open for writing by PID {holder.pid} (python3)" in refusal(dev)
    finally:
        holder.kill()
        holder.wait()
    blockdev.check_writable(dev)  # read-only openers and closed ones do not count


def test_mkfs_during_the_fio_run_is_refused(loops, tmp_path: Path) -> None:
    dev = loops.make(32)
    job = {**WRITE_JOB, "runtime": 5}  # time-based: fio writes for 5 s
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(run_fio(dev, tmp_path / "run", job=job)))
    t.start()
    try:
        time.sleep(2.0)  # the guard has claimed the device and fio is writing
        assert t.is_alive()
        mkfs = sh("mkfs.ext4", "-q", "-F", str(dev), check=False)
    finally:
        t.join(timeout=60)
    assert mkfs.returncode != 0, "mkfs.ext4 wrote a file system while fio ran"
    assert "in use" in mkfs.stderr, mkfs.stderr
    assert done and not getattr(done[0], "problems", ())
    blockdev.check_writable(dev)  # the claim ends with the run: no signature was written
