"""The data-loss guard on real loop devices: it refuses anything that holds data or is in use.

Needs root and losetup; skipped (with the reason) elsewhere, but never skipped under CI=true.
Every loop device, mount, swap and dm target made here is undone by fixture finalizers.
"""

# ruff: noqa: F811 (the `loops` fixture comes from tests/support/loopdevs.py, as an argument here)
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from loopdevs import (
    MIB,
    READ_JOB,
    WRITE_JOB,
    all_zero,
    head_sha,
    loops,  # noqa: F401
    need,
    refusal,
    run_fio,
    sh,
    sysfs,
)

from harness.checks.fio import KIND, FioParams
from harness.errors import GuardRefusal
from harness.platform import blockdev

# --- (a) a device holding an ext4 file system with a file on it ----------------------------

@pytest.fixture
def ext4(loops, tmp_path):
    dev = loops.make(64)
    sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", str(dev))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    sh("mount", str(dev), str(mnt))
    data = os.urandom(MIB)
    (mnt / "data.bin").write_bytes(data)
    sh("sync")
    return dev, mnt, hashlib.sha256(data).hexdigest()


def file_sha_after_remount(dev: Path, mnt: Path) -> str:
    if os.path.ismount(mnt):
        sh("umount", str(mnt))
    sh("mount", "-o", "ro", str(dev), str(mnt))
    try:
        return hashlib.sha256((mnt / "data.bin").read_bytes()).hexdigest()
    finally:
        sh("umount", str(mnt))


def test_mounted_ext4_is_refused_and_left_intact(ext4, tmp_path):
    dev, mnt, sha = ext4
    before = head_sha(dev)
    msg = refusal(dev)
    assert msg.startswith(f"refusing to write to {dev}: ")
    assert f"{dev} is mounted at {mnt}" in msg and "ext4 signature" in msg
    assert "in use" in msg  # the O_EXCL probe got EBUSY
    with pytest.raises(GuardRefusal, match="mounted"):
        run_fio(dev, tmp_path / "run")
    sh("sync")
    assert head_sha(dev) == before
    assert not (tmp_path / "run" / "raw" / "fio" / "fio.json").exists()  # fio never started
    assert file_sha_after_remount(dev, mnt) == sha


def test_unmounted_ext4_is_refused_by_its_signature(ext4, tmp_path):
    dev, mnt, sha = ext4
    sh("umount", str(mnt))
    before = head_sha(dev)
    msg = refusal(dev)
    assert "ext4 signature" in msg and "mounted" not in msg
    with pytest.raises(GuardRefusal, match="ext4 signature"):
        run_fio(dev, tmp_path / "run")
    assert head_sha(dev) == before
    assert file_sha_after_remount(dev, mnt) == sha


# --- (b) a blank device: both opt-ins are needed, then fio really writes --------------------

def test_blank_device_passes_the_guard(loops):
    dev = loops.make()
    blockdev.check_writable(dev)  # no exception
    info = blockdev.describe(dev)
    assert info["size_bytes"] == 32 * MIB and info["path"] == str(dev)


@pytest.mark.parametrize("destructive, allow, missing", [
    (False, False, "missing `destructive: true` in the suite and --allow-destructive"),
    (True, False, "missing --allow-destructive;"),
    (False, True, "missing `destructive: true` in the suite;"),
])
def test_write_without_both_opt_ins_is_refused(loops, tmp_path, destructive, allow, missing):
    dev = loops.make()
    with pytest.raises(GuardRefusal) as err:
        run_fio(dev, tmp_path / "run", destructive, allow)
    assert missing in str(err.value)
    assert "raw-device writes need `destructive: true` in the suite and --allow-destructive" \
        in str(err.value)
    assert all_zero(dev)


def test_read_only_jobs_need_no_opt_in_and_write_nothing(loops, tmp_path):
    dev = loops.make()
    out = run_fio(dev, tmp_path / "run", False, False, job=READ_JOB)
    assert out.problems == ()
    assert {m.name for m in out.metrics} >= {"fio.iops", "fio.bw", "fio.clat_p99"}
    assert all_zero(dev)


def test_both_opt_ins_on_a_blank_device_let_fio_write(loops, tmp_path):
    dev = loops.make()
    out = run_fio(dev, tmp_path / "run")
    assert out.problems == ()
    metrics = {m.name: m for m in out.metrics}
    assert metrics["fio.iops"].value > 0 and metrics["fio.iops"].labels == {"job": "w", "rw": "write"}
    assert metrics["fio.bw"].unit == "GB/s"
    assert out.details["target"] == str(dev) and out.details["device"]["size_bytes"] == 32 * MIB
    assert not all_zero(dev)


# --- (c) partition tables, (d) symlinks, (e) not a block device, (f) swap ----------------------

def test_mbr_partition_table_is_refused(loops):
    dev = loops.make(mbr=True)
    assert "dos signature" in refusal(dev)


def test_device_with_partitions_is_refused(loops):
    dev = loops.make(mbr=True, partscan=True)
    part = f"{dev.name}p1"
    if not (sysfs(dev) / part).exists():
        sh("partx", "-a", str(dev), check=False)  # no udev: ask the kernel to read the table
    need((sysfs(dev) / part).exists(), "the kernel did not create the loop partition")
    msg = refusal(dev)
    assert f"it has partition {part}" in msg and "dos signature" in msg


def test_symlink_is_resolved_to_the_device(loops, tmp_path):
    dev = loops.make()
    sh("mkfs.ext4", "-q", "-F", str(dev))
    link = tmp_path / "by-id-like-link"
    link.symlink_to(dev)
    assert blockdev.resolve(link) == dev and blockdev.is_block_device(link)
    msg = refusal(link)
    assert msg.startswith(f"refusing to write to {dev} (from {link}): ") and "ext4 signature" in msg
    with pytest.raises(GuardRefusal, match="ext4 signature"):
        run_fio(link, tmp_path / "run")


def test_symlink_to_a_blank_device_targets_the_real_node(loops, tmp_path):
    dev = loops.make()
    link = tmp_path / "link"
    link.symlink_to(dev)
    blockdev.check_writable(link)
    (cmd,) = KIND.plan(FioParams.model_validate({"target": str(link), "jobs": [WRITE_JOB]}), {})
    assert f"--filename={dev}" in cmd.argv and "--readonly" not in cmd.argv


def test_regular_file_and_missing_path_are_refused(tmp_path):
    f = tmp_path / "disk.img"
    f.write_bytes(b"\0" * 4096)
    assert refusal(f) == f"refusing to write to {f}: not a block device"
    assert refusal("/dev/null") == "refusing to write to /dev/null: not a block device"
    assert "does not exist" in refusal(tmp_path / "missing")
    assert f.read_bytes() == b"\0" * 4096


def test_active_swap_is_refused(loops):
    dev = loops.make()
    sh("mkswap", str(dev))
    on = sh("swapon", str(dev), check=False)
    if on.returncode != 0:
        pytest.skip(f"swapon is not permitted here: {on.stderr.strip()}")
    msg = refusal(dev)
    assert f"{dev} is in use as swap" in msg and "swap signature" in msg


def test_holders_are_refused(loops):
    dev = loops.make()
    need(shutil.which("dmsetup") is not None, "dmsetup not found (apt-get install dmsetup)")
    name = f"harness-guard-{dev.name}"
    made = sh("dmsetup", "create", name, "--noudevsync", "--table",
              f"0 {32 * MIB // 512} linear {dev} 0", check=False)
    if made.returncode != 0:
        pytest.skip(f"this kernel has no usable device-mapper: {made.stderr.strip().splitlines()[0]}")
    loops.dm_names.append(name)
    assert "is held by dm-" in refusal(dev)


# --- fail safe: unprobeable devices and missing tools ------------------------------------------

def test_permission_denied_is_refused_as_unprobeable(loops):
    dev = loops.make()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop to nobody, then ask the guard
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            try:
                blockdev.check_writable(dev)
                msg = "ALLOWED"
            except GuardRefusal as e:
                msg = str(e)
            os.write(write_end, msg.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as r:
        msg = r.read().decode()
    os.waitpid(pid, 0)
    assert msg.startswith(f"refusing to write to {dev}: ")
    assert "cannot be probed: permission denied" in msg


def test_missing_probe_tools_refuse_with_the_install_hint(loops, tmp_path, monkeypatch):
    dev = loops.make()
    empty = tmp_path / "empty-path"
    empty.mkdir()
    with monkeypatch.context() as m:  # PATH back before `loops` detaches (losetup must be found)
        m.setenv("PATH", str(empty))
        msg = refusal(dev)
    for tool in ("lsblk", "blkid", "wipefs"):
        assert f"cannot be probed: {tool} not found; install it with: apt-get install util-linux" in msg
