"""Issue #16, the report on paper: the shipped quarterly suite's report of a two-quarter history,
printed by a real headless Chromium to A4, is a few pages; page 1 carries the verdict, what
warned by name, the node and the sign-off; no number is split across lines.

The record is a real `harness run quarterly` on a development VM whose history holds one earlier
real quarterly run (tests/data/report/SOURCES.md says how the earlier run was moved a quarter back).
Skipped without /usr/bin/chromium or poppler's pdftotext, except under CI=true.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.model import RunRecord
from harness.numfmt import fmt_delta, fmt_value
from harness.report.html import findings
from harness.report.outputs import write_reports

DATA = Path(__file__).resolve().parents[1] / "data" / "report" / "quarterly-two-quarters.json"
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

_missing = [w for w, ok in (("chromium", CHROMIUM.exists()), ("pdftotext", shutil.which("pdftotext")),
                            ("pdfinfo", shutil.which("pdfinfo"))) if not ok]
if _missing:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{', '.join(_missing)} missing (scripts/setup.sh --test installs them)", pytrace=False)
    pytest.skip(f"{', '.join(_missing)} not installed", allow_module_level=True)


def _text(pdf: Path, *pages: int) -> str:
    span = ["-f", str(pages[0]), "-l", str(pages[-1])] if pages else []
    return subprocess.run(["pdftotext", *span, str(pdf), "-"], capture_output=True, text=True,
                          check=True, timeout=60).stdout


def _pages(pdf: Path) -> int:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True, timeout=60)
    return int(re.search(r"^Pages:\s+(\d+)", info.stdout, re.M).group(1))  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunRecord, Path]]:
    from playwright.sync_api import sync_playwright

    record = RunRecord.from_dict(json.loads(DATA.read_text()))
    run_dir = tmp_path_factory.mktemp("quarterly")
    write_reports(record, run_dir)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        page: Any = browser.new_page()
        page.goto((run_dir / "report.html").as_uri(), wait_until="load")
        page.emulate_media(media="print")
        pdf = page.pdf(format="A4", print_background=True, prefer_css_page_size=True)
        (run_dir / "report.pdf").write_bytes(pdf)
        browser.close()
    yield record, run_dir / "report.pdf"


def test_the_record_is_a_quarterly_run_with_history_and_warnings(printed: tuple[RunRecord, Path]) -> None:
    record, _ = printed
    assert record.suite["name"] == "quarterly" and record.history
    assert record.history["previous"]["started"][:7] != record.started[:7]  # a quarter apart
    assert [f for f in findings(record) if f[0] == "warn"]


def test_it_prints_in_a_few_pages(printed: tuple[RunRecord, Path]) -> None:
    _, pdf = printed
    assert 2 <= _pages(pdf) <= 6


def test_page_one_is_verdict_findings_node_and_sign_off(printed: tuple[RunRecord, Path]) -> None:
    record, pdf = printed
    page1 = " ".join(_text(pdf, 1).split())
    assert record.verdict in page1 and "What failed or warned" in page1
    for _, what, _ in findings(record):  # each warned rule by name: check, metric and job
        check, metric = what.split(" · ")
        assert check in page1 and metric.split("{")[0] in page1
        job = re.search(r"job=\w+", what)
        assert job is not None and job.group(0) in page1
    assert record.host in page1 and record.run_id in page1
    for word in ("Inspection sign-off", "Inspector", "Date", "Signature", "Remarks", "agreed"):
        assert word in page1
    assert "Expectations" not in page1 and "History and trends" not in page1  # results follow


def test_results_come_before_history(printed: tuple[RunRecord, Path]) -> None:
    _, pdf = printed
    text = _text(pdf)
    history = text.index("History and trends")
    assert text.index("fio-quick") < history < text.index("Node\n", history)  # inventory last


def test_no_number_is_split_across_lines(printed: tuple[RunRecord, Path]) -> None:
    record, pdf = printed
    lines = _text(pdf).splitlines()
    shown = {fmt_value(e.measured, e.unit) for c in record.checks for e in c.evaluations
             if e.measured is not None}
    shown |= {fmt_delta(100 * (e.measured - e.reference) / e.reference) for c in record.checks
              for e in c.evaluations if e.measured is not None and e.reference}
    assert len(shown) >= 10
    for number in shown:
        assert any(number in ln for ln in lines), f"{number!r} is not on one line of the printed report"
