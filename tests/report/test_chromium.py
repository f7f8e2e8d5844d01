"""The written report in a real headless Chromium: loads nothing else, no errors, renders, prints.

Skipped when /usr/bin/chromium is absent, except under CI=true where that is a failure.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import report_samples as samples

from harness.report.outputs import write_reports

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

if not CHROMIUM.exists():
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{CHROMIUM} is missing, and CI=true requires the real browser check",
                    pytrace=False)
    pytest.skip(f"{CHROMIUM} not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield b
        b.close()


def open_report(browser: Any, run_dir: Path, **kw: Any) -> tuple[Any, dict[str, list[Any]]]:
    seen: dict[str, list[Any]] = {"requests": [], "console": [], "errors": [], "dialogs": []}
    page = browser.new_page(java_script_enabled=True, **kw)
    page.set_default_timeout(30_000)
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("console", lambda m: seen["console"].append((m.type, m.text)))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))

    def on_dialog(d: Any) -> None:
        seen["dialogs"].append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)
    page.goto((run_dir / "report.html").as_uri(), wait_until="load")
    return page, seen


def test_report_in_chromium(browser: Any, tmp_path: Path) -> None:
    from PIL import Image

    samples.write_raw(tmp_path, big=3000)
    write_reports(samples.record(), tmp_path)
    page, seen = open_report(browser, tmp_path, viewport={"width": 1300, "height": 900})
    try:
        assert seen["requests"] == [(tmp_path / "report.html").as_uri()]
        assert [c for c in seen["console"] if c[0] == "error"] == []
        assert seen["errors"] == []
        verdict = page.locator(".verdict .word")
        assert verdict.is_visible() and verdict.inner_text() == "REJECTED"
        assert page.locator("section.check").count() == 8  # one per check of report_samples.record()
        assert page.locator("details").count() > 0

        shot = page.screenshot(full_page=False)
        (tmp_path / "report.png").write_bytes(shot)
        img = Image.open(io.BytesIO(shot)).convert("RGB")
        assert img.size == (1300, 900)
        colours = {rgb for _, rgb in img.getcolors(maxcolors=1 << 20) or []}
        assert len(colours) > 200  # text, banner, badges: not blank
        assert (0xFF, 0xEB, 0xE9) in colours  # the red banner's background is painted

        box = verdict.bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 20

        page.emulate_media(media="print")  # folded detail blocks open up on paper
        folded = page.locator("details.expand dl")
        assert folded.count() and not folded.first.is_visible()  # folded details stay off paper
        assert page.locator("section.signoff.print-only").is_visible()  # page 1 carries the sign-off
        pdf = page.pdf(format="A4", print_background=True)
        (tmp_path / "report.pdf").write_bytes(pdf)
        assert pdf.startswith(b"%PDF") and len(pdf) > 10_000
    finally:
        page.close()
    assert seen["requests"] == [(tmp_path / "report.html").as_uri()]  # printing fetched nothing


def test_hostile_report_runs_nothing_in_chromium(browser: Any, tmp_path: Path) -> None:
    samples.write_raw(tmp_path, evil=samples.EVIL)
    write_reports(samples.record(evil=samples.EVIL + ' <img src="https://evil.example/x.png">'), tmp_path)
    page, seen = open_report(browser, tmp_path)
    try:
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        assert page.locator("script, img, iframe, object, embed").count() == 0
        assert page.evaluate("document.scripts.length") == 0
        assert "<script>alert(1)</script>" in page.locator("h1").inner_text()
        assert seen["dialogs"] == [] and seen["errors"] == []
        assert [c for c in seen["console"] if c[0] == "error"] == []
        assert seen["requests"] == [(tmp_path / "report.html").as_uri()]
    finally:
        page.close()
