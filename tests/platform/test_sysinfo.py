"""Inventory parsers on real /proc and lsblk captures, and the inventory's derived metrics."""

from __future__ import annotations

import os
import time
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


def _names(inv):
    return {m.name: m.value for m in metrics_from(inv) if not m.labels}


def test_gpu_count_without_nvml_is_the_pci_count_or_unknown_never_zero():
    from harness.checks.inventory import unknown_findings

    why = "8 NVIDIA GPUs on the PCI bus but NVML not loadable: is the driver loaded? (x)"
    bus = [{"pci_bus_id": f"0000:{i:02x}:00.0", "device_id": "0x2330"} for i in range(8)]
    inv = {"gpus": [], "pci_gpus": bus, "unknown": {"gpus": why}}
    assert _names(inv)["gpu.count"] == 8
    unread = {"gpus": [], "pci_gpus": [], "unknown": {"gpus": "NVML not loadable: x",
                                                       "pci_gpus": "/sys/bus/pci/devices not readable"}}
    assert "gpu.count" not in _names(unread)
    (ev,) = unknown_findings(unread, {"gpu": {"count": 8}})
    assert ev.metric == "gpu.count" and ev.outcome.value == "error"
    assert ev.message == "not measured: NVML not loadable: x"
    assert unknown_findings(unread, {"gpu": {"count": 0}}) == ()  # generic: nothing expected
    cpu_only = {"gpus": [], "pci_gpus": [], "unknown": {"gpus": "NVML not loadable: x"}}
    assert _names(cpu_only)["gpu.count"] == 0  # the bus was read: no GPU is a fact


def test_nvme_count_when_lsblk_failed_is_unknown():
    from harness.checks.inventory import unknown_findings

    inv = {"block_devices": [], "unknown": {"block_devices": "lsblk failed (exit status 1): boom"}}
    names = {m.name for m in metrics_from(inv)}
    assert "host.nvme_count" not in names and "host.block_devices" not in names
    (ev,) = unknown_findings(inv, {"nvme_count": 8})
    assert ev.metric == "host.nvme_count" and ev.message == "not measured: lsblk failed (exit status 1): boom"
    assert _names({"block_devices": []})["host.nvme_count"] == 0  # lsblk ran and listed none


def test_unread_cpu_facts_are_left_out_not_zero():
    names = _names({"cpu": {"online": None, "threads": 0, "sockets": None, "numa_nodes": 1}})
    assert "host.cpu_cores" not in names and "host.cpu_sockets" not in names
    assert names["host.numa_nodes"] == 1


def test_live_collect_reads_the_pci_tree_and_a_failing_lsblk(tmp_path, monkeypatch):
    from pcisysfs import lines, write_tree

    root = write_tree(tmp_path / "devices", lines())
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "lsblk").write_text("#!/bin/sh\necho 'lsblk: failed to access sysfs directory: "
                                "/sys/dev/block: No such file or directory' >&2\nexit 32\n")
    (fake / "lsblk").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    no_driver = {"available": False, "reason": "NVML not loadable: Driver Not Loaded", "gpus": []}
    inv = live.collect(gpu_probe=lambda: no_driver, pci_root=root)
    assert len(inv["pci_gpus"]) == 8 and inv["pci_gpus"][0]["device_id"] == "0x2330"
    assert inv["nvml"]["reason"] == ("8 NVIDIA GPUs on the PCI bus but NVML not loadable: is the driver "
                                     "loaded? (NVML not loadable: Driver Not Loaded); no driver bound "
                                     "to them: load nvidia")  # the tree's functions have no driver link
    assert inv["unknown"]["block_devices"].startswith("lsblk failed (exit status 32): lsblk: failed to")
    assert inv["block_devices"] == []


def test_lsblk_runs_while_the_gpus_are_probed(tmp_path, monkeypatch):
    """The probes overlap: the GPU probe waits for a file the (real, slow) lsblk stand-in writes; one
    after the other, it would give up first. Notes keep their order: the GPUs', then the disks'."""
    started = tmp_path / "lsblk-started"
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "lsblk").write_text(f"#!/bin/sh\ntouch {started}\nsleep 0.2\necho 'no sysfs' >&2\nexit 32\n")
    (fake / "lsblk").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")

    def gpu_probe() -> dict:
        deadline = time.monotonic() + 10
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return {"available": False, "reason": "lsblk ran meanwhile" if started.exists() else "lsblk waited",
                "gpus": []}

    inv = live.collect(gpu_probe=gpu_probe)
    assert inv["nvml"]["reason"].endswith("lsblk ran meanwhile")
    assert inv["notes"][-1].startswith("lsblk failed (exit status 32)") and "block_devices" in inv["unknown"]
