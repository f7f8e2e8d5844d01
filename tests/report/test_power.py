"""The power_headroom section of the report: headroom figure, chart with capacity and 80% lines,
stacked GPU power, PSU table, 'estimated' marking; escaping; and the page in a real Chromium.

The series and BMC texts are SYNTHETIC (built here), hostile strings included on purpose.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import report_samples as samples
from power_samples import EVIL, power_check

from harness.errors import RecordError
from harness.model import CheckResult
from harness.report.html import render_html
from harness.report.outputs import write_reports
from harness.report.power_svg import chart, power_view, psu_failures
from harness.series import power as power_series


def test_the_power_section_shows_the_figure_chart_and_psu_table(tmp_path: Path):
    c = power_check(tmp_path, lost=True)
    view = power_view(c, tmp_path)
    assert view is not None and view.headroom == "29.1 %" and view.outcome == "pass"
    assert view.peak == "9,360 W" and view.capacity == "13.2 kW" and not view.estimated
    svg = str(view.chart)
    assert svg.count('class="gpu"') == 8  # one stacked band per GPU
    assert "usable capacity" in svg and "80% (20% headroom)" in svg
    assert ">13.2 kW<" in svg and ">10.6 kW<" in svg
    assert re.search(r'class="node" d="M[^"]+" fill="none" stroke="#1f2328" stroke-width="2">', svg)
    assert "stroke-dasharray=\"5 3\"" not in svg  # measured: a solid line
    assert "PSU3 not OK at 5.0 s" in svg and psu_failures(power_series.load(
        tmp_path / "raw/power/power.json")) == [(5.0, "PSU3 not OK")]
    html = render_html(samples.record().__class__(**{**samples.record().__dict__, "checks": (c,)}), tmp_path)
    assert "<h3>Power headroom</h3>" in html and ">29.1 %</div>" in html
    row = re.search(r'<tr class="row-fail"><td class="mono">PSU3</td><td>OK</td><td>NOT OK</td>.*?</tr>',
                    html)
    assert row and "AC lost&lt;script&gt;" in row.group(0)
    assert EVIL not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # BMC texts escaped


def test_estimated_power_is_marked(tmp_path: Path):
    view = power_view(power_check(tmp_path, estimated=True), tmp_path)
    assert view is not None and view.estimated
    assert view.basis == ("estimated: GPU power (NVML) + 4,600 W allowance for the rest of the node; "
                          "no BMC reading")
    svg = str(view.chart)
    assert "Node input power over time (estimated)" in svg and 'stroke-dasharray="5 3"' in svg
    assert view.psus == ()  # no BMC, no PSU table


def test_no_view_without_a_series_and_an_error_for_a_broken_one(tmp_path: Path):
    c = power_check(tmp_path)
    assert power_view(c, None) is None
    outside = CheckResult(**{**c.__dict__, "details": {"power": {"file": "../../etc/passwd"}}})
    assert power_view(outside, tmp_path) is None
    (tmp_path / "raw/power/power.json").write_text("{not json")
    with pytest.raises(RecordError, match=r"raw/power/power.json: cannot read"):
        power_view(c, tmp_path)
    (tmp_path / "raw/power/power.json").unlink()
    assert power_view(c, tmp_path) is None  # missing: no chart, no error
    assert chart(power_series.PowerSeries(1.0, (0.0,), ("load",), (1.0,), {})) == ""


CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} not installed")
def test_power_section_in_chromium(tmp_path: Path):
    from playwright.sync_api import sync_playwright

    rec = samples.record()
    write_reports(rec.__class__(**{**rec.__dict__, "checks": (power_check(tmp_path, lost=True),)}), tmp_path)
    seen: dict[str, list[Any]] = {"errors": [], "requests": []}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"],
                              headless=True)
        try:
            page = b.new_page(viewport={"width": 1300, "height": 900})
            page.on("pageerror", lambda e: seen["errors"].append(str(e)))
            page.on("request", lambda r: seen["requests"].append(r.url))
            page.goto((tmp_path / "report.html").as_uri(), wait_until="load")
            figure = page.locator(".headroom")
            assert figure.inner_text() == "29.1 %"
            size = float(figure.evaluate("e => parseFloat(getComputedStyle(e).fontSize)"))
            assert size >= 28  # the headroom figure is large
            svg = page.locator("svg.power")
            box = svg.bounding_box()
            assert box is not None and box["width"] > 600 and box["height"] > 250
            assert page.locator("svg.power path.gpu").count() == 8
            assert page.locator("table.psus tbody tr").count() == 6
            assert page.locator("script").count() == 0
            svg.screenshot(path=str(tmp_path / "power.png"))
        finally:
            b.close()
    assert seen["errors"] == [] and seen["requests"] == [(tmp_path / "report.html").as_uri()]
