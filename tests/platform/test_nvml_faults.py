"""The NVML edge on a node where NVML itself answers but GPUs misbehave (issue #21, items 3, 6, 9):
a GPU NVML counts but cannot open, RESET_REQUIRED / UNKNOWN faults, instantaneous power, and the
nvidia-ml-py 13 temperature call. All on the fake pynvml (tests/support/fakenvml.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fakenvml import GPU_IS_LOST, NO_PERMISSION, RESET_REQUIRED, FakeGpu, install
from judging import run_judged

from harness.checks.base import CheckContext
from harness.checks.gpu_health import KIND, GpuHealthParams
from harness.model import Outcome
from harness.platform import nvml


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
