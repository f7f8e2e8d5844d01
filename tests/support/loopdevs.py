"""Loop devices for the data-loss guard's tests, on real losetup: make them, read them back, clean up.

Needs root and losetup; `need` skips (with the reason) elsewhere, but fails under CI=true.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from harness.checks.base import CheckContext
from harness.checks.fio import KIND, FioParams
from harness.errors import GuardRefusal
from harness.platform import blockdev

MIB = 1024 * 1024
CI = os.environ.get("CI") == "true"
WRITE_JOB = {"name": "w", "rw": "randwrite", "bs": "4k", "iodepth": 8, "runtime": 1, "size": "8M"}
READ_JOB = {"name": "r", "rw": "randread", "bs": "4k", "iodepth": 8, "runtime": 1, "size": "8M"}


def need(ok: bool, reason: str) -> None:
    """Skip when `ok` is false, but fail under CI=true: CI must exercise the guard."""
    if not ok:
        if CI:
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)


def sh(*argv: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True, input=input, timeout=60)


def major_minor(dev: Path) -> str:
    rdev = os.stat(dev).st_rdev
    return f"{os.major(rdev)}:{os.minor(rdev)}"


class Loops:
    """Makes loop devices over files in tmp_path; `cleanup` undoes swaps, mounts and devices."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.devices: list[Path] = []
        self.dm_names: list[str] = []

    def make(self, size_mib: int = 32, mbr: bool = False, partscan: bool = False) -> Path:
        backing = self.tmp / f"backing{len(self.devices)}.img"
        with open(backing, "wb") as f:
            f.truncate(size_mib * MIB)
            if mbr:  # one Linux (0x83) partition from sector 2048, then the 0x55AA signature
                f.seek(446)
                f.write(bytes([0, 0, 0, 0, 0x83, 0, 0, 0]) + struct.pack("<II", 2048, 8192))
                f.seek(510)
                f.write(b"\x55\xaa")
        argv = ["losetup", "--direct-io=on", "-f", "--show", *(["-P"] if partscan else []), str(backing)]
        dev = Path(sh(*argv).stdout.strip())
        self.devices.append(dev)
        return dev

    def cleanup(self) -> None:
        for name in self.dm_names:
            sh("dmsetup", "remove", "--noudevsync", name, check=False)
        for dev in self.devices:
            sh("swapoff", str(dev), check=False)
            numbers = {major_minor(dev)} | {(p / "dev").read_text().strip()
                                            for p in sysfs(dev).iterdir() if (p / "partition").exists()}
            for line in Path("/proc/self/mountinfo").read_text().splitlines():
                fields = line.split()
                if fields[2] in numbers:
                    sh("umount", fields[4], check=False)
            sh("losetup", "-d", str(dev), check=False)


def sysfs(dev: Path) -> Path:
    return Path(os.path.realpath(f"/sys/dev/block/{major_minor(dev)}"))


@pytest.fixture
def loops(tmp_path, request):
    need(os.geteuid() == 0, "the guard tests need root (loop devices, mounts)")
    need(shutil.which("losetup") is not None, "losetup not found (apt-get install util-linux)")
    made = Loops(tmp_path)
    request.addfinalizer(made.cleanup)
    return made


def read_direct(dev: Path, n_bytes: int) -> bytes:
    """The device's first bytes as on disk (O_DIRECT: no stale page cache)."""
    buf = mmap.mmap(-1, n_bytes)
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    try:
        got = os.readv(fd, [buf])
    finally:
        os.close(fd)
    return bytes(buf[:got])


def head_sha(dev: Path, mib: int = 8) -> str:
    return hashlib.sha256(read_direct(dev, mib * MIB)).hexdigest()


def all_zero(dev: Path) -> bool:
    size = int((sysfs(dev) / "size").read_text()) * 512
    return read_direct(dev, size).count(0) == size


def fio_ctx(run_dir: Path, destructive: bool, allow: bool) -> CheckContext:
    return CheckContext("fio", run_dir, 60, destructive, allow, {}, logging.getLogger("t"))


def run_fio(dev: Path | str, run_dir: Path, destructive: bool = True, allow: bool = True, job=WRITE_JOB):
    params = FioParams.model_validate({"target": str(dev), "jobs": [job]})
    return KIND.run(params, fio_ctx(run_dir, destructive, allow))


def refusal(device) -> str:
    with pytest.raises(GuardRefusal) as err:
        blockdev.check_writable(device)
    return str(err.value)
