"""Telemetry alongside a check: the real sampler thread over the NVML edge (fake pynvml, tests only),
saving the series, and the runner's hook. The pure series code: tests/series/test_telemetry_series.py."""

from __future__ import annotations

import json
import logging
import statistics
import threading
import time
from itertools import pairwise
from pathlib import Path

import pytest
from fakenvml import POWER_CAP, FakeGpu, install
from telemetryhelp import SYNTH, metric

from harness.checks.base import CheckContext, CheckKind, CheckOutput, Params, PlannedCommand
from harness.model import Metric
from harness.platform import nvml
from harness.run import sampler as telemetry
from harness.run.sampler import Sampler
from harness.series import telemetry as telemetry_metrics

# ---------------------------------------------------------------- the sampler thread

def test_sampler_holds_10_hz_on_8_gpus(monkeypatch):
    install(monkeypatch, [FakeGpu() for _ in range(8)])
    with nvml.NvmlSession() as nv:
        sampler = Sampler(nv.sample, 0.1).start()
        time.sleep(1.0)
        s = sampler.stop()
    # 10 ticks in a second plus the first and the closing sample; loose for 2 loaded cores
    assert 8 <= len(s.t) <= 14, s.t
    assert sorted(s.gpus) == list(range(8))
    assert all(len(s.column(g, "temp")) == len(s.t) for g in range(8))
    gaps = [b - a for a, b in pairwise(s.t[:-1])]  # the closing sample comes off-beat
    assert 0.07 <= statistics.median(gaps) <= 0.15
    assert s.column(3, "power")[0] == 650.0 and s.column(3, "pcie_width_max")[0] == 16


def test_late_samples_skip_ticks_instead_of_bunching_up():
    calls = []

    def slow_read():
        calls.append(time.monotonic())
        time.sleep(0.25)
        return (nvml.GpuSample(gpu=0, temp=50.0),)

    sampler = Sampler(slow_read, 0.1).start()
    time.sleep(0.9)
    s = sampler.stop()
    assert s.overruns >= 3
    assert min(b - a for a, b in pairwise(calls[:-1])) >= 0.24  # never two reads in one slot
    assert s.sample_cost_s >= 0.2


def test_a_gpu_falling_off_the_bus_mid_run_is_recorded(monkeypatch):
    gpus = [FakeGpu(), FakeGpu(lost_after=3)]
    install(monkeypatch, gpus)
    with nvml.NvmlSession() as nv:
        sampler = Sampler(nv.sample, 0.05).start()
        time.sleep(0.5)
        s = sampler.stop()
    assert list(s.lost) == [1] and s.lost[1][1] == "GPU is lost: GPU is lost"
    temps = s.column(1, "temp")
    assert temps[:3] == (62.0, 62.0, 62.0) and set(temps[4:]) == {None}
    assert None not in s.column(0, "temp")


def test_sampler_stops_cleanly_when_nvml_breaks():
    def broken():
        raise RuntimeError("driver unloaded")

    s = Sampler(broken, 0.05).start()
    time.sleep(0.1)
    out = s.stop()
    assert out.t == () and s.error == "RuntimeError: driver unloaded"


def test_stopping_a_sampler_whose_reading_never_returns_is_bounded(monkeypatch):
    """Before: stop() joined the thread with no timeout, so a read stuck in a hung driver hung the run."""
    monkeypatch.setattr(nvml, "CALL_TIMEOUT_S", 0.2)
    never = threading.Event()
    s = Sampler(lambda: never.wait() and (), period_s=0.05).start()
    time.sleep(0.1)
    t0 = time.monotonic()
    series = s.stop()
    assert time.monotonic() - t0 < 2.0
    assert s.error == "a telemetry reading did not return within 0.4 s" and series.t == ()
    never.set()


def test_series_round_trip_and_numbered_files(tmp_path: Path):
    p1 = telemetry.save(SYNTH, tmp_path)
    p2 = telemetry.save(SYNTH, tmp_path)
    assert (p1.name, p2.name) == ("telemetry.json", "telemetry-2.json")
    back = telemetry_metrics.load(p1)
    assert back.t == SYNTH.t and back.column(0, "reasons") == SYNTH.column(0, "reasons")
    assert "reasons" not in json.loads(p1.read_text())["gpus"]["1"]  # all-None columns are not stored


# ---------------------------------------------------------------- the runner's hook

class _Nothing(Params):
    pass


def _kind(sleep_s: float) -> CheckKind:
    def run(params, ctx) -> CheckOutput:
        time.sleep(sleep_s)
        return CheckOutput((Metric("command.duration", sleep_s, "s"),), details={"own": 1}, summary="did it")

    return CheckKind("sleep", "sleeps", _Nothing, {}, run, lambda p, inv: [PlannedCommand(("sleep",))])


def _ctx(tmp_path: Path, gpus: int) -> CheckContext:
    inv = {"gpus": [{"index": i, "pci_bus_id": f"00000000:{0x18 + 0x10 * i:02X}:00.0"} for i in range(gpus)]}
    return CheckContext("c1", tmp_path, 30, False, False, inv, logging.getLogger("t"))


def test_observe_adds_metrics_file_and_summary(tmp_path: Path, monkeypatch):
    install(monkeypatch, [FakeGpu(reasons=lambda n: POWER_CAP if n % 5 < 2 else 0) for _ in range(2)])
    out = telemetry.observe(_kind(0.3), _Nothing(), _ctx(tmp_path, 2))
    assert out.summary == "did it" and out.details["own"] == 1
    info = out.details["telemetry"]
    assert info["file"] == "raw/c1/telemetry.json" and info["gpus"] == 2 and info["period_s"] == 1.0
    assert info["samples"] >= 2  # the first sample and the closing one
    assert (tmp_path / info["file"]).is_file()
    names = {m.name for m in out.metrics}
    assert {"command.duration", "gpu.temp_max", "gpu.power_max", "gpu.energy", "gpu.throttle_pct"} <= names
    assert metric(out.metrics, "gpu.power_mean", 1) == 650.0


def test_observe_without_gpus_or_nvml_leaves_the_check_alone(tmp_path: Path, monkeypatch):
    out = telemetry.observe(_kind(0), _Nothing(), _ctx(tmp_path, 0))
    assert "telemetry" not in out.details and len(out.metrics) == 1
    install(monkeypatch, [FakeGpu()], fail_init="yes")
    out = telemetry.observe(_kind(0), _Nothing(), _ctx(tmp_path, 1))
    assert out.details["telemetry"] == {"error": "NVML not loadable: Unknown"} and len(out.metrics) == 1


def test_observe_saves_the_series_when_the_check_raises(tmp_path: Path, monkeypatch):
    install(monkeypatch, [FakeGpu()])

    def boom(params, ctx):
        raise RuntimeError("tool crashed")

    kind = CheckKind("boom", "raises", _Nothing, {}, boom, lambda p, inv: [])
    with pytest.raises(RuntimeError):
        telemetry.observe(kind, _Nothing(), _ctx(tmp_path, 1))
    assert (tmp_path / "raw" / "c1" / "telemetry.json").is_file()
