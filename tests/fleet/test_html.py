"""fleet.html: self-contained, escaped, worst first, outliers and heatmap drawn; checked in real Chromium."""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from fleet_samples import outcome, record
from report_samples import EVIL

from harness.fleet.analysis import analyse
from harness.fleet.collect import NodeStatus
from harness.fleet.html import badness, colour, render_html
from harness.fleet.report import write

TAGS = {"html", "head", "meta", "title", "style", "body", "main", "h1", "h2", "p", "div", "span", "table",
        "thead", "tbody", "tr", "th", "td", "b", "i", "a", "details", "summary", "svg", "g", "rect", "line",
        "circle", "text"}
CHROMIUM = Path("/usr/bin/chromium")


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.urls += [v or "" for k, v in attrs if k in ("href", "src")]


def report(evil: str = "", n: int = 12):
    outs = [outcome(f"n{i:02d}{evil if i == 5 else ''}", record(f"n{i}", 100.0 + i % 3)) for i in range(n)]
    outs[3] = outcome("n03", record("n03", 55.0))  # outlier: passes >= 50
    outs[4] = outcome("n04", record("n04", 20.0))  # fails
    outs.append(outcome("n99", None, NodeStatus.ERRORED, f"job 7 ended NODE_FAIL {evil}"))
    outs.append(outcome("n98", None, NodeStatus.PENDING, "waiting to start: PENDING (Priority)"))
    return analyse(outs, suite=f"acceptance{evil}", profile="lenient", submitted="2026-11-29T10:00:00Z",
                   generated="2026-11-29T10:05:00Z")


def test_sections_order_and_contents(tmp_path: Path):
    rep = report()
    paths = write(tmp_path, rep)
    html = paths["html"].read_text()
    drain, errored = html.index("Nodes to drain / RMA (1)"), html.index("Errored nodes (1)")
    assert drain < errored < html.index("Fleet outliers")
    assert "app.bw{gpu=0}" in html and "measured 20 GB/s, expected &gt;= 50 GB/s" in html
    assert "harness: app app.bw{gpu=0} measured 20 GB/s, expected &gt;= 50 GB/s" in html
    assert '<div class="word">INCOMPLETE</div>' not in html and '<div class="word">REJECTED</div>' in html
    assert html.count("<svg") >= 3  # heatmap (attention + healthy) and a distribution plot
    # 12 nodes: n04 rejected, n03 an outlier; only the other 10 are folded away
    assert "<summary>10 accepted node(s) without outliers</summary>" in html
    assert 'href="nodes/n00/run/report.html"' in html
    p = Tags()
    p.feed(html)
    assert p.tags <= TAGS
    assert all(u.startswith("nodes/") for u in p.urls)  # only links to the nodes' own reports


def test_hostile_names_and_reasons_are_escaped():
    html = render_html(report(EVIL))
    assert "<script>" not in html and "onerror=alert" not in html.replace("onerror=alert(2)&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "{{ 7*7 }}" in html
    p = Tags()
    p.feed(html)
    assert p.tags <= TAGS


def test_colours_follow_the_bad_side():
    assert badness(90.0, 100.0, "higher") == pytest.approx(0.1) and badness(110.0, 100.0, "higher") == 0.0
    assert badness(110.0, 100.0, "lower") == pytest.approx(0.1) and badness(90.0, 100.0, "none") > 0
    assert colour(0.0) == "#e8f5e9" and colour(0.5) == colour(0.2) != colour(0.1)


def test_a_thousand_nodes_stay_readable_and_small():
    rep = report(n=1000)
    html = render_html(rep)
    assert len(html) < 15_000_000
    assert "accepted node(s) without outliers</summary>" in html


@pytest.fixture(scope="module")
def browser() -> Any:
    if not CHROMIUM.exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{CHROMIUM} is missing, and CI=true requires the real browser check", pytrace=False)
        pytest.skip(f"{CHROMIUM} not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                              args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                                    "--disable-background-networking", "--disable-component-update"])
        yield b
        b.close()


def test_fleet_html_in_chromium(browser: Any, tmp_path: Path):
    write(tmp_path, report(EVIL))
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    requests: list[str] = []
    errors: list[str] = []
    dialogs: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto((tmp_path / "fleet.html").as_uri(), wait_until="load")
        assert page.locator(".banner .word").inner_text() == "REJECTED"
        assert page.locator("table.drain tr").count() == 2  # header + the failed evidence of n04
        flagged = page.locator("table.outliers tr td:first-child").all_inner_texts()
        assert set(flagged) == {"n03", "n04"}  # the outlier, and the failed node is far out too
        assert page.locator(".heat rect").count() > 0 and page.locator(".plot circle").count() >= 1
        assert page.evaluate("document.scripts.length") == 0 and page.locator("img, iframe").count() == 0
        assert EVIL.split(" ")[0] in page.locator("h1").inner_text()
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        pdf = page.pdf(format="A4", print_background=True)
        assert pdf.startswith(b"%PDF")
    finally:
        page.close()
    assert requests == [(tmp_path / "fleet.html").as_uri()] and errors == [] and dialogs == []
