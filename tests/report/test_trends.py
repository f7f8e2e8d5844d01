"""The report's History section: SVG trend charts (pure, escaped), changes, sign-off, and the
page in a real headless Chromium (charts drawn, nothing fetched, prints to PDF)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import report_samples as samples
from historyhelp import acceptance, derive, gpus

from harness.config.driftrules import DriftRule
from harness.history.drift import SourcedRule
from harness.history.record import annotate
from harness.history.store import SqliteStore
from harness.model import RunRecord
from harness.report.html import render_html
from harness.report.outputs import write_reports
from harness.report.svg import ChartPoint, num, trend_chart

CHROMIUM = Path("/usr/bin/chromium")
EVIL = samples.EVIL



@pytest.mark.parametrize("v, text", [
    (1132, "1.13k"), (2054, "2.05k"), (38021, "38k"), (84801, "84.8k"), (999_999, "1M"),
    (-1500, "-1.5k"), (0.156, "0.156"), (999.4, "999"), (1e10, "10G"), (0, "0"),
])
def test_axis_numbers_are_short_and_never_scientific_in_the_thousands(v: float, text: str) -> None:
    assert num(v) == text

def inspected(tmp_path: Path, evil: str = "") -> RunRecord:
    """A quarterly run of the sample node after three earlier ones, GPU 3 swapped, NCCL drifting."""
    full = samples.record()
    base = replace(full, checks=tuple(c for c in full.checks if c.status.value in ("passed", "warned")))
    host = "gpu-node-017" + evil
    quarters = [("2025-06-02T09:00:00Z", 1.0), ("2025-09-01T09:00:00Z", 0.99), ("2025-12-01T09:00:00Z", 0.97)]
    runs = [derive(base, f"q{i}", t, hostname=host, gpu_list=gpus(), scale={"nccl.busbw": s})
            for i, (t, s) in enumerate(quarters)]
    runs[0] = acceptance(runs[0])  # the go-live run: the first accepted run of an acceptance suite
    now = derive(base, "q3" + evil, "2026-03-02T09:00:00Z", hostname=host, gpu_list=gpus(swapped=[3]),
                 driver="560.35.03", scale={"nccl.busbw": 0.9})
    rules = [SourcedRule(DriftRule(metric="nccl.busbw", vs="golive", max_drop_pct=5), "suite quarterly")]
    with SqliteStore(tmp_path / "h.sqlite") as store:
        for r in runs:
            store.record(r)
        return annotate(now, store, rules)


def test_trend_chart_is_escaped_svg_with_band_golive_and_points():
    pts = [ChartPoint(100.0 + i, f"2026-0{i + 1}-01", f"run {i} <b>{EVIL}</b>", bad=i == 1) for i in range(4)]
    svg = str(trend_chart(pts, unit="GB/s", title="nccl.busbw" + EVIL, golive=100.0, low=95.0, high=None))
    assert svg.startswith('<svg class="trend"') and svg.endswith("</svg>")
    assert "<script" not in svg and "<img" not in svg and "&lt;script&gt;" in svg
    assert svg.count("<circle") == 4 and svg.count('class="dot bad"') == 1 and 'class="dot now"' in svg
    assert '<rect class="band"' in svg and '<line class="golive"' in svg and "<polyline" in svg
    ys = [float(y) for y in re.findall(r'<circle class="[^"]*" cx="[\d.]+" cy="([\d.]+)"', svg)]
    assert ys == sorted(ys, reverse=True)  # rising values are drawn higher up
    one = str(trend_chart([ChartPoint(5.0, "d", "t")], unit="%", title="x"))
    assert one.count("<circle") == 1 and "<polyline" not in one
    empty = trend_chart([ChartPoint(float("nan"), "d", "t")], unit="%", title="x")
    assert 'aria-label="no data"' in str(empty)


def test_history_section_shows_changes_drift_trends_and_sign_off(tmp_path: Path):
    record = inspected(tmp_path)
    html = render_html(record, None)
    start = html.index('<section class="history"')
    section = html[start:html.index("</section>", start)]
    assert "GPU swapped" in section and "GPU 3: serial 1753724031850 → 1753724099003" in section
    assert "nvidia_driver 550.90.07 → 560.35.03" in section
    assert "drifted: -10.0% since go-live (q0, 2025-06-02" in section
    assert section.count('<svg class="trend"') == len(record.history["trends"]) >= 3
    suite = record.suite["name"]
    assert (f"Go-live run</dt><dd>q0 (2025-06-02 09:00:00 UTC, {suite}, ACCEPTED, first accepted run of an "
            "acceptance suite)") in section
    assert f"Previous run</dt><dd>q2 (2025-12-01 09:00:00 UTC, {suite}, ACCEPTED)" in section
    assert 'id="signoff"' in html and html.count('class="fill"') >= 5
    drift = record.checks[-1]
    assert drift.id == "drift" and drift.status.value == "warned"
    assert render_html(samples.record(), None).count('id="history"') == 0  # no snapshot, no section


def test_hostile_names_in_history_stay_text(tmp_path: Path):
    html = render_html(inspected(tmp_path, evil=EVIL), None)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '"><img src=x' not in html


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{CHROMIUM} is missing, and CI=true requires the real browser check")
        pytest.skip(f"{CHROMIUM} not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                              args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        yield b
        b.close()


def test_trend_charts_render_and_print_in_chromium(browser: Any, tmp_path: Path):
    record = inspected(tmp_path)
    samples.write_raw(tmp_path)
    write_reports(record, tmp_path)
    requests: list[str] = []
    errors: list[str] = []
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto((tmp_path / "report.html").as_uri(), wait_until="load")
        charts = page.locator("section.history svg.trend")
        assert charts.count() == len(record.history["trends"])
        first = charts.first
        first.scroll_into_view_if_needed()
        box = first.bounding_box()
        assert box is not None and box["width"] > 250 and box["height"] > 80
        nccl = page.locator("figure.trend-card", has_text="nccl.busbw").first
        assert nccl.locator("circle").count() == 4 and nccl.locator("line.golive").count() == 1
        assert "worse" in (nccl.get_attribute("class") or "")  # -10% from go-live is flagged
        stroke = page.evaluate("getComputedStyle(document.querySelector('svg.trend .line')).stroke")
        assert stroke == "rgb(9, 105, 218)"  # styled by the report's CSS, not the browser default
        shot = nccl.screenshot()
        assert len(shot) > 2000
        page.emulate_media(media="print")
        assert page.locator("section.signoff.print-only table.signoff").is_visible()
        pdf = page.pdf(format="A4", print_background=True)
        assert pdf.startswith(b"%PDF") and len(pdf) > 10_000
        assert errors == []
        assert requests == [(tmp_path / "report.html").as_uri()]
    finally:
        page.close()
