"""Robust fleet outliers: median/MAD z-scores, direction-aware, tested by example and by property."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from harness.fleet.stats import SeriesKey, find_outliers, group, robust_z, series_outliers, spread

KEY = SeriesKey("8x H100", "nccl", "nccl.busbw", "GB/s", (("op", "all_reduce"),))


def fleet(values: list[float]) -> dict[str, float]:
    return {f"n{i:03d}": v for i, v in enumerate(values)}


def test_spread_uses_mad_and_falls_back_to_mean_absolute_deviation():
    s = spread([10.0, 11.0, 12.0, 13.0, 100.0])
    assert s.median == 12.0 and s.sigma == pytest.approx(1.4826 * 1.0) and s.n == 5
    same = spread([5.0, 5.0, 5.0, 5.0, 9.0])  # MAD = 0: more than half agree exactly
    assert same.sigma == pytest.approx(1.2533 * 4.0 / 5)
    assert spread([3.0, 3.0, 3.0]).sigma == 0.0 and robust_z(3.0, spread([3.0, 3.0, 3.0])) == 0.0


def test_a_slow_node_is_flagged_a_fast_one_is_not():
    values = fleet([400.0, 401.0, 399.5, 400.5, 402.0, 398.0, 300.0, 470.0])
    flagged = series_outliers(KEY, values, "higher")
    assert [(o.node, o.value) for o in flagged] == [("n006", 300.0)]
    o = flagged[0]
    assert o.z < -3.5 and o.deviation_pct == pytest.approx(-25.0, abs=0.2) and o.n == 8
    # the same numbers for a lower-is-better metric flag the other end
    assert [o.node for o in series_outliers(KEY, values, "lower")] == ["n007"]
    assert {o.node for o in series_outliers(KEY, values, "none")} == {"n006", "n007"}


def test_small_relative_differences_are_not_outliers_even_with_tiny_spread():
    values = fleet([100.0, 100.0, 100.0, 100.0, 100.0, 99.0])  # 1 % off a perfectly flat fleet
    assert series_outliers(KEY, values, "higher") == []
    assert [o.node for o in series_outliers(KEY, values, "higher", min_rel=0.001)] == ["n005"]


def test_too_few_nodes_give_no_verdict():
    four = fleet([100.0, 101.0, 99.0, 10.0])
    assert [o.node for o in series_outliers(KEY, four, "higher")] == ["n003"]
    assert series_outliers(KEY, four, "higher", min_nodes=5) == []


def test_non_finite_values_are_ignored():
    values = {**fleet([1.0, 1.0, 1.0, 1.0, 5.0]), "nan": math.nan, "inf": math.inf}
    assert [o.node for o in series_outliers(KEY, values, "lower")] == ["n004"]


def test_group_averages_repeats_and_find_orders_farthest_first():
    k2 = SeriesKey("8x H100", "fio", "fio.bw", "GB/s")
    samples = [(KEY, f"n{i}", 400.0 + i % 3) for i in range(10)] + [(KEY, "n9", 250.0)]
    samples += [(k2, f"n{i}", 6.0) for i in range(9)] + [(k2, "n9", 1.0)]
    series = group(samples)
    assert series[KEY]["n9"] == pytest.approx((400.0 + 0 + 250.0) / 2)
    found = find_outliers(series, lambda k: "higher")
    assert [(o.node, o.key.metric) for o in found] == [("n9", "nccl.busbw"), ("n9", "fio.bw")]
    assert abs(found[0].z) > abs(found[1].z) > 3.5


healthy = st.lists(st.floats(min_value=95.0, max_value=105.0), min_size=6, max_size=60)


@settings(max_examples=200, deadline=None)
@given(healthy, st.floats(min_value=0.0, max_value=60.0))
def test_a_planted_straggler_is_always_found(values, planted):
    nodes = fleet(values)
    nodes["bad"] = planted
    found = series_outliers(KEY, nodes, "higher")
    assert "bad" in {o.node for o in found}
    assert all(o.value < 95.0 or o.node != "bad" for o in found)


@settings(max_examples=200, deadline=None)
@given(healthy, st.floats(min_value=200.0, max_value=1e4))
def test_a_node_far_on_the_good_side_is_never_flagged(values, planted):
    nodes = fleet(values)
    nodes["fast"] = planted
    assert "fast" not in {o.node for o in series_outliers(KEY, nodes, "higher")}
    assert "fast" in {o.node for o in series_outliers(KEY, nodes, "lower")}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=4, max_size=40),
       st.floats(min_value=0.01, max_value=1e3), st.floats(min_value=-1e6, max_value=1e6))
def test_outliers_do_not_depend_on_units_or_offsets(values, scale, shift):
    """z-scores are invariant under x -> a*x + b (a > 0): GB/s or MB/s flag the same nodes."""
    base = fleet(values)
    moved = {n: v * scale + shift for n, v in base.items()}
    assume(all(math.isfinite(v) for v in moved.values()))
    s0, s1 = spread(list(base.values())), spread(list(moved.values()))
    # the spread must survive the shift in floating point (not lost to cancellation)
    assume(s0.sigma * scale > 1e-6 * max(1.0, *(abs(v) for v in moved.values())))
    for n in base:
        assert robust_z(moved[n], s1) == pytest.approx(robust_z(base[n], s0), rel=1e-6, abs=1e-6)


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=-1e9, max_value=1e9), st.integers(min_value=4, max_value=50))
def test_an_identical_fleet_has_no_outliers(value, n):
    assert series_outliers(KEY, fleet([value] * n), "none") == []
