"""The NVML edge against a fake pynvml (tests only), and profile auto-selection by GPUs found."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from harness import config
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


@pytest.mark.parametrize("gpu_name, count, expected", [
    ("NVIDIA H100 80GB HBM3", 8, "h100-sxm-8x"),
    ("NVIDIA H200", 8, "h200-sxm-8x"),
    ("NVIDIA A100-SXM4-80GB", 8, "a100-sxm-8x"),
    ("NVIDIA H100 80GB HBM3", 4, "generic"),  # count differs: not that SKU
    ("NVIDIA L40S", 8, "generic"),
])
def test_select_profile_by_model_and_count(gpu_name, count, expected):
    inv = {"gpus": [{"name": gpu_name}] * count}
    name, reason = select_profile(inv, _profiles())
    assert name == expected
    assert reason.startswith(f"auto: found {count} x {gpu_name}")


def test_select_profile_without_gpus():
    name, reason = select_profile({"gpus": [], "nvml": {"reason": "NVML not loadable: x"}}, _profiles())
    assert (name, reason) == ("generic", "auto: no GPU found (NVML not loadable: x); using generic")


def test_auto_selection_end_to_end_dry_run(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    from harness.platform import sysinfo

    code = app.run(suite="smoke", profile=None, output=tmp_path, dry_run=True,
                   inventory_probe=sysinfo.collect)
    out = capsys.readouterr().out
    assert code == 0
    assert "profile h100-sxm-8x" in out
    assert "auto: found 8 x NVIDIA H100 80GB HBM3; matches hardware of profile h100-sxm-8x" in out
    assert "expect gpu.count{} each: 8..8 count" in out
