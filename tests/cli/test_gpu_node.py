"""The false greens and reds of issue #20 through the real CLI, on a node faked only at NVML and
the PCI bus root (tests/support/nodelaunch.py; the bus from a real HGX H100 lspci capture)."""

from __future__ import annotations

from pathlib import Path

from gpunode import H100, check, node
from pcisysfs import gpu_addresses, lines, write_tree


def test_node_that_lost_a_gpu_is_rejected_under_its_own_profile(tmp_path: Path):
    """7 x H100 used to get `generic` (no GPU count rule) and could be accepted."""
    bus = gpu_addresses()
    root = write_tree(tmp_path / "devices", lines())  # the lost GPU is still on the bus
    nvml_bus = [a for a in bus if a != "0000:52:00.0"]
    r, rec = node(tmp_path, scenario={"gpus": [{"name": H100}] * 7, "bus_ids": [a[4:] for a in nvml_bus],
                                      "pci_root": str(root)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert rec is not None and rec["verdict"] == "REJECTED"
    assert rec["profile"]["name"] == "h100-sxm-8x"
    assert rec["profile"]["reason"].endswith("profile h100-sxm-8x expects 8 GPUs, found 7; "
                                             "missing PCI 0000:52:00.0")
    health = check(rec, "gpu-health")
    assert health["status"] == "failed"
    (bad,) = [e for e in health["evaluations"] if e["outcome"] == "fail"]
    assert bad["message"] == ("the profile expects 8 GPUs (8 x NVIDIA H100 80GB HBM3), found 7; "
                              "missing PCI 0000:52:00.0")
    inv = check(rec, "inventory")
    assert inv["status"] == "failed"
    assert [e["measured"] for e in inv["evaluations"] if e["metric"] == "gpu.count"] == [7.0]


def test_driver_not_loaded_is_errored_not_failed_and_keeps_the_profile(tmp_path: Path):
    """NVML not loadable used to give `generic`; under h100 it failed gpu.count as 0."""
    root = write_tree(tmp_path / "devices", lines())
    r, rec = node(tmp_path, scenario={"nvml_fails": "driver", "pci_root": str(root)})
    assert r.returncode == 3, r.stdout + r.stderr
    assert rec is not None and rec["verdict"] != "ACCEPTED"
    assert rec["profile"]["name"] == "h100-sxm-8x"
    assert "PCI device 0x2330" in rec["profile"]["reason"]
    health = check(rec, "gpu-health")
    assert health["status"] == "errored"
    assert health["message"].startswith("8 NVIDIA GPUs on the PCI bus but NVML not loadable: is the driver "
                                        "loaded? (NVML not loadable: ")
    inv = check(rec, "inventory")  # the bus count stands in for NVML's: 8, as expected
    assert inv["status"] == "passed"
    assert [m["value"] for m in inv["metrics"] if m["name"] == "gpu.count"] == [8.0]
    # with --profile generic the GPU checks are still errored, not skipped
    no_driver = {"nvml_fails": "driver", "pci_root": str(root)}
    r2, rec2 = node(tmp_path, "--profile", "generic", scenario=no_driver)
    assert r2.returncode == 3 and rec2 is not None and rec2["profile"]["name"] == "generic"
    assert check(rec2, "gpu-health")["status"] == "errored"
    assert check(rec2, "gpu-health")["message"].startswith("8 NVIDIA GPUs on the PCI bus but NVML")


def test_unknown_gpu_count_errors_the_rule_instead_of_failing_it(tmp_path: Path):
    r, rec = node(tmp_path, "--profile", "h100-sxm-8x", "--only", "inventory",
                  scenario={"nvml_fails": "driver", "pci_root": str(tmp_path / "no-sysfs")})
    assert r.returncode == 3, r.stdout + r.stderr
    inv = check(rec or {}, "inventory")
    assert inv["status"] == "errored"
    assert not [m for m in inv["metrics"] if m["name"] == "gpu.count"]
    outcomes = {e["outcome"] for e in inv["evaluations"] if e["metric"] == "gpu.count"}
    assert outcomes == {"error"}
    assert any(e["message"] == "not measured: NVML not loadable: Unknown" for e in inv["evaluations"])
    # and auto-selection refuses to guess a CPU-only node
    r2, rec2 = node(tmp_path, scenario={"nvml_fails": "driver", "pci_root": str(tmp_path / "no-sysfs")})
    assert r2.returncode == 2 and rec2 is None and "cannot tell whether this node has GPUs" in r2.stderr


def test_lsblk_failing_is_not_zero_nvme_drives(tmp_path: Path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "lsblk").write_text("#!/bin/sh\necho 'lsblk: failed to access sysfs directory: /sys/dev/block: "
                                "No such file or directory' >&2\nexit 32\n")
    (fake / "lsblk").chmod(0o755)
    root = write_tree(tmp_path / "devices", lines(), device_id="2335")
    r, rec = node(tmp_path, "--only", "inventory", path_dir=fake,
                  scenario={"gpus": [{"name": "NVIDIA H200"}] * 8, "pci_root": str(root)})
    assert r.returncode == 3, r.stdout + r.stderr
    assert rec is not None and rec["profile"]["name"] == "h200-sxm-8x"  # expects 8 NVMe drives
    inv = check(rec, "inventory")
    assert inv["status"] == "errored"
    assert not [m for m in inv["metrics"] if m["name"] == "host.nvme_count"]
    nvme = [e for e in inv["evaluations"] if e["metric"] == "host.nvme_count"]
    assert nvme and {e["outcome"] for e in nvme} == {"error"}
    assert any(e["message"].startswith("not measured: lsblk failed (exit status 32)") for e in nvme)


def test_a_model_without_a_profile_asks_for_one(tmp_path: Path):
    root = write_tree(tmp_path / "devices", lines(), device_id="26b9")
    r, rec = node(tmp_path, scenario={"gpus": [{"name": "NVIDIA L40S"}] * 8, "pci_root": str(root)})
    assert r.returncode == 2 and rec is None
    assert "found 8 x NVIDIA L40S; no profile lists that model: give --profile NAME" in r.stderr


def test_cpu_only_node_runs_generic_and_says_why(tmp_path: Path):
    root = write_tree(tmp_path / "devices", lines()[:1])  # the BMC's VGA only
    r, rec = node(tmp_path, "--only", "inventory",
                  scenario={"nvml_fails": "no driver", "pci_root": str(root)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert rec is not None and rec["profile"]["name"] == "generic"
    assert rec["profile"]["reason"].startswith("auto: no NVIDIA GPU on the PCI bus and NVML not loadable")
    assert rec["profile"]["reason"].endswith("a CPU-only node; using generic")
