"""The GPU profiles' telemetry rules against what a burn's telemetry gives: a vGPU guest without
clock-event reasons, healthy GPUs whose instantaneous power passes the limit, repeated HW slowdowns."""

from __future__ import annotations

import pytest
from telemetryhelp import series

from harness.compare import judge as compare
from harness.compare.rules import Rule
from harness.config import load_profile
from harness.model import Outcome
from harness.parsers import clockreasons
from harness.series import telemetry

HS = clockreasons.BITS["hw_slowdown"]
GPU_PROFILES = ["a100-sxm-8x", "h100-sxm-8x", "h200-sxm-8x", "dgx-h100", "b200-sxm-8x", "b300-sxm-8x",
                "gb200-nvl-4x"]


def judged(profile: str, s) -> dict[tuple[str, str], Outcome]:
    p = load_profile(profile).profile
    rules = [Rule(e, p.name) for e in p.expectations
             if e.metric.startswith(("gpu.throttle_pct", "gpu.power", "gpu.hw_slowdown"))]
    evs = compare.evaluate(rules, telemetry.derive(s))
    return {(e.metric, str(e.labels.get("reason", ""))): e.outcome for e in evs}


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_a_vm_guest_without_clock_reasons_is_not_judged_on_them(profile: str):
    # a vGPU/VM guest: NVML answers temperature and power but not the clock-event reasons
    s = series([0, 1, 2], {g: {"temp": [60, 61, 62], "power": [300.0] * 3, "util": [100] * 3,
                               "reasons": [None] * 3} for g in range(8)})
    out = judged(profile, s)
    assert Outcome.ERROR not in out.values(), out


@pytest.mark.parametrize("profile", ["h100-sxm-8x", "h200-sxm-8x"])
def test_instant_peaks_above_700_w_with_a_700_w_average_do_not_warn(profile: str):
    s = series([0, 1, 2], {g: {"power": [705.0, 745.0, 690.0], "power_instant": [True] * 3,
                               "power_avg": [698.0, 699.5, 696.0], "util": [100] * 3, "reasons": [0x4] * 3}
                           for g in range(8)})
    out = judged(profile, s)
    assert out[("gpu.power_avg_max", "")] is Outcome.PASS
    assert ("gpu.power_max", "") not in out  # the instantaneous peak is the PSU headroom's


@pytest.mark.parametrize("profile", ["a100-sxm-8x", "h100-sxm-8x", "h200-sxm-8x"])
def test_repeated_sub_second_hw_slowdowns_fail_at_2_hz(profile: str):
    masks = [0, HS, 0, 0, HS, 0, 0, HS, 0, 0, HS, 0]
    s = series([i / 2 for i in range(12)], {0: {"reasons": masks, "util": [100] * 12, "power": [500.0] * 12}},
               period=0.5)
    out = judged(profile, s)
    assert out[("gpu.throttle_pct", "hw_slowdown")] is Outcome.PASS  # each run is shorter than 0.5 s
    assert out[("gpu.hw_slowdown_episodes", "")] is Outcome.FAIL
