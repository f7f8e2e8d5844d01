"""The storage edges: NVMe sysfs enumeration, mountinfo, and "is this drive the system's?".

There is no NVMe device on the development machines, so the NVMe readers run on a sysfs tree
built in tmp_path in the kernel's own layout and formats (drivers/pci/pci-sysfs.c prints
"16.0 GT/s PCIe" since 4.17, "8 GT/s" before; model and serial are space-padded; the class
entry is a link into /sys/devices/...). The mount and system-use checks run on the real machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from storagehelp import make_sysfs

from harness.platform import nvme, storage

DATA = Path(__file__).parents[1] / "data" / "storage"
CI = os.environ.get("CI") == "true"


def test_controllers_identity_links_and_namespaces(tmp_path):
    ctrls = nvme.controllers(make_sysfs(tmp_path))
    assert [c.name for c in ctrls] == ["nvme0", "nvme1", "nvme10"]  # numeric order
    c0, c1, c10 = ctrls
    assert (c0.model, c0.serial, c0.firmware, c0.transport, c0.address) == (
        "SAMSUNG MZQL23T8HCLS-00A07", "S64HNE0R000001", "GDC5602Q", "pcie", "0000:3d:00.0")
    assert c0.namespaces == ("nvme0n1",) and c0.dev == "/dev/nvme0"
    assert c0.capacity_bytes == 7501476528 * 512 and c10.capacity_bytes is None
    assert c0.link == nvme.PcieLink(16.0, 4, 16.0, 4)
    assert (c0.link.gen, c0.link.max_gen, c0.link.downgraded) == (4, 4, False)
    assert c1.link is not None and (c1.link.gen, c1.link.width, c1.link.max_gen, c1.link.max_width,
                                    c1.link.downgraded) == (3, 2, 4, 4, True)
    assert c10.link is None and c10.namespaces == ("nvme10c10n1", "nvme10c10n2")
    assert c1.to_dict()["link"] == {"speed_gts": 8.0, "width": 2, "max_speed_gts": 16.0, "max_width": 4,
                                    "gen": 3, "max_gen": 4, "downgraded": True}


def test_namespace_devices_are_whole_namespaces_only(tmp_path):
    assert nvme.namespace_devices(make_sysfs(tmp_path)) == [
        "/dev/nvme0n1", "/dev/nvme1n1", "/dev/nvme10n1", "/dev/nvme10n2"]


def test_no_nvme_at_all(tmp_path):
    assert nvme.controllers(tmp_path) == [] and nvme.namespace_devices(tmp_path) == []


def test_this_machine_has_no_nvme_and_says_so():
    if Path("/sys/class/nvme").exists() and any(Path("/sys/class/nvme").iterdir()):
        pytest.skip("this machine has NVMe controllers")
    assert nvme.controllers() == [] and nvme.namespace_devices() == []


@pytest.mark.parametrize("text, gts", [("16.0 GT/s PCIe", 16.0), ("8 GT/s", 8.0), ("2.5 GT/s PCIe", 2.5),
                                       ("64.0 GT/s PCIe", 64.0), ("Unknown", None), ("", None), (None, None)])
def test_link_speed_formats(text, gts):
    assert nvme.parse_link_speed(text) == gts


def test_unknown_halves_of_a_link():
    assert nvme.PcieLink(None, None, None, None).downgraded is None
    assert nvme.PcieLink(None, 2, None, 4).downgraded is True  # width alone tells
    assert nvme.PcieLink(16.0, None, 16.0, None).downgraded is False
    assert nvme.PcieLink(20.0, 4, 32.0, 4).gen is None  # not a PCIe rate: no generation


def test_parse_mountinfo_real_capture():
    mounts = storage.parse_mountinfo((DATA / "mountinfo_debian12_vm_loops.txt").read_text())
    root = next(m for m in mounts if m.mount_point == "/")
    assert (root.major_minor, root.fstype, root.source) == ("254:0", "ext4", "/dev/vda")
    loop = next(m for m in mounts if m.source == "/dev/loop1")
    assert loop.major_minor == "7:1" and loop.mount_point.endswith("/mnt")
    assert len(mounts) == 20
    assert storage.mount_of("/tmp/x/y", mounts) == root
    assert storage.mount_of("/sys/fs/cgroup/blkio/a", mounts).fstype == "cgroup"
    assert storage.parse_mountinfo("garbage\n1 2 3\n") == []


def test_mount_of_a_real_directory(tmp_path):
    m = storage.mount_of(tmp_path)
    assert m is not None and tmp_path.as_posix().startswith(m.mount_point.rstrip("/") + "/")


def test_read_mdstat_missing_is_none(tmp_path):
    assert storage.read_mdstat(tmp_path) is None
    (tmp_path / "mdstat").write_text("Personalities : \n")
    assert storage.read_mdstat(tmp_path) == "Personalities : \n"


@pytest.fixture
def loop(tmp_path):
    if os.geteuid() != 0 or shutil.which("losetup") is None or shutil.which("mkfs.ext4") is None:
        if CI:
            pytest.fail("CI=true but root, losetup or mkfs.ext4 is missing")
        pytest.skip("needs root, losetup and mkfs.ext4")
    backing = tmp_path / "disk.img"
    with open(backing, "wb") as f:
        f.truncate(32 * 1024 * 1024)
    dev = subprocess.run(["losetup", "--direct-io=on", "-f", "--show", str(backing)],
                         capture_output=True, text=True, check=True).stdout.strip()
    mnt = tmp_path / "mnt"
    yield dev, mnt
    subprocess.run(["umount", str(mnt)], capture_output=True)
    subprocess.run(["losetup", "-d", dev], capture_output=True)


def test_system_use_of_a_real_loop_device(loop):
    dev, mnt = loop
    assert storage.system_use(dev) == []  # blank and unmounted: free for all-nvme
    subprocess.run(["mkfs.ext4", "-q", dev], check=True, capture_output=True)
    mnt.mkdir()
    subprocess.run(["mount", dev, str(mnt)], check=True, capture_output=True)
    assert storage.system_use(dev) == [f"{dev} is mounted at {mnt}"]
    assert storage.mount_of(mnt / "file").source == dev
