"""The report's per-GPU table: the burn's and the telemetry's numbers side by side, the odd GPU
marked. Pure view tests, and a real render of a run record."""

from __future__ import annotations

from dataclasses import replace

import report_samples as samples

from harness.model import CheckResult, Evaluation, Metric, Outcome, Status
from harness.report.gpu_table import gpu_table, holds
from harness.report.html import render_html


def burn_metrics() -> list[Metric]:
    out = []
    for g, (tf, temp, thr) in enumerate([(781.0, 71.0, 0.0), (779.5, 72.0, 0.0), (702.3, 84.0, 38.1)]):
        out += [Metric("gpu_burn.tflops", tf, "TFLOPS", {"gpu": g, "dtype": "bf16"}),
                Metric("gpu.temp_max", temp, "C", {"gpu": g}),
                Metric("gpu.throttle_pct", thr, "%", {"gpu": g, "reason": "any"}),
                Metric("gpu.throttle_pct", thr, "%", {"gpu": g, "reason": "power_cap"}),
                Metric("gpu.pcie_width", 16.0, "count", {"gpu": g, "which": "max"})]
    return out


def fail(metric: str, gpu: int, outcome: Outcome = Outcome.FAIL, **labels: str) -> Evaluation:
    return Evaluation(metric=metric, labels={"gpu": gpu, **labels}, outcome=outcome, severity="fail",
                      measured=1.0, unit="%", reference=None, low=None, high=5.0, reduce="each",
                      message="out", source="p")


def test_one_row_per_gpu_with_the_failed_and_warned_cells_marked():
    t = gpu_table(burn_metrics(), [fail("gpu.throttle_pct", 2, reason="power_cap"),
                                   fail("gpu_burn.tflops", 2, Outcome.WARN),
                                   Evaluation(metric="gpu.temp_max", labels={}, outcome=Outcome.PASS,
                                              severity="fail", measured=84.0, unit="C", reference=None,
                                              low=None, high=None, reduce="max", message="ok", source="p")])
    assert t is not None and t.headers == ("TFLOPS", "Temp max", "Throttled")
    (g0, s0, c0), _, (g2, s2, c2) = t.rows
    assert (g0, s0, [c.state for c in c0]) == (0, "", ["", "", ""])
    assert (g2, s2, [c.state for c in c2]) == (2, "fail", ["warn", "", "fail"])
    assert [c.metric.value for c in c2 if c.metric] == [702.3, 84.0, 38.1]
    # the table's cells leave the flat list; a per-reason throttle series and a max-width stay there
    by = {(m.name, m.labels.get("reason"), m.labels.get("which")): holds(t, m) for m in burn_metrics()[:5]}
    assert by == {("gpu_burn.tflops", None, None): True, ("gpu.temp_max", None, None): True,
                  ("gpu.throttle_pct", "any", None): True, ("gpu.throttle_pct", "power_cap", None): False,
                  ("gpu.pcie_width", None, "max"): False}


def test_no_table_without_per_gpu_numbers():
    assert gpu_table([Metric("fio.bw", 1.0, "GB/s", {"job": "seq"})], []) is None
    assert gpu_table([Metric("gpu.pcie_width", 16.0, "count", {"gpu": 0, "which": "max"})], []) is None


def test_the_report_shows_the_table_and_marks_the_gpu_out_of_spec():
    burn = CheckResult("gpu-burn", "gpu_burn", Status.FAILED, "3 GPUs", metrics=tuple(burn_metrics()),
                       evaluations=(fail("gpu.throttle_pct", 2, reason="power_cap"),))
    html = render_html(replace(samples.record(), checks=(burn,)), None)
    assert "<h3>Per GPU</h3>" in html
    row = html[html.index("GPU 2 <span class=\"tag\">out of spec</span>"):]
    row = row[:row.index("</tr>")]
    assert 'class="num cell-fail">38.1 %</td>' in row and "702 TFLOPS" in row
    assert "<h3>Other metrics</h3>" in html  # 6 left: short enough to show open


def test_a_long_list_of_other_metrics_is_folded():
    many = tuple(Metric("fio.iops", float(i), "IOPS", {"job": f"j{i}"}) for i in range(13))
    fio = CheckResult("fio", "fio", Status.PASSED, metrics=many)
    html = render_html(replace(samples.record(), checks=(fio,)), None)
    assert "<summary>Other metrics (13)</summary>" in html and "<h3>Other metrics</h3>" not in html
