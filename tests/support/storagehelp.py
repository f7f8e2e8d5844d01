"""Storage test helpers: a sysfs tree for the NVMe readers, blank loop devices, blkio throttling.

There is no NVMe on the development machines, so the NVMe readers get a tree in the kernel's
layout: drivers/pci/pci-sysfs.c prints link speeds as "16.0 GT/s PCIe" (since 4.17; "8 GT/s" before) and
widths as plain numbers; nvme's model and serial are space-padded; /sys/class/nvme/<ctrl> is a
link into /sys/devices/...; the controller's `device` link is its PCI function.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_sysfs(root: Path) -> Path:
    """Two PCIe controllers (nvme1 trained down to Gen3 x2), one NVMe/TCP one, and block devices."""
    pci = {"nvme0": ("0000:3d:00.0", "16.0 GT/s PCIe", "16.0 GT/s PCIe", "4", "4"),
           "nvme1": ("0000:3e:00.0", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "2", "4")}
    for name, (addr, cur, top, width, max_width) in pci.items():
        fn = root / "devices/pci0000:00/0000:00:1d.0" / addr
        for f, v in (("current_link_speed", cur), ("max_link_speed", top),
                     ("current_link_width", width), ("max_link_width", max_width)):
            write(fn / f, v + "\n")
        ctrl = fn / "nvme" / name
        for f, v in (("model", "SAMSUNG MZQL23T8HCLS-00A07               "),
                     ("serial", f"S64HNE0R{name[-1]}00001      "), ("firmware_rev", "GDC5602Q"),
                     ("transport", "pcie"), ("address", addr), ("state", "live")):
            write(ctrl / f, v + "\n")
        write(ctrl / f"{name}n1" / "size", "7501476528\n")  # 3.84 TB in 512-byte sectors
        os.symlink(fn, ctrl / "device")
        (root / "class/nvme").mkdir(parents=True, exist_ok=True)
        os.symlink(ctrl, root / f"class/nvme/{name}")
    fabric = root / "devices/virtual/nvme-fabrics/ctl/nvme10"
    for f, v in (("model", "Linux"), ("serial", "c0ffee"), ("firmware_rev", "6.1"),
                 ("transport", "tcp"), ("address", "traddr=10.0.0.5,trsvcid=4420")):
        write(fabric / f, v + "\n")
    (fabric / "nvme10c10n1").mkdir()  # native multipath: hidden path device
    (fabric / "nvme10c10n2").mkdir()
    os.symlink(fabric, root / "class/nvme/nvme10")
    for blk in ("nvme0n1", "nvme1n1", "nvme10n1", "nvme10n2", "nvme0n1p1", "vda", "loop0"):
        write(root / "class/block" / blk / "dev", "259:0\n")
    return root


class Loops:
    """Blank loop devices over sparse files (direct I/O on); `cleanup` detaches only these."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.devices: list[str] = []

    def make(self, size_mib: int = 32) -> str:
        backing = self.tmp / f"loop{len(self.devices)}.img"
        with open(backing, "wb") as f:
            f.truncate(size_mib * 1024 * 1024)
        dev = subprocess.run(["losetup", "--direct-io=on", "-f", "--show", str(backing)],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
        self.devices.append(dev)
        return dev

    def cleanup(self) -> None:
        for dev in self.devices:
            subprocess.run(["losetup", "-d", dev], capture_output=True, timeout=60)


BLKIO = Path("/sys/fs/cgroup/blkio")


def can_throttle() -> bool:
    """cgroup v1 blkio with per-device throttling (the development machines have it)."""
    return (BLKIO / "blkio.throttle.read_iops_device").exists() and os.geteuid() == 0


@contextmanager
def read_iops_limits(limits: dict[str, int]) -> Iterator[None]:
    """Run the body (and the processes it starts) with read IOPS caps on some block devices.

    This process moves into a fresh blkio cgroup for the duration and back out after; fio
    inherits it, so the capped device really is that slow for the check under test.
    """
    group = BLKIO / f"harness-test-{os.getpid()}"
    group.mkdir()
    try:
        for dev, iops in limits.items():
            rdev = os.stat(dev).st_rdev
            (group / "blkio.throttle.read_iops_device").write_text(
                f"{os.major(rdev)}:{os.minor(rdev)} {iops}\n")
        (group / "cgroup.procs").write_text(str(os.getpid()))
        try:
            yield
        finally:
            (BLKIO / "cgroup.procs").write_text(str(os.getpid()))
    finally:
        group.rmdir()
