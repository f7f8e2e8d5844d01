"""Inventory parsers on real /proc and lsblk captures, and the inventory's derived metrics."""

from __future__ import annotations

from pathlib import Path

from harness.checks.inventory import metrics_from
from harness.parsers import sysinfo
from harness.platform import sysinfo as live

DATA = Path(__file__).parents[1] / "data" / "sysinfo"


def test_cpuinfo():
    got = sysinfo.parse_cpuinfo((DATA / "cpuinfo_amd_epyc_2vcpu_vm.txt").read_text())
    assert got == {"model": "AMD EPYC", "threads": 2, "sockets": 1}


def test_meminfo_in_bytes():
    got = sysinfo.parse_meminfo((DATA / "meminfo_24g_vm.txt").read_text())
    assert got["MemTotal"] == 24684096 * 1024
    assert "HugePages_Total" in got and got["HugePages_Total"] == 0  # no kB suffix: a count


def test_os_release():
    got = sysinfo.parse_os_release((DATA / "os-release_debian12.txt").read_text())
    assert got["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)"
    assert got["VERSION_ID"] == "12"


def test_lsblk_skips_zram_and_keeps_disks():
    disks = sysinfo.parse_lsblk_disks((DATA / "lsblk_vm_virtio_loops.json").read_text())
    assert [d["name"] for d in disks] == ["vda"]
    assert disks[0]["size_bytes"] == 274877906944 and disks[0]["rotational"] is True
    assert disks[0]["serial"] is None


def test_lsblk_nvme_transport_and_string_rota():
    text = ('{"blockdevices":[{"name":"nvme0n1","path":"/dev/nvme0n1","model":"SAMSUNG MZQL23T8HCLS ",'
            '"serial":"S64HNE0R","size":"3840755982336","tran":"nvme","rota":"0","type":"disk"},'
            '{"name":"loop0","type":"loop","size":"1"}]}')
    (d,) = sysinfo.parse_lsblk_disks(text)
    assert d["model"] == "SAMSUNG MZQL23T8HCLS" and d["transport"] == "nvme"
    assert d["rotational"] is False and d["size_bytes"] == 3840755982336


def test_inventory_metrics_from_dict():
    inv = {"cpu": {"online": 224, "sockets": 2, "numa_nodes": 2},
           "memory": {"total_bytes": 2 * 10**12},
           "block_devices": [{"transport": "nvme"}] * 8 + [{"transport": "sata"}],
           "nics": [{"state": "up"}, {"state": "down"}],
           "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8}
    m = {(x.name, tuple(x.labels.items())): x.value for x in metrics_from(inv)}
    assert m[("gpu.count", ())] == 8
    assert m[("host.nvme_count", ())] == 8
    assert m[("host.block_devices", (("transport", "nvme"),))] == 8
    assert m[("host.nics_up", ())] == 1
    assert m[("host.memory", ())] == 2e12


def test_live_collect_without_nvml_says_why():
    inv = live.collect(gpu_probe=lambda: {"available": False, "reason": "NVML not loadable: test",
                                          "gpus": []})
    assert inv["gpus"] == [] and inv["nvml"]["reason"] == "NVML not loadable: test"
    assert inv["cpu"]["online"] >= 1 and inv["memory"]["total_bytes"] > 0
    assert inv["host"]["hostname"]
