"""Inline SVG charts: the pure chart functions, and the NCCL chart in a rendered report."""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.compare.judge import evaluate
from harness.compare.rules import Rule
from harness.config.models import Expectation
from harness.model import CheckResult, Status
from harness.parsers import nccl
from harness.report.charts import Line, log_x_chart, nccl_busbw_chart, size_label

H100 = Path(__file__).parents[1] / "data" / "nccl-tests" / "all_reduce_h100_2node_16rank_oci.txt"
RULE = Rule(Expectation(metric="nccl.busbw", labels={"op": "all_reduce", "size": 17179869184,
                                                     "placement": "out-of-place"},
                        reference=480, lower=0.05, min=460, unit="GB/s"), "h100-sxm-8x")


def h100_check(rules=(RULE,)) -> CheckResult:
    metrics = nccl.parse(H100.read_text(), op="all_reduce").metrics
    return CheckResult("nccl-8gpu", "nccl", Status.PASSED, metrics=metrics,
                       evaluations=evaluate(rules, metrics))


@pytest.mark.parametrize("n, text", [(1, "1 B"), (8, "8 B"), (1024, "1 KiB"), (1536, "1.5 KiB"),
                                     (17179869184, "16 GiB"), (2**40 * 3, "3 TiB")])
def test_size_label(n, text):
    assert size_label(n) == text


def test_nothing_to_draw_is_empty():
    assert log_x_chart({}, title="t", y_label="y") == ""
    assert log_x_chart({"a": [(0, 1.0), (8, math.nan)]}, title="t", y_label="y") == ""


def test_real_h100_busbw_chart_with_the_profile_threshold():
    svg = nccl_busbw_chart(h100_check())
    root = ET.fromstring(svg)  # well-formed XML
    assert root.tag == "svg" and "http" not in svg  # the report holds no URL
    assert {e.tag for e in root.iter()} == {"svg", "title", "path", "text", "circle"}
    series = [p for p in root.iter("path") if p.get("class") == "series"]
    assert len(series) == 2  # out-of-place and in-place
    assert len(root.findall("circle")) == 10
    texts = ["".join(t.itertext()) for t in root.iter("text")]
    assert "min 460 GB/s at 16 GiB (all_reduce out-of-place) — h100-sxm-8x" in texts
    assert "reference 480 GB/s" in texts
    assert {"1 GiB", "2 GiB", "4 GiB", "8 GiB", "16 GiB"} <= set(texts)
    assert {"all_reduce out-of-place", "all_reduce in-place"} <= set(texts)
    # the threshold is drawn at its value on the same y scale as the points
    lines = {ln.get("stroke"): float(ln.get("d").split()[1].split("H")[0]) for ln in root.iter("path")
             if ln.get("class") == "threshold"}
    oop = [tuple(map(float, p.split())) for p in series[0].get("d").lstrip("M").split(" L")]
    assert oop[0][0] < oop[-1][0] and len(oop) == 5  # sizes ascending, left to right
    y_of_464 = oop[-1][1]  # 464.57 GB/s at 16 GiB
    assert lines["#cf222e"] > y_of_464  # 460 is drawn below (larger y) the measured 464.57
    assert lines["#9a6700"] < y_of_464  # the 480 reference above it


def test_log_axis_spaces_powers_of_two_evenly():
    svg = log_x_chart({"s": [(2**k, float(k)) for k in range(0, 31, 3)]}, title="t", y_label="y")
    xs = [float(c.get("cx")) for c in ET.fromstring(svg).iter("circle")]
    steps = {round(b - a, 6) for a, b in itertools.pairwise(xs)}
    assert len(steps) == 1


def test_text_from_a_run_is_escaped():
    evil = "<script>alert(1)</script>"
    svg = log_x_chart({evil: [(8, 1.0), (16, 2.0)]}, [Line(1.5, evil)], title=evil, y_label=evil)
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    ET.fromstring(svg)


def test_check_without_busbw_has_no_chart():
    check = CheckResult("n", "nccl", Status.ERRORED, message="all_reduce_perf not found")
    assert nccl_busbw_chart(check) == ""


def test_chart_without_expectations_has_no_lines():
    root = ET.fromstring(nccl_busbw_chart(h100_check(rules=())))
    assert not [ln for ln in root.iter("path") if ln.get("class") == "threshold"]


# Thinning long series: each bucket's extremes, so a spike is always drawn (SYNTHETIC series).

def test_thin_keeps_a_one_sample_spike_and_dip_and_the_ends():
    from harness.report.svg import thin

    values: list[float | None] = [8000.0] * 3600
    values[1234], values[2345] = 12_900.0, 100.0
    values[3000] = None
    idx = thin(values, 500)
    assert len(idx) <= 502
    assert {0, 1234, 2345, 3599} <= set(idx)
    assert idx == sorted(set(idx))
    assert thin([1.0, 2.0], 500) == [0, 1]
    assert thin([None] * 1000, 10) == sorted(set(thin([None] * 1000, 10)))


def test_power_chart_draws_the_spike_and_labels_the_true_peak():
    from harness.report.power_svg import chart
    from harness.series.power import PowerSeries

    n = 3600
    node = [8000.0] * n
    node[1777] = 12_900.0  # one 1-second spike among an hour of samples
    series = PowerSeries(1.0, tuple(float(i) for i in range(n)), ("load",) * n, tuple(node),
                         {0: (700.0,) * n}, capacity_w=15_000.0)
    svg = chart(series)
    assert "peak 12.9 kW" in svg
    path = re.search(r'class="node" d="([^"]+)"', svg)
    assert path is not None
    tops = [float(p.split()[1]) for p in path.group(1).lstrip("M").split(" L")]
    assert len(tops) <= 502
    assert min(tops) < max(tops)  # the spike rises above the flat line in the drawing


def test_telemetry_panel_keeps_a_temperature_spike():
    from harness.report.telemetry_svg import Series, panel

    n = 3000
    temps = [60.0] * n
    temps[2222] = 97.0
    series = Series(1.0, tuple(float(i) for i in range(n)), {0: {"temp": tuple(temps)}})
    svg = panel(series, "temp", "GPU temperature", "C", [])
    assert svg
    assert "97" in svg
