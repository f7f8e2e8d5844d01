"""The NVML edge against a fake pynvml (tests only), and profile auto-selection by GPUs found."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from harness import config
from harness.errors import UsageError
from harness.platform import nvml
from harness.run import session as app
from harness.run.plan import select_profile


class _Err(Exception):
    pass


def fake_pynvml(n_gpus: int = 8, name: str = "NVIDIA H100 80GB HBM3", fail_init: bool = False,
                serial_error_on: int | None = None) -> types.ModuleType:
    """A stand-in for nvidia-ml-py with the calls the edge makes; bytes like old bindings."""
    m = types.ModuleType("pynvml")
    m.NVMLError = _Err  # type: ignore[attr-defined]

    def init() -> None:
        if fail_init:
            raise _Err("NVML Shared Library Not Found")

    def serial(h: int) -> bytes:
        if h == serial_error_on:
            raise _Err("Not Supported")
        return f"165232000000{h}".encode()

    m.nvmlInit = init  # type: ignore[attr-defined]
    m.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    m.nvmlSystemGetDriverVersion = lambda: b"550.90.07"  # type: ignore[attr-defined]
    m.nvmlSystemGetCudaDriverVersion_v2 = lambda: 12040  # type: ignore[attr-defined]
    m.nvmlDeviceGetCount = lambda: n_gpus  # type: ignore[attr-defined]
    m.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    m.nvmlDeviceGetName = lambda h: name  # type: ignore[attr-defined]
    m.nvmlDeviceGetUUID = lambda h: f"GPU-{h:08x}-0000"  # type: ignore[attr-defined]
    m.nvmlDeviceGetSerial = serial  # type: ignore[attr-defined]
    m.nvmlDeviceGetVbiosVersion = lambda h: "96.00.99.00.01"  # type: ignore[attr-defined]
    m.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(  # type: ignore[attr-defined]
        busId=f"00000000:{h + 1:02X}:00.0")
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=85520809984)  # type: ignore[attr-defined]
    return m


def test_gpu_inventory_through_the_edge(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(serial_error_on=3))
    inv = nvml.gpu_inventory()
    assert inv["available"] and inv["driver"] == "550.90.07" and inv["cuda_driver"] == "12.4"
    assert len(inv["gpus"]) == 8
    g0, g3 = inv["gpus"][0], inv["gpus"][3]
    assert g0 == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000000-0000",
                  "serial": "1652320000000", "vbios": "96.00.99.00.01", "pci_bus_id": "00000000:01:00.0",
                  "memory_bytes": 85520809984, "driver": "550.90.07"}
    assert g3["serial"] is None  # a GPU that cannot report its serial is recorded, not dropped


def test_gpu_inventory_without_driver_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(fail_init=True))
    inv = nvml.gpu_inventory()
    assert inv == {"available": False, "reason": "NVML not loadable: NVML Shared Library Not Found",
                   "gpus": []}


def _profiles():
    return [config.load_profile(p) for p in config.list_profiles()]


BUS = [{"pci_bus_id": f"0000:{b}:00.0", "device_id": "0x2330"} for b in ("1b", "43", "52", "61", "9d", "c3",
                                                                         "d1", "df")]


def _nvml(name: str, count: int) -> list[dict[str, str]]:
    return [{"name": name, "pci_bus_id": f"00000000:{b['pci_bus_id'][5:].upper()}"} for b in BUS[:count]]


@pytest.mark.parametrize("gpu_name, expected", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm-8x"),
    ("NVIDIA H200", "h200-sxm-8x"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm-8x"),
    ("NVIDIA B200", "b200-sxm-8x"),
    ("NVIDIA B300 SXM6 AC", "b300-sxm-8x"),
    ("NVIDIA GB200", "gb200-nvl-4x"),  # one compute tray
])
def test_select_profile_by_model(gpu_name, expected):
    inv = {"gpus": [{"name": gpu_name}] * (4 if expected.startswith("gb200") else 8)}
    name, reason = select_profile(inv, _profiles())
    assert name == expected
    assert reason == f"auto: found {len(inv['gpus'])} x {gpu_name}; matches the model of profile {expected}"


def test_a_node_that_lost_a_gpu_keeps_its_profile_and_names_the_missing_gpu():
    inv = {"gpus": _nvml("NVIDIA H100 80GB HBM3", 8)[:2] + _nvml("NVIDIA H100 80GB HBM3", 8)[3:],
           "pci_gpus": BUS, "nvml": {"available": True}}
    name, reason = select_profile(inv, _profiles())
    assert name == "h100-sxm-8x"  # never guessed down to generic
    assert reason.endswith("profile h100-sxm-8x expects 8 GPUs, found 7; missing PCI 0000:52:00.0")


def test_four_gpus_of_an_eight_gpu_model_are_judged_against_it():
    name, reason = select_profile({"gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 4}, _profiles())
    assert name == "h100-sxm-8x" and reason.endswith("expects 8 GPUs, found 4")


def test_unknown_model_asks_for_a_profile():
    with pytest.raises(UsageError, match=r"found 8 x NVIDIA L40S; no profile lists that model: give "
                                         r"--profile NAME"):
        select_profile({"gpus": [{"name": "NVIDIA L40S"}] * 8}, _profiles())


def test_mixed_models_ask_for_a_profile():
    inv = {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 7 + [{"name": "NVIDIA A100-SXM4-80GB"}]}
    with pytest.raises(UsageError, match="no profile lists that model"):
        select_profile(inv, _profiles())


def test_without_nvml_the_model_comes_from_the_pci_device_id():
    inv = {"gpus": [], "pci_gpus": BUS, "unknown": {"gpus": "8 NVIDIA GPUs on the PCI bus but NVML ..."},
           "nvml": {"available": False}}
    name, reason = select_profile(inv, _profiles())
    assert name == "h100-sxm-8x"
    assert reason == ("auto: found 8 NVIDIA GPUs (PCI device 0x2330) without NVML; matches the model of "
                      "profile h100-sxm-8x")
    h200 = [{**b, "device_id": "0x2335"} for b in BUS]
    assert select_profile({**inv, "pci_gpus": h200}, _profiles())[0] == "h200-sxm-8x"
    with pytest.raises(UsageError, match=r"PCI device 0x26b9\) without NVML; no profile lists"):
        select_profile({**inv, "pci_gpus": [{**b, "device_id": "0x26b9"} for b in BUS]}, _profiles())


def test_cpu_only_node_gets_generic_and_says_so():
    inv = {"gpus": [], "pci_gpus": [], "unknown": {"gpus": "NVML not loadable: x"},
           "nvml": {"available": False, "reason": "NVML not loadable: x"}}
    name, reason = select_profile(inv, _profiles())
    assert (name, reason) == ("generic", "auto: no NVIDIA GPU on the PCI bus and NVML not loadable: x: "
                                         "a CPU-only node; using generic")


def test_no_nvml_and_no_readable_bus_is_not_taken_for_a_cpu_only_node():
    inv = {"gpus": [], "pci_gpus": [], "unknown": {"gpus": "NVML not loadable: x",
                                                     "pci_gpus": "/sys/bus/pci/devices not readable"},
           "nvml": {"available": False, "reason": "NVML not loadable: x"}}
    with pytest.raises(UsageError, match=r"cannot tell whether this node has GPUs .*give --profile"):
        select_profile(inv, _profiles())


def test_auto_selection_end_to_end_dry_run(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    from harness.platform import sysinfo

    code = app.run(suite="smoke", profile=None, output=tmp_path, dry_run=True,
                   inventory_probe=sysinfo.collect)
    out = capsys.readouterr().out
    assert code == 0
    assert "profile h100-sxm-8x" in out
    assert "auto: found 8 x NVIDIA H100 80GB HBM3; matches the model of profile h100-sxm-8x" in out
    assert "expect gpu.count{} each: [8, 8]  [fail; h100-sxm-8x (hardware)]" in out


def test_a_fake_8x_b200_node_is_chosen_automatically_end_to_end(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(name="NVIDIA B200"))
    from harness.platform import sysinfo

    code = app.run(suite="smoke", profile=None, output=tmp_path, dry_run=True,
                   inventory_probe=sysinfo.collect)
    out = capsys.readouterr().out
    assert code == 0
    assert "auto: found 8 x NVIDIA B200; matches the model of profile b200-sxm-8x" in out
    # without NVML, the PCI device ids (pci.ids: 2901 GB100 [B200], 3182 GB110 [B300 SXM6 AC])
    inv = {"gpus": [], "pci_gpus": [{**b, "device_id": "0x2901"} for b in BUS], "nvml": {"available": False}}
    assert select_profile(inv, _profiles())[0] == "b200-sxm-8x"
    inv["pci_gpus"] = [{**b, "device_id": "0x3182"} for b in BUS]
    assert select_profile(inv, _profiles())[0] == "b300-sxm-8x"
