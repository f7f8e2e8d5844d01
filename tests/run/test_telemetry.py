"""Telemetry: the real sampler thread over the NVML edge (fake pynvml, tests only), the pure
derivation on synthetic series and on real nvidia-smi readings, and the runner's hook."""

from __future__ import annotations

import json
import logging
import statistics
import time
from itertools import pairwise
from pathlib import Path

import pytest
from fakenvml import POWER_CAP, FakeGpu, install

from harness.checks.base import CheckContext, CheckKind, CheckOutput, Params, PlannedCommand
from harness.model import Metric, Outcome
from harness.parsers import clockreasons, nvsmi, nvsmi_csv
from harness.platform import nvml
from harness.run import sampler as telemetry
from harness.run.sampler import Sampler, Series
from harness.series import telemetry as telemetry_metrics

DATA = Path(__file__).parents[1] / "data" / "nvidia-smi"


def series(t, gpus, lost=None, period=1.0) -> Series:
    return Series(period, tuple(t), {g: {k: tuple(v) for k, v in cols.items()} for g, cols in gpus.items()},
                  lost or {})


def metric(ms, name, gpu, **labels) -> float:
    (m,) = [m for m in ms if m.name == name and m.labels.get("gpu") == gpu
            and all(m.labels.get(k) == v for k, v in labels.items())]
    return m.value


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


# ---------------------------------------------------------------- derivation (pure)

PC, HT = clockreasons.BITS["power_cap"], clockreasons.BITS["hw_thermal"]
SYNTH = series([0, 1, 2, 3, 4], {
    0: {"temp": [60, 65, 70, 68, 66], "mem_temp": [50, 52, None, 55, 54], "power": [300, 400, 500, 400, 300],
        "energy_mj": [1_000_000, 1_400_000, 1_900_000, 2_300_000, 2_600_000],
        "sm_clock": [1980, 1980, 1700, 1980, 1980], "util": [100, 100, 100, 100, 100],
        "reasons": [0, PC, PC | HT, 0, clockreasons.BITS["idle"]], "pcie_gen": [4, 5, 5, 5, 5],
        "pcie_gen_max": [5] * 5, "pcie_width": [16] * 5, "pcie_width_max": [16] * 5,
        "pcie_replays": [0, 0, 1, 3, 3], "ecc_uncorrected": [0] * 5, "ecc_corrected": [2, 2, 2, 2, 5]},
    1: {"temp": [40] * 5, "power": [100.0] * 5, "energy_mj": [None] * 5, "util": [0] * 5,
        "reasons": [None] * 5},
})


def test_derive_per_gpu_metrics_from_a_synthetic_series():
    ms = telemetry_metrics.derive(SYNTH)
    assert metric(ms, "gpu.temp_max", 0) == 70 and metric(ms, "gpu.mem_temp_max", 0) == 55
    assert metric(ms, "gpu.power_mean", 0) == 380 and metric(ms, "gpu.power_max", 0) == 500
    assert metric(ms, "gpu.sm_clock_mean", 0) == 1924
    assert metric(ms, "gpu.energy", 0) == 1600.0  # (2 600 000 - 1 000 000) mJ
    pct = {m.labels["reason"]: m.value for m in ms if m.name == "gpu.throttle_pct" and m.labels["gpu"] == 0}
    assert pct == {"power_cap": 40.0, "hw_slowdown": 0.0, "hw_thermal": 20.0, "hw_power_brake": 0.0,
                   "sw_thermal": 0.0, "thermal": 20.0, "any": 40.0}  # idle is not throttling
    assert metric(ms, "gpu.pcie_gen", 0, which="current") == 5
    assert metric(ms, "gpu.pcie_gen", 0, which="max") == 5
    assert metric(ms, "gpu.pcie_replays", 0) == 3
    assert metric(ms, "gpu.ecc_corrected", 0, scope="during_check") == 3
    assert metric(ms, "gpu.ecc_uncorrected", 0, scope="during_check") == 0
    assert {m.unit for m in ms if m.name == "gpu.energy"} == {"J"}
    # GPU 1: no energy counter -> power integrated over 4 s; no reasons known -> no throttle metrics
    assert metric(ms, "gpu.energy", 1) == 400.0
    assert not [m for m in ms if m.name == "gpu.throttle_pct" and m.labels["gpu"] == 1]
    assert not [m for m in ms if m.name == "gpu.lost"]


def _series_from_readings(masks: list[int]) -> Series:
    return series([0.0], {g: {"reasons": [m]} for g, m in enumerate(masks)})


def test_derive_on_real_nvidia_smi_clock_event_readings():
    # query-gpu CSV from 2 RTX PRO 6000: clocks_event_reasons.active = 0x0000000000000004 (SW power cap)
    name = "query-gpu_csv_2x_rtx_pro_6000_throttle_alias_renamed_to_clocks_event_reasons.csv"
    r = nvsmi_csv.parse((DATA / name).read_text())
    masks = []
    for g in (0, 1):
        active = {m.labels["reason"]: m.value == 1 for m in r.metrics
                  if m.name == "gpu.clocks_event" and m.labels["gpu"] == g}
        masks.append(clockreasons.encode(active))
    assert masks == [0x4, 0x4]
    ms = telemetry_metrics.derive(_series_from_readings(masks))
    assert metric(ms, "gpu.throttle_pct", 1, reason="power_cap") == 100.0
    assert metric(ms, "gpu.throttle_pct", 1, reason="thermal") == 0.0
    # H200 `nvidia-smi -q`: only "Idle: Active" -> mask 0x1, which is not throttling
    h200 = nvsmi.parse((DATA / "nvidia-smi_-q_h200_550.90.12.txt").read_text())
    ms = telemetry_metrics.derive(_series_from_readings([h200.details["gpus"][0]["mask"]]))
    assert metric(ms, "gpu.throttle_pct", 0, reason="any") == 0.0


def test_decode_documented_bits():
    assert clockreasons.decode(0x4 | 0x40 | 0x1) == ("idle", "power_cap", "hw_thermal")
    assert clockreasons.parse_mask("0x0000000000000004") == 4 and clockreasons.parse_mask("[N/A]") is None
    assert clockreasons.GROUPS["any"] == 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def test_link_judged_only_while_busy():
    s = series([0, 1, 2], {
        0: {"util": [100, 100, 100], "pcie_gen": [4, 4, 4], "pcie_gen_max": [5] * 3, "pcie_width": [8] * 3,
            "pcie_width_max": [16] * 3},
        1: {"util": [0, 0, 0], "pcie_gen": [1] * 3, "pcie_gen_max": [5] * 3, "pcie_width": [16] * 3,
            "pcie_width_max": [16] * 3},
        2: {"util": [10, 95, 97], "pcie_gen": [1, 5, 5], "pcie_gen_max": [5] * 3, "pcie_width": [16] * 3,
            "pcie_width_max": [16] * 3}})
    evs = telemetry_metrics.judge(s)
    fail = [e for e in evs if e.outcome is Outcome.FAIL]
    assert [(e.metric, e.labels, e.measured, e.low) for e in fail] == [
        ("gpu.pcie_gen", {"gpu": 0, "which": "current"}, 4.0, 5.0)]
    assert fail[0].message == ("PCIe link trained down: Gen4 x8 of Gen5 x16 while busy (3 samples at >= 50% "
                               "utilisation)")
    (ok,) = [e for e in evs if e.outcome is Outcome.PASS]
    assert ok.message == "1 busy GPU(s) at their maximum PCIe link (Gen5 x16)"  # GPU 1 idle: not judged


def test_lost_gpu_is_a_failed_measurement():
    s = series([0, 1], {0: {"temp": [50, None]}}, lost={0: (0.5, "GPU is lost: GPU is lost")})
    assert metric(telemetry_metrics.derive(s), "gpu.lost", 0) == 1.0
    (e,) = telemetry_metrics.judge(s)
    assert e.outcome is Outcome.FAIL and e.message == "GPU 0 stopped answering NVML 0.5 s into the check: " \
                                                      "GPU is lost: GPU is lost"


def test_throttle_intervals():
    s = series([0, 1, 2, 3, 4], {0: {"reasons": [0, PC, PC, 0, PC]}})
    assert telemetry_metrics.intervals(s, 0, PC) == [(1, 3), (4, 5)]
    assert telemetry_metrics.intervals(s, 0, HT) == []


def test_series_round_trip_and_numbered_files(tmp_path: Path):
    p1 = telemetry.save(SYNTH, tmp_path)
    p2 = telemetry.save(SYNTH, tmp_path)
    assert (p1.name, p2.name) == ("telemetry.json", "telemetry-2.json")
    back = telemetry.load(p1)
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


# ------------------------------------------------------------ throttling: busy and persistent (#21 item 2)

HS, IDLE = clockreasons.BITS["hw_slowdown"], clockreasons.BITS["idle"]


def test_one_hw_slowdown_sample_in_the_idle_to_load_ramp_is_not_throttling():
    # 10 Hz: idle, a P-state change (one 0x8 sample while clocks ramp), then a steady load
    masks = [IDLE] * 5 + [HS] + [0] * 14
    util = [0] * 5 + [30] + [100] * 14
    ms = telemetry_metrics.derive(series([i / 10 for i in range(20)], {0: {"reasons": masks, "util": util}},
                                         period=0.1))
    assert metric(ms, "gpu.throttle_pct", 0, reason="hw_slowdown") == 0.0
    assert metric(ms, "gpu.throttle_pct", 0, reason="any") == 0.0


def test_a_single_hw_slowdown_sample_under_load_is_a_clock_change_but_a_persistent_one_counts():
    masks = [0] * 4 + [HS] + [0] * 5 + [HS] * 6 + [0] * 4  # 1 sample (0.1 s), then 6 samples (0.6 s)
    util = [100] * 20
    ms = telemetry_metrics.derive(series([i / 10 for i in range(20)], {0: {"reasons": masks, "util": util}},
                                         period=0.1))
    assert metric(ms, "gpu.throttle_pct", 0, reason="hw_slowdown") == 30.0  # 6 of 20 busy samples
    assert metric(ms, "gpu.throttle_pct", 0, reason="any") == 30.0


def test_throttling_counts_over_busy_samples_only():
    masks = [clockreasons.BITS["power_cap"]] * 10 + [0] * 10  # power cap only while idle
    util = [0] * 10 + [100] * 10
    assert telemetry_metrics.throttle_pct(masks, util, 2)["power_cap"] == 0.0
    assert telemetry_metrics.throttle_pct(masks, [], 2)["power_cap"] == 50.0  # never busy: every sample
