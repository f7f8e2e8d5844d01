"""Issue #16, the fleet report on paper: fleet.html printed by a real headless Chromium to A4 is a
few pages; page 1 states the fleet verdict and names the rejected, errored and untested nodes; the
heatmap prints as a table with labelled rows (nodes) and columns (series), a legend and each value,
and nothing says "hover" on paper. On screen the heatmap stays the SVG.

Skipped without /usr/bin/chromium or poppler's pdftotext, except under CI=true.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleet_samples import outcome, record

from harness.fleet.analysis import FleetReport, analyse
from harness.fleet.collect import NodeStatus
from harness.fleet.html import PRINT_HEALTHY_ROWS, render_html
from harness.fleet.report import write

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

_missing = [w for w, ok in (("chromium", CHROMIUM.exists()), ("pdftotext", shutil.which("pdftotext")),
                            ("pdfinfo", shutil.which("pdfinfo"))) if not ok]
if _missing:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{', '.join(_missing)} missing (scripts/setup.sh --test installs them)", pytrace=False)
    pytest.skip(f"{', '.join(_missing)} not installed", allow_module_level=True)


def fleet(n: int = 30) -> FleetReport:
    """n nodes: n04 rejected (20 GB/s < 50), n03 a passing outlier (55 GB/s), n05 errors 3 times
    (rejected), one errored job, one untested node, one pending."""
    outs = [outcome(f"n{i:02d}", record(f"n{i:02d}", 100.0 + i % 3)) for i in range(n)]
    outs[3] = outcome("n03", record("n03", 55.0))
    outs[4] = outcome("n04", record("n04", 20.0))
    outs[5] = outcome("n05", record("n05", 101.0, errors=3))
    outs += [outcome("n97", None, NodeStatus.UNTESTED, "no check judged anything (2 skipped)"),
             outcome("n98", None, NodeStatus.PENDING, "waiting to start: PENDING (Priority)"),
             outcome("n99", None, NodeStatus.ERRORED, "job 7 ended NODE_FAIL")]
    return analyse(outs, suite="acceptance", profile="lenient", submitted="2026-11-29T10:00:00Z",
                   generated="2026-11-29T10:05:00Z")


def _text(pdf: Path, *pages: int) -> str:
    span = ["-f", str(pages[0]), "-l", str(pages[-1])] if pages else []
    return subprocess.run(["pdftotext", "-layout", *span, str(pdf), "-"], capture_output=True, text=True,
                          check=True, timeout=60).stdout


def _pages(pdf: Path) -> int:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True, timeout=60)
    return int(re.search(r"^Pages:\s+(\d+)", info.stdout, re.M).group(1))  # type: ignore[union-attr]


def print_pdf(html: Path) -> Path:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        page: Any = browser.new_page()
        page.goto(html.as_uri(), wait_until="load")
        page.emulate_media(media="print")
        pdf = html.with_suffix(".pdf")
        pdf.write_bytes(page.pdf(format="A4", print_background=True, prefer_css_page_size=True))
        browser.close()
    return pdf


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FleetReport, Path]]:
    rep = fleet()
    out = tmp_path_factory.mktemp("fleet")
    yield rep, print_pdf(write(out, rep)["html"])


def test_it_prints_in_a_few_pages(printed: tuple[FleetReport, Path]) -> None:
    assert 1 <= _pages(printed[1]) <= 4


def test_page_one_states_the_verdict_and_the_bad_nodes_by_name(printed: tuple[FleetReport, Path]) -> None:
    rep, pdf = printed
    page1 = " ".join(_text(pdf, 1).split())
    assert rep.verdict == "REJECTED" and "REJECTED" in page1
    for word, nodes in (("Rejected (2):", "n04, n05"), ("Errored (1):", "n99"), ("Untested (1):", "n97"),
                        ("Without a verdict yet (1):", "n98")):
        assert f"{word} {nodes}" in page1


def test_the_heatmap_prints_labelled_with_values_and_a_legend(printed: tuple[FleetReport, Path]) -> None:
    _, pdf = printed
    text = _text(pdf)
    flat = " ".join(text.split())
    assert "Hover" not in flat and "hover" not in flat
    assert "1. app: app.bw{gpu=0} [GB/s]" in flat and "2. app: app.errors [count]" in flat
    for words in ("at the median", "10 % worse", "20 % or more worse", "no value"):
        assert words in flat
    heat = [ln.split() for ln in text.splitlines() if re.match(r"\s*n\d\d\s+[A-Z]+\s+\d", ln)]
    rows = {words[0]: words[1:] for words in heat}
    # a heatmap row: node, status, then each column's value on the same line
    assert rows["n04"][:4] == ["REJECTED", "20", "GB/s", "0"]
    assert rows["n03"][:4] == ["ACCEPTED", "55", "GB/s", "0"]
    assert rows["n05"][:4] == ["REJECTED", "101", "GB/s", "3"]
    assert {f"n{i:02d}" for i in range(30)} <= set(rows)  # 30 nodes: the healthy ones print too


def test_on_screen_the_heatmap_is_the_svg_and_the_hint_stays() -> None:
    html = render_html(fleet())
    assert "Hover a cell for its value." in html and html.count('<rect x="') >= 30 * 2
    assert '<table class="heatp paper">' in html and "@media print" in html


def test_a_large_fleet_leaves_its_healthy_nodes_off_paper(tmp_path: Path) -> None:
    rep = fleet(PRINT_HEALTHY_ROWS + 60)
    html = render_html(rep)
    assert html.count('<details class="noprint">') == 2  # the healthy heatmap and the healthy node table
    assert "97 healthy node(s) are left off paper" in html and "<summary>97 healthy node(s)" in html
    assert html.count('<td class="mono">n50</td>') == 1  # the folded table on screen, no paper copy
    pdf = print_pdf(write(tmp_path, rep)["html"])
    assert _pages(pdf) <= 4
    page1 = " ".join(_text(pdf, 1).split())
    assert "Rejected (2): n04, n05" in page1
