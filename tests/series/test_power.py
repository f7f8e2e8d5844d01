"""harness/series/psu.py and harness/series/power.py: capacity, headroom, PSU and GPU verdicts. Pure.

BMC readings here are SYNTHETIC (built in the test); the parsers of real ipmitool/Redfish
output have their own tests.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.config import load_profile
from harness.errors import ConfigError
from harness.model import BmcReading, Outcome, PsuReading
from harness.platform.nvml import GpuLimits, GpuSample
from harness.series import power as power_series
from harness.series import psu as power
from harness.series.power import Sample
from harness.series.psu import BmcTick, PsuPolicy

DGX = PsuPolicy(6, 3300.0, "4+2", 10200.0)


@pytest.mark.parametrize("count, redundancy, usable", [
    (6, "4+2", 4), (6, "N+N", 3), (6, "N+1", 5), (6, "N+2", 4), (6, "none", 6), (2, "1+1", 1),
    (4, "N+N", 2), (1, "none", 1), (6, "3+3", 3),
])
def test_usable_psus(count, redundancy, usable):
    assert power.usable_psus(count, redundancy) == usable


@pytest.mark.parametrize("count, redundancy, message", [
    (5, "N+N", "N+N redundancy needs an even PSU count, got 5"),
    (5, "4+2", "4+2 redundancy does not fit 5 PSUs"),
    (2, "N+2", "N+2 redundancy needs more than 2 PSUs, got 2"),
    (6, "0+6", "0+6 redundancy does not fit 6 PSUs"),
    (6, "2N", "unknown PSU redundancy '2N'"),
    (0, "none", "PSU count must be at least 1"),
])
def test_policies_that_cannot_hold(count, redundancy, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        power.usable_psus(count, redundancy)


def test_dgx_h100_capacity_and_headroom():
    assert DGX.usable == 4 and DGX.capacity_w == 13200.0
    assert DGX.describe() == "6 x 3,300 W PSUs, 4+2: 4 carry the load = 13,200 W usable"
    # at the DGX's stated maximum of 10.2 kW: 22.7% headroom; 20% headroom is a 10.56 kW peak
    assert power.headroom_pct(10200.0, DGX.capacity_w) == pytest.approx(22.727, abs=1e-3)
    assert power.headroom_pct(10560.0, DGX.capacity_w) == pytest.approx(20.0)
    assert power.headroom_pct(14000.0, DGX.capacity_w) < 0  # beyond usable capacity: negative


redundancies = st.one_of(st.just("none"), st.just("N+N"), st.integers(1, 4).map(lambda k: f"N+{k}"))


@given(count=st.integers(1, 32), redundancy=redundancies, rating=st.floats(100, 10000),
       peak=st.floats(0, 100000), more=st.floats(0, 1000))
def test_capacity_and_headroom_properties(count, redundancy, rating, peak, more):
    try:
        usable = power.usable_psus(count, redundancy)
    except ValueError:
        return  # e.g. N+N with an odd count; the exact messages are tested above
    assert 1 <= usable <= count
    policy = PsuPolicy(count, rating, redundancy)
    assert policy.capacity_w == usable * rating
    h = power.headroom_pct(peak, policy.capacity_w)
    assert h <= 100.0
    assert power.headroom_pct(peak + more, policy.capacity_w) <= h  # more power, less headroom
    assert (h >= 20.0) == (peak <= 0.8 * policy.capacity_w * (1 + 1e-12))


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=60), st.floats(0, 100))
def test_percentile_properties(values, q):
    p = power.percentile(values, q)
    assert min(values) <= p <= max(values)
    assert power.percentile(values, 0) == min(values) and power.percentile(values, 100) == max(values)


def test_percentile_interpolates():
    assert power.percentile(range(1, 101), 99) == pytest.approx(99.01)
    assert power.percentile([10.0, 20.0], 50) == 15.0
    with pytest.raises(ValueError):
        power.percentile([], 50)


def test_policy_and_allowance_from_the_dgx_profile():
    hw = load_profile("dgx-h100").profile.hardware.model_dump()
    assert power.policy_from_hardware(hw) == DGX
    assert power.allowance_from_hardware(hw) == 10200.0 - 8 * 700.0
    assert power.policy_from_hardware({}) is None
    assert power.allowance_from_hardware({"psu": {"count": 2, "rating_w": 800}}) is None


def test_a_profile_with_a_policy_that_cannot_hold_is_a_config_error(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nhardware:\n  psu: {count: 5, rating_w: 3300, redundancy: \"4+2\"}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:3:\d+: hardware.psu: 4\+2 redundancy does not fit 5"):
        load_profile(str(bad))


def psus(n: int = 6, down: tuple[str, ...] = (), watts: float = 1500.0) -> tuple[PsuReading, ...]:
    return tuple(PsuReading(f"PSU{i}", f"PSU{i}" not in down, watts, None, 3300.0,
                            "Presence detected, AC lost" if f"PSU{i}" in down else "Presence detected")
                 for i in range(1, n + 1))


def reading(node: float | None = 9000.0, **kw) -> BmcReading:
    kw.setdefault("psus", psus())
    return BmcReading(0.0, node, **kw)


def test_node_power_falls_back_to_the_psus_input_power():
    assert power.node_power(reading(8000.0)) == 8000.0
    assert power.node_power(reading(None)) == 6 * 1500.0
    gap = (*psus(5), PsuReading("PSU6", True, None))
    assert power.node_power(reading(None, psus=gap)) is None
    assert power.estimate([650.0] * 8, 4600.0) == 9800.0
    assert power.estimate([650.0, None], 4600.0) is None


def ticks(*rs: tuple[float, str, BmcReading]) -> list[BmcTick]:
    return [BmcTick(t, phase, r) for t, phase, r in rs]


def test_all_psus_ok_is_one_passing_verdict():
    both = ticks((-1, "before", reading(redundant=True)), (5, "load", reading(redundant=True)))
    (ev,) = power.judge_psus(both, DGX)
    assert ev.outcome is Outcome.PASS and ev.metric == "power.psus_ok" and ev.measured == 6
    assert ev.message == "6 of 6 PSUs OK in every reading (before, load); redundancy kept"


def test_a_psu_lost_mid_load_fails_with_its_name_time_and_status():
    evs = power.judge_psus(ticks((-1, "before", reading(redundant=True)),
                                 (41.0, "load", reading(psus=psus(down=("PSU3",)), redundant=False)),
                                 (42.0, "load", reading(psus=psus(down=("PSU3",)), redundant=False))), DGX)
    by = {e.metric: e for e in evs}
    assert {e.outcome for e in evs} == {Outcome.FAIL} and len(evs) == 3
    assert by["psu.ok"].labels == {"psu": "PSU3", "phase": "load"}
    assert by["psu.ok"].message == "PSU3 failed 41.0 s into the load: Presence detected, AC lost"
    assert by["psu.redundant"].message == "the BMC reports PSU redundancy lost 41.0 s into the load"
    assert by["power.psus_ok"].message == ("5 of 6 PSUs healthy 41.0 s into the load: 4+2 redundancy "
                                           "not intact")


def test_psus_down_before_the_load_and_below_what_carries_it():
    down = ("PSU1", "PSU2", "PSU5")
    evs = power.judge_psus(ticks((-1, "before", reading(psus=psus(down=down)))), DGX)
    assert [e.message for e in evs if e.metric == "psu.ok"] == [
        f"{p} not OK before the load: Presence detected, AC lost" for p in down]
    (few,) = [e for e in evs if e.metric == "power.psus_ok"]
    assert few.message == ("3 of 6 PSUs healthy before the load: fewer than the 4 that carry the load "
                           "(4+2)")


def test_a_bmc_listing_fewer_psus_than_the_profile_fails():
    (ev,) = power.judge_psus(ticks((0, "load", reading(psus=psus(4)))), DGX)
    assert ev.outcome is Outcome.FAIL
    assert ev.message == "the BMC lists 4 PSUs (PSU1, PSU2, PSU3, PSU4); the profile has 6"


def test_unknown_psu_state_is_said_and_no_bmc_psu_data_gives_no_verdict():
    odd = (*psus(5), PsuReading("PSU6", None))
    (ev,) = power.judge_psus(ticks((0, "load", reading(psus=odd))), None)
    assert ev.outcome is Outcome.PASS and ev.message.endswith("; state unknown: PSU6")
    assert power.judge_psus(ticks((0, "load", reading(psus=()))), DGX) == ()


def test_psu_table():
    rows = power.psu_table(ticks((-1, "before", reading(psus=psus(watts=300.0))),
                                 (3, "load", reading(psus=psus(down=("PSU2",), watts=1800.0)))))
    assert rows[1] == {"psu": "PSU2", "before": True, "during": False, "peak_in_w": 1800.0,
                       "peak_out_w": None, "capacity_w": 3300.0, "status": "Presence detected, AC lost"}
    assert rows[0]["peak_in_w"] == 1800.0  # the idle reading before the load is not a peak


# ---------------------------------------------------------------- series, metrics, GPU verdicts

def gpus(watts: float, temp: float = 60.0, mem: float = 55.0, n: int = 2) -> tuple[GpuSample, ...]:
    return tuple(GpuSample(gpu=i, power=watts, temp=temp, mem_temp=mem) for i in range(n))


def samples(node: list[float | None], gpu_w: float = 600.0, bmc: bool = True) -> list[Sample]:
    phases = ["before"] + ["load"] * (len(node) - 2) + ["cooldown"]
    return [Sample(float(i - 1), p, reading(w) if bmc else None, None, gpus(gpu_w))
            for i, (p, w) in enumerate(zip(phases, node, strict=True))]


def test_measured_series_metrics_and_round_trip(tmp_path: Path):
    s = samples([2000.0, 9000.0, 10000.0, 9500.0, 3000.0])
    series = power_series.build(s, 1.0, allowance_w=4600.0, capacity_w=DGX.capacity_w, source="ipmitool dcmi")
    assert not series.estimated and series.allowance_w is None
    m = {x.name: x.value for x in power_series.derive(series, s, DGX, ()) if not x.labels}
    assert m["power.node_peak"] == 10000.0  # the cool-down and idle readings are not the load's peak
    assert m["power.headroom_pct"] == pytest.approx(100 * (1 - 10000 / 13200))
    assert m["power.usable_capacity"] == 13200.0 and m["power.estimated"] == 0.0
    assert m["power.gpu_peak"] == 1200.0
    assert m["power.gpu_share_pct"] == pytest.approx(100 * 3600 / 28500)
    assert m["power.node_p99"] == pytest.approx(power.percentile([9000, 10000, 9500], 99))
    assert m["power.psus_ok"] == 6 and "psu.redundant" not in m  # these readings have no sensor
    back = power_series.load(power_series.save(series, tmp_path))
    assert back == series


def test_without_a_bmc_node_power_is_estimated_and_marked():
    s = samples([None, None, None, None], gpu_w=650.0, bmc=False)
    series = power_series.build(s, 1.0, allowance_w=4600.0, capacity_w=13200.0, source="estimated")
    assert series.estimated and series.allowance_w == 4600.0
    assert set(series.node_w) == {2 * 650.0 + 4600.0}
    m = {x.name: x.value for x in power_series.derive(series, s, DGX, ()) if not x.labels}
    assert m["power.estimated"] == 1.0 and m["power.node_peak"] == 5900.0
    # without an allowance there is no node power at all, and nothing pretends otherwise
    none = power_series.build(s, 1.0, allowance_w=None, capacity_w=13200.0, source="estimated")
    assert not none.estimated and set(none.node_w) == {None}
    assert "power.node_peak" not in {x.name for x in power_series.derive(none, s, DGX, ())}


def lim(gpu: int, enforced: float = 700.0, default: float = 700.0) -> GpuLimits:
    return GpuLimits(gpu, enforced, default, 87.0, 92.0, 95.0)


def test_a_gpu_capped_below_its_default_power_limit_fails():
    evs = power_series.judge_gpus(samples([1.0, 1.0, 1.0]), [lim(0), lim(1, enforced=500.0)], 5.0)
    (cap,) = [e for e in evs if e.metric == "gpu.power_limit"]
    assert cap.outcome is Outcome.FAIL and cap.labels == {"gpu": 1, "which": "enforced"}
    assert cap.message.startswith("GPU 1: enforced power limit 500 W is below its default 700 W: capped")
    (ok,) = [e for e in power_series.judge_gpus(samples([1.0, 1.0, 1.0]), [lim(0), lim(1)], 5.0)
             if e.metric == "gpu.power_limit"]
    assert ok.outcome is Outcome.PASS and ok.message == "2 GPU(s) at their default power limit (700 W)"


@pytest.mark.parametrize("temp, mem, outcome, text", [
    (70.0, 60.0, Outcome.PASS, "closest: GPU 0 70 C, 17 C below 87 C"),
    (84.0, 60.0, Outcome.WARN, "GPU 0: GPU peak 84 C within 5 C of its slowdown threshold 87 C"),
    (87.0, 60.0, Outcome.FAIL, "GPU 0: GPU peak 87 C reached its slowdown threshold 87 C"),
    (70.0, 96.0, Outcome.FAIL, "GPU 0: HBM peak 96 C reached its memory temperature limit 95 C"),
])
def test_temperature_against_the_gpus_own_thresholds(temp, mem, outcome, text):
    s = [Sample(0.0, "load", None, None, gpus(600.0, temp, mem, n=1))]
    evs = [e for e in power_series.judge_gpus(s, [lim(0)], 5.0) if e.metric == "gpu.temp_margin"]
    worst = min(evs, key=lambda e: e.measured or 0.0)
    assert worst.outcome is outcome and text in worst.message
    m = {(x.labels["sensor"]): x.value for x in power_series.derive(
        power_series.build(s, 1.0, allowance_w=None, capacity_w=None, source=""), s, None, [lim(0)])
        if x.name == "gpu.temp_margin"}
    assert m == {"gpu": 87.0 - temp, "memory": 95.0 - mem}


def test_fans_and_inlet_air():
    hot = [Sample(3.0, "load", reading(inlet_temp_c=38.0, fans_ok=False))]
    evs = {e.metric: e for e in power_series.judge_airflow(hot, 35.0)}
    assert evs["bmc.fans_ok"].outcome is Outcome.FAIL
    assert evs["bmc.fans_ok"].message == "the BMC reports a fan fault 3.0 s into the load"
    assert evs["bmc.inlet_temp_max"].outcome is Outcome.WARN and evs["bmc.inlet_temp_max"].high == 35.0
    assert power_series.judge_airflow(hot, None) == (evs["bmc.fans_ok"],)
    cool = [Sample(3.0, "load", reading(inlet_temp_c=22.0, fans_ok=True))]
    assert power_series.judge_airflow(cool, 35.0) == ()


def test_series_without_finite_values_gives_no_power_metrics():
    s = [Sample(0.0, "load", reading(math.nan))]
    series = power_series.build(s, 1.0, allowance_w=None, capacity_w=1.0, source="")
    assert "power.node_peak" not in {m.name for m in power_series.derive(series, s, None, ())}
