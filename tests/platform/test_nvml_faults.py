"""The NVML edge on a node where NVML itself answers but GPUs misbehave (issue #21, items 3, 6, 9):
a GPU NVML counts but cannot open, RESET_REQUIRED / UNKNOWN faults, instantaneous power, and the
nvidia-ml-py 13 temperature call. All on the fake pynvml (tests/support/fakenvml.py)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import fakenvml
import pytest
from fakenvml import GPU_IS_LOST, NO_PERMISSION, RESET_REQUIRED, FakeGpu, install
from judging import run_judged

from harness import config
from harness.checks.base import CheckContext
from harness.checks.gpu_health import KIND, GpuHealthParams
from harness.model import Outcome
from harness.platform import nvml
from harness.run.plan import select_profile


@pytest.mark.parametrize("code", [GPU_IS_LOST, NO_PERMISSION])
def test_a_gpu_nvml_counts_but_cannot_open_is_named_and_the_others_are_read(monkeypatch, code):
    gpus = [FakeGpu() for _ in range(4)]
    gpus[2].open_error = code
    install(monkeypatch, gpus)
    inv = nvml.gpu_inventory()
    assert inv["available"] is True and len(inv["gpus"]) == 4
    assert inv["gpus"][2]["error"].startswith("NVML cannot open GPU 2: ")
    assert inv["gpus"][3]["uuid"] == "GPU-00000003-fake" and "error" not in inv["gpus"][3]
    with nvml.NvmlSession() as nv:
        samples = nv.sample()
        health = nv.health()
        limits = nv.limits()
    assert [s.error is not None for s in samples] == [False, False, True, False]
    assert samples[3].temp == 62.0 and samples[2].temp is None
    assert health[2].error == samples[2].error == limits[2].error
    assert health[1].uuid == "GPU-00000001-fake"


def test_gpu_health_fails_the_gpu_it_cannot_open_and_judges_the_rest(tmp_path: Path, monkeypatch):
    gpus = [FakeGpu() for _ in range(3)]
    gpus[1].open_error = GPU_IS_LOST
    gpus[2].persistence = False
    install(monkeypatch, gpus)
    ctx = CheckContext("health", tmp_path, 60, False, False, {"gpus": []}, logging.getLogger("t"))
    out = run_judged(KIND, GpuHealthParams(xid_source="none"), ctx)
    bad = {(e.metric, e.labels.get("gpu")): e.message for e in out.evaluations if e.outcome is Outcome.FAIL}
    assert bad == {("gpu.lost", 1): "GPU 1 does not answer NVML: NVML cannot open GPU 1: GPU is lost",
                   ("gpu.persistence_mode", 2): "GPU 2: persistence mode is off (nvidia-smi -pm 1)"}


@pytest.mark.parametrize("code", [RESET_REQUIRED, 999])
def test_reset_required_and_unknown_are_faults_not_blank_fields(monkeypatch, code):
    gpus = [FakeGpu(), FakeGpu(fault=code)]
    install(monkeypatch, gpus)
    with nvml.NvmlSession() as nv:
        s = nv.sample()
        h = nv.health()
    assert s[0].error is None and s[0].temp == 62.0
    assert s[1].error is not None and h[1].error is not None
    assert s[1].error.startswith({RESET_REQUIRED: "GPU needs a reset", 999: "unknown NVML error"}[code])


def test_not_supported_stays_a_blank_field(monkeypatch):
    install(monkeypatch, [FakeGpu(mem_temp=None, energy=False)])
    with nvml.NvmlSession() as nv:
        (s,) = nv.sample()
    assert s.error is None and s.mem_temp is None and s.energy_mj is None and s.temp == 62.0


def test_power_is_instantaneous_where_nvml_offers_it_and_says_which(monkeypatch):
    install(monkeypatch, [FakeGpu(power_w=650.0, power_instant_w=702.5), FakeGpu(power_w=640.0)])
    with nvml.NvmlSession() as nv:
        a, b = nv.sample()
    assert (a.power, a.power_instant, a.power_avg) == (702.5, True, 650.0)
    assert (b.power, b.power_instant, b.power_avg) == (640.0, False, 640.0)


def test_temperature_through_the_v_call_when_the_binding_dropped_the_old_one(monkeypatch):
    install(monkeypatch, [FakeGpu(temp=71.0)], temperature_v=True)
    with nvml.NvmlSession() as nv:
        (s,) = nv.sample()
        (o,) = nv.observe()  # harness observe reads it the same way
    assert s.temp == 71.0 and o.temp == 71.0


def test_power_headroom_says_which_power_reading_its_gpu_peaks_are(monkeypatch):
    from harness.checks.power_headroom import gpu_power_source
    from harness.series.power import Sample

    install(monkeypatch, [FakeGpu(power_instant_w=700.0)])
    with nvml.NvmlSession() as nv:
        instant = [Sample(0.0, "load", gpus=nv.sample())]
    install(monkeypatch, [FakeGpu()])
    with nvml.NvmlSession() as nv:
        average = [Sample(0.0, "load", gpus=nv.sample())]
    assert gpu_power_source(instant) == "instantaneous (NVML_FI_DEV_POWER_INSTANT)"
    assert gpu_power_source(average).startswith("1-s average") and gpu_power_source([]) == "none"
    assert instant[0].gpu_sum() == 700.0  # the node estimate adds the instantaneous peaks


def test_a_gpu_lost_after_its_open_keeps_the_inventory(monkeypatch):
    """GPU_IS_LOST on a query after a successful open (name, memory): before, the whole inventory
    went empty ('NVML query failed'); now that GPU keeps its index and PCI address, with the error."""
    gpus = [FakeGpu() for _ in range(4)]
    gpus[2].fault = GPU_IS_LOST
    install(monkeypatch, gpus)
    inv = nvml.gpu_inventory()
    assert inv["available"] is True and [g["index"] for g in inv["gpus"]] == [0, 1, 2, 3]
    lost = inv["gpus"][2]
    assert lost["error"] == "NVML cannot read GPU 2: GPU is lost: GPU is lost"
    assert lost["pci_bus_id"] == "00000000:38:00.0" and lost["name"] is None
    assert inv["gpus"][3]["name"] == "NVIDIA H200" and "error" not in inv["gpus"][3]


def test_the_automatic_profile_judges_a_node_with_a_lost_gpu_under_its_model():
    """Before: the lost GPU's missing name became "None" and the run stopped with exit 2 ('found 8 x
    NVIDIA H200, None; no profile lists that model'), on exactly the node that must be REJECTED."""
    gpus = [{"index": i, "name": "NVIDIA H200", "pci_bus_id": f"00000000:{i:02X}:00.0"} for i in range(8)]
    gpus[5] = {"index": 5, "name": None, "pci_bus_id": "00000000:05:00.0", "error": "GPU is lost"}
    name, why = select_profile({"gpus": gpus}, [config.load_profile(p) for p in config.list_profiles()])
    assert name == "h200-sxm-8x"
    assert why.startswith("auto: found 8 x NVIDIA H200 (GPU 5 at 00000000:05:00.0 unreadable: GPU is lost)")


def test_the_stall_doctors_reading_guards_a_gpu_nvml_cannot_open(monkeypatch):
    gpus = [FakeGpu(), FakeGpu(open_error=GPU_IS_LOST)]
    install(monkeypatch, gpus)
    with nvml.NvmlSession() as nv:
        obs = nv.observe()
    assert obs[0].error is None and obs[0].util == 100.0
    assert obs[1].error == "NVML cannot open GPU 1: GPU is lost"  # before: a read on a None handle


@pytest.fixture
def hung_calls_released():
    yield
    fakenvml.release()  # the abandoned reads return, then later tests may hang GPUs again
    fakenvml._RELEASE.clear()


def test_a_reading_that_never_returns_is_bounded_and_names_the_gpu(monkeypatch, hung_calls_released):
    """NVML on a hung driver blocks (uninterruptible sleep). Every reading is bounded: the GPU is
    marked hung, its later readings say so without asking again, the other GPUs are read as usual."""
    gpus = [FakeGpu(), FakeGpu(hang_after=2), FakeGpu()]
    install(monkeypatch, gpus)
    with nvml.NvmlSession(timeout_s=0.3) as nv:
        first = nv.sample()
        assert [s.error for s in first] == [None, None, None]
        nv.sample(), nv.sample()  # GPU 1's third read hangs
        t0 = time.monotonic()
        later = nv.sample()
        health = nv.health()
        assert time.monotonic() - t0 < 0.3  # known hung: not waited on again
    assert later[1].error == health[1].error == (
        "GPU is hung: NVML did not answer a reading of GPU 1 within 0.3 s")
    assert later[0].temp == later[2].temp == 62.0 and health[2].error is None


def test_an_inventory_on_a_hung_gpu_is_bounded_and_keeps_its_address(monkeypatch, hung_calls_released):
    gpus = [FakeGpu(), FakeGpu(hang_after=-1)]
    install(monkeypatch, gpus)
    monkeypatch.setattr(nvml, "CALL_TIMEOUT_S", 0.3)
    inv = nvml.gpu_inventory()
    assert inv["available"] is True
    assert inv["gpus"][1]["error"].startswith("GPU is hung: NVML did not answer")
    assert inv["gpus"][0]["name"] == "NVIDIA H200"


def test_nvml_that_does_not_initialise_is_bounded_and_says_so(monkeypatch, hung_calls_released):
    install(monkeypatch, [FakeGpu()], hang_init=True)
    monkeypatch.setattr(nvml, "CALL_TIMEOUT_S", 0.2)
    t0 = time.monotonic()
    inv = nvml.gpu_inventory()
    assert time.monotonic() - t0 < 2.0
    assert inv == {"available": False, "gpus": [],
                   "reason": "NVML did not answer nvmlInit within 0.2 s: the driver is hung"}
