"""Telemetry, pure: per-GPU metrics derived from synthetic series and from real nvidia-smi readings,
the findings (lost GPUs, PCIe links trained down under load) and throttling intervals."""

from __future__ import annotations

from pathlib import Path

from telemetryhelp import HT, PC, SYNTH, metric, series

from harness.model import Metric, Outcome
from harness.parsers import clockreasons, nvsmi, nvsmi_csv
from harness.series import telemetry as telemetry_metrics
from harness.series.telemetry import Series

DATA = Path(__file__).parents[1] / "data" / "nvidia-smi"


def test_derive_per_gpu_metrics_from_a_synthetic_series():
    ms = telemetry_metrics.derive(SYNTH)
    assert metric(ms, "gpu.temp_max", 0) == 70 and metric(ms, "gpu.mem_temp_max", 0) == 55
    assert metric(ms, "gpu.power_mean", 0) == 380 and metric(ms, "gpu.power_max", 0) == 500
    assert metric(ms, "gpu.sm_clock_mean", 0) == 1924
    assert metric(ms, "gpu.energy", 0) == 1600.0  # (2 600 000 - 1 000 000) mJ
    pct = {m.labels["reason"]: m.value for m in ms if m.name == "gpu.throttle_pct" and m.labels["gpu"] == 0}
    assert pct == {"power_cap": 40.0, "hw_slowdown": 0.0, "hw_thermal": 20.0, "hw_power_brake": 0.0,
                   "sw_thermal": 0.0, "board_limit": 0.0, "reliability": 0.0, "thermal": 20.0,
                   "any": 40.0}  # idle is not throttling
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
    assert clockreasons.GROUPS["any"] == 0x4 | 0x8 | 0x20 | 0x40 | 0x80 | 0x200 | 0x400


def test_board_limit_and_reliability_bits_are_read_as_throttling():
    # nvidia-ml-py: nvmlClocksThrottleReasonBoardLimit 0x200, nvmlClocksThrottleReasonReliability 0x400
    assert clockreasons.decode(0x200 | 0x400) == ("board_limit", "reliability")
    ms = telemetry_metrics.derive(series([0, 1, 2, 3], {0: {"reasons": [0x200, 0x200, 0x400, 0],
                                                           "util": [100] * 4}}))
    assert metric(ms, "gpu.throttle_pct", 0, reason="board_limit") == 50.0
    assert metric(ms, "gpu.throttle_pct", 0, reason="reliability") == 25.0
    assert metric(ms, "gpu.throttle_pct", 0, reason="any") == 75.0


def test_link_judged_only_while_busy():
    s = series([0, 1, 2], {
        0: {"util": [100, 100, 100], "pcie_gen": [4, 4, 4], "pcie_gen_max": [5] * 3, "pcie_width": [8] * 3,
            "pcie_width_max": [16] * 3},
        1: {"util": [0, 0, 0], "pcie_gen": [1] * 3, "pcie_gen_max": [5] * 3, "pcie_width": [16] * 3,
            "pcie_width_max": [16] * 3},
        2: {"util": [10, 95, 97], "pcie_gen": [1, 5, 5], "pcie_gen_max": [5] * 3, "pcie_width": [16] * 3,
            "pcie_width_max": [16] * 3}})
    evs = telemetry_metrics.findings(s)
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
    (e,) = telemetry_metrics.findings(s)
    assert e.outcome is Outcome.FAIL and e.message == "GPU 0 stopped answering NVML 0.5 s into the check: " \
                                                      "GPU is lost: GPU is lost"


def test_throttle_intervals():
    s = series([0, 1, 2, 3, 4], {0: {"reasons": [0, PC, PC, 0, PC]}})
    assert telemetry_metrics.intervals(s, 0, PC) == [(1, 3), (4, 5)]
    assert telemetry_metrics.intervals(s, 0, HT) == []


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


def test_sub_second_hw_slowdowns_at_2_hz_are_counted_as_episodes():
    # NVML: "power draw too high, Fast Trigger protection" (a weak VR or PSU): one 0.5 s sample at a
    # time, again and again. The persistent share erases each one; the episodes keep them.
    masks = [0, HS, 0, 0, HS, 0, 0, HS, 0, 0, HS, 0]
    s = series([i / 2 for i in range(12)], {0: {"reasons": masks, "util": [100] * 12}}, period=0.5)
    ms = telemetry_metrics.derive(s)
    assert metric(ms, "gpu.throttle_pct", 0, reason="hw_slowdown") == 0.0
    assert metric(ms, "gpu.hw_slowdown_episodes", 0) == 4
    # one run of 6 samples is one episode; the ramp's sample at 30% utilisation is not a busy one
    assert telemetry_metrics.episodes([IDLE, HS] + [0] * 3 + [HS] * 6, HS, [0, 30] + [100] * 9) == 1
    assert telemetry_metrics.episodes([None, None], HS, [100, 100]) is None  # no bitmask known


def test_power_limit_metric_is_the_averaged_power_and_the_instant_peak_is_kept():
    s = series([0, 1, 2], {0: {"power": [720.0, 760.0, 690.0], "power_instant": [True] * 3,
                               "power_avg": [695.0, 699.0, 690.0]},
                           1: {"power": [650.0, 655.0, 640.0], "power_instant": [False] * 3}})
    ms = telemetry_metrics.derive(s)
    assert metric(ms, "gpu.power_max", 0) == 760.0  # the instantaneous peak (PSU headroom)
    assert metric(ms, "gpu.power_avg_max", 0) == 699.0  # what the 700 W limit is enforced on
    assert metric(ms, "gpu.power_avg_max", 1) == 655.0  # no instantaneous field: power is the average


def test_the_temperature_sibling_rule_is_an_offset_in_celsius():
    from harness import siblings
    from harness.series.telemetry import TelemetryParams, own_rules

    (rule,) = own_rules(TelemetryParams())
    assert (rule.offset, rule.tolerance) == (10.0, None)
    ms = [Metric("gpu.temp_max", t, "C", {"gpu": g}) for g, t in enumerate([44, 45, 45, 46, 57])]
    bad = [e for e in siblings.judge(rule, ms, "t") if e.outcome is Outcome.FAIL]
    # 57 C against a 45 C median: 12 C hotter fails (a 15% rule allowed only 6.8 C at 45 C, 10.5 C at 70)
    assert [e.labels["gpu"] for e in bad] == [4]
    hot = [Metric("gpu.temp_max", t, "C", {"gpu": g}) for g, t in enumerate([70, 70, 71, 79])]
    assert not [e for e in siblings.judge(rule, hot, "t") if e.outcome is Outcome.FAIL]
    assert own_rules(TelemetryParams(sibling_temp_offset=None)) == []
    (frac,) = own_rules(TelemetryParams(sibling_temp_tolerance=0.15))
    assert frac.tolerance == 0.15
