"""NVIDIA GPUs on the PCI bus from a sysfs tree built from a real HGX H100 lspci capture."""

from __future__ import annotations

from pathlib import Path

from pcisysfs import HGX_H100, gpu_addresses, lines, write_tree

from harness.platform import pci


def test_hgx_h100_counts_the_eight_gpus_not_the_nvswitches_or_the_bmc_vga(tmp_path: Path):
    root = write_tree(tmp_path / "devices", lines())
    gpus = pci.nvidia_gpus(root)
    assert gpus is not None
    assert [g.address for g in gpus] == gpu_addresses()
    assert len(gpus) == 8 and {g.device for g in gpus} == {0x2330}
    assert gpus[0].to_dict() == {"pci_bus_id": "0000:1b:00.0", "device_id": "0x2330", "class": "0x030200"}
    everything = pci.devices(root)
    assert everything is not None and len(everything) == 13  # ASPEED VGA and 4 NVSwitch bridges too


def test_audio_and_usb_functions_of_a_gpu_are_not_gpus(tmp_path: Path):
    root = tmp_path / "devices"
    for addr, cls in (("0000:01:00.0", "0x030000"), ("0000:01:00.1", "0x040300"),
                      ("0000:01:00.2", "0x0c0330"), ("0000:02:00.0", "0x038000")):
        (root / addr).mkdir(parents=True)
        (root / addr / "vendor").write_text("0x10de\n")
        (root / addr / "device").write_text("0x1e30\n")
        (root / addr / "class").write_text(cls + "\n")
    assert [g.address for g in pci.nvidia_gpus(root) or []] == ["0000:01:00.0", "0000:02:00.0"]


def test_unreadable_bus_is_unknown_not_zero(tmp_path: Path):
    assert pci.nvidia_gpus(tmp_path / "absent") is None
    (tmp_path / "empty").mkdir()
    assert pci.nvidia_gpus(tmp_path / "empty") == []


def test_a_function_with_garbage_files_is_left_out(tmp_path: Path):
    root = write_tree(tmp_path / "devices", lines()[5:7])
    (root / "0000:43:00.0" / "class").write_text("garbage\n")
    assert [g.address for g in pci.nvidia_gpus(root) or []] == ["0000:1b:00.0"]


def test_missing_names_the_gpus_nvml_does_not_list():
    on_bus = [{"pci_bus_id": a} for a in gpu_addresses(HGX_H100)]
    nvml = [{"pci_bus_id": "00000000:" + a.split(":", 1)[1].upper()} for a in gpu_addresses()
            if a != "0000:52:00.0"]
    assert pci.missing(nvml, on_bus) == ["0000:52:00.0"]
    assert pci.missing_text(nvml, on_bus) == "; missing PCI 0000:52:00.0"
    assert pci.missing([], on_bus) == []  # without NVML nothing is known to be missing
