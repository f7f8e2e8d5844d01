"""Storage measured is storage: fio on memory (tmpfs, an overlay over tmpfs, a loop device over a
tmpfs file, a buffered job the page cache holds) is an invalid run, never a storage pass.

Real mounts (tests run as root) and the real fio through the real CLI; the classification itself
on real /proc/self/mountinfo text."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from clihelp import PASS_PROFILE, QUICK_FIO, harness, results, run_dirs, write

from harness.checks.fio import medium as fio_medium
from harness.checks.fio.jobs import FioJob
from harness.platform import storage

DATA = Path(__file__).parents[1] / "data" / "storage"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounts need root")


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout.strip()


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "ram"
    mnt.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=256m", "harness-test", str(mnt))
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=60)


# --- the classification ---------------------------------------------------------------------

def test_real_mountinfo_tmpfs_is_memory_and_ext4_is_storage():
    table = storage.parse_mountinfo((DATA / "mountinfo_debian12_vm_loops.txt").read_text())
    assert storage.in_memory("/dev/shm/x", table) == "tmpfs /dev/shm"
    assert storage.in_memory("/var/tmp/fio", table) is None  # ext4 on /dev/vda
    assert storage.in_memory("/dev/x", table) == "devtmpfs /dev"


def test_zram_ram_disk_and_overlay_upper_on_tmpfs_are_memory():
    table = storage.parse_mountinfo(
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        "60 27 0:40 / /run rw,nosuid - tmpfs tmpfs rw,size=65536k\n"
        "61 27 252:0 / /scratch rw,relatime - ext4 /dev/zram0 rw\n"
        "62 27 1:0 / /ramdisk rw,relatime - ext4 /dev/ram0 rw\n"
        "63 27 0:41 / /ov rw,relatime - overlay overlay rw,lowerdir=/srv/lower,upperdir=/run/up,"
        "workdir=/run/work\n"
        "64 27 0:42 / /ov2 rw,relatime - overlay overlay rw,lowerdir=/srv/lower,upperdir=/srv/up,"
        "workdir=/srv/work\n")
    assert storage.in_memory("/scratch/f", table) == "zram (compressed RAM) /dev/zram0"
    assert storage.in_memory("/ramdisk", table) == "a RAM disk /dev/ram0"
    assert storage.in_memory("/ov/d", table) == "overlay whose upperdir is on tmpfs /run"
    assert storage.in_memory("/ov2/d", table) is None  # its upper layer is on ext4


def test_buffered_jobs_that_fit_in_the_page_cache_are_flagged():
    jobs = [FioJob(name="cached", rw="randread", size="1G", direct=False),
            FioJob(name="direct", rw="randread", size="1G"),
            FioJob(name="big", rw="read", size="64G", direct=False),
            FioJob(name="ckpt", rw="write", size="1G", direct=False, end_fsync=True, time_based=False),
            FioJob(name="files", rw="read", nrfiles=1000, filesize="1M", numjobs=2, direct=False)]
    got = fio_medium.cached_jobs(jobs, 16 * 2**30, "256M")
    assert got == [
        "measured memory, not storage: job cached is buffered (direct: false) and its working set "
        "(1,024 MiB) fits in the page cache (16.0 GiB available); set direct: true, or a size larger "
        "than the memory",
        "measured memory, not storage: job files is buffered (direct: false) and its working set "
        "(2,000 MiB) fits in the page cache (16.0 GiB available); set direct: true, or a size larger "
        "than the memory"]
    assert fio_medium.cached_jobs(jobs, None, "256M") == []  # memory unknown: nothing claimed


def test_mem_available_reads_meminfo(tmp_path: Path):
    (tmp_path / "meminfo").write_text("MemTotal:       24684096 kB\nMemAvailable:   23000000 kB\n")
    assert storage.mem_available(tmp_path) == 23000000 * 1024
    assert storage.mem_available(tmp_path / "none") is None


# --- real mounts ----------------------------------------------------------------------------

@needs_root
def test_real_overlay_with_its_upper_layer_on_tmpfs(tmp_path: Path, tmpfs: Path):
    lower, merged = tmp_path / "lower", tmp_path / "merged"
    for d in (lower, merged, tmpfs / "up", tmpfs / "work"):
        d.mkdir()
    sh("mount", "-t", "overlay", "overlay", "-o",
       f"lowerdir={lower},upperdir={tmpfs / 'up'},workdir={tmpfs / 'work'}", str(merged))
    try:
        assert storage.in_memory(merged) == f"overlay whose upperdir is on tmpfs {tmpfs}"
        assert storage.in_memory(tmpfs) == f"tmpfs {tmpfs}"
        assert storage.in_memory(lower) is None
    finally:
        subprocess.run(["umount", "-l", str(merged)], capture_output=True, timeout=60)


@needs_root
def test_real_loop_device_over_a_tmpfs_file(tmpfs: Path):
    backing = tmpfs / "disk.img"
    with open(backing, "wb") as f:
        f.truncate(16 * 2**20)
    dev = sh("losetup", "-f", "--show", str(backing))
    try:
        assert fio_medium.device_problems([dev]) == [
            f"measured memory, not storage (target {dev} is {dev} over {backing} on tmpfs {tmpfs})"]
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True, timeout=60)


# --- through the CLI, with the real fio -----------------------------------------------------

@needs_root
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_fio_on_tmpfs_is_errored_not_passed(tmp_path: Path, tmpfs: Path):
    """The false green: fio in a tmpfs passed storage expectations at RAM speed."""
    suite = write(tmp_path / "suite.yaml", QUICK_FIO.replace(
        "    params:\n      jobs:", f"    params:\n      target: {tmpfs}\n      jobs:"))
    profile = write(tmp_path / "p.yaml", PASS_PROFILE)
    out = tmp_path / "out"
    r = harness("run", str(suite), "--profile", str(profile), "-o", str(out))
    assert r.returncode == 3, r.stdout + r.stderr
    assert "ERRORED fio: invalid run: measured memory, not storage (target on tmpfs " in r.stdout
    (run_dir,) = run_dirs(out)
    fio = next(c for c in results(run_dir)["checks"] if c["id"] == "fio")
    assert fio["status"] == "errored"
    assert fio["details"]["measured_memory"][0] == f"measured memory, not storage (target on tmpfs {tmpfs})"
    assert fio["details"]["filesystem"]["type"] == "tmpfs"
    assert any(m["name"] == "fio.iops" for m in fio["metrics"])  # the numbers are kept, not judged
    assert not fio["evaluations"]
    assert results(run_dir)["verdict"] != "ACCEPTED"


@needs_root
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_fio_with_tmpdir_on_tmpfs_is_errored(tmp_path: Path, tmpfs: Path):
    """The default target is the temporary directory: TMPDIR on tmpfs measured RAM."""
    suite = write(tmp_path / "suite.yaml", QUICK_FIO)
    profile = write(tmp_path / "p.yaml", PASS_PROFILE)
    r = harness("run", str(suite), "--profile", str(profile), "-o", str(tmp_path / "out"),
                env={"TMPDIR": str(tmpfs)})
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"measured memory, not storage (target on tmpfs {tmpfs})" in r.stdout
