"""HTML/JS in hostnames, device names, tool output, labels and profile text renders as text.

Checked in headless Chromium with JavaScript on: after every element got click, mouseover,
focus and error events, no dialog opened, no canary was set, nothing but the file itself was
requested, and the payloads are visible as literal text. A control page with the same
payloads inserted raw proves the detectors fire. Skipped without /usr/bin/chromium except
under CI=true.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import report_samples as samples
from clihelp import harness, run_dirs, write

from harness.model import RunRecord
from harness.report.outputs import write_reports

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
if not CHROMIUM.exists():
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{CHROMIUM} is missing, and CI=true requires the real browser check", pytrace=False)
    pytest.skip(f"{CHROMIUM} not installed", allow_module_level=True)

PAYLOADS = (
    "<script>window.__pwned=1;alert('script')</script>",
    '"><img src=x onerror="window.__pwned=2;alert(\'onerror\')">',
    "<a href=\"javascript:window.__pwned=3;alert('js-url')\">click me</a>",
    "javascript:window.__pwned=4",
    "<svg/onload=window.__pwned=5>",
    "<iframe src=\"javascript:alert('iframe')\"></iframe>",
    "' onmouseover='window.__pwned=6' x='",
    "<body onload=window.__pwned=7>",
    "</title></style><script>window.__pwned=8</script>",
    '<meta http-equiv="refresh" content="0;url=javascript:window.__pwned=9">',
    '<base href="https://evil.example/"><link rel=stylesheet href="https://evil.example/x.css">',
    '<img src="https://evil.example/x.png"><style>@import url(https://evil.example/y.css)</style>',
    "<form action=https://evil.example/f><button formaction=javascript:alert(1)>go</button></form>",
    "{{ 7*7 }} ${7*7} <!-- ]]> &lt;",
)
EVIL = " ".join(PAYLOADS)
FIRE = """() => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  for (const el of document.querySelectorAll('*')) {
    for (const t of ['click', 'mouseover', 'focus', 'error', 'load']) el.dispatchEvent(new Event(t));
    if (el.tagName === 'A' || el.tagName === 'BUTTON') el.click();
  }
}"""
AUDIT = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.attributes) {
      const v = a.value.trim().toLowerCase();
      if (a.name.startsWith('on') || v.startsWith('javascript:')) bad.push(el.tagName + ' ' + a.name);
    }
  }
  const sel = 'script, iframe, object, embed, svg, img, form, button, base, ' +
              'meta[http-equiv=refresh], link[rel=stylesheet]';
  const tags = [...document.querySelectorAll(sel)].map(e => e.tagName).sort();
  return {bad, tags, pwned: window.__pwned ?? null, text: document.body.innerText};
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield b
        b.close()


def _visit(browser: Any, page_file: Path) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    seen: dict[str, list[Any]] = {"requests": [], "dialogs": [], "errors": []}
    page = browser.new_page(java_script_enabled=True)
    page.set_default_timeout(30_000)
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))

    def on_dialog(d: Any) -> None:
        seen["dialogs"].append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)
    try:
        page.goto(page_file.as_uri(), wait_until="load")
        page.evaluate(FIRE)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => r(null)))")
        audit = page.evaluate(AUDIT)
    finally:
        page.close()
    return audit, seen


def test_detectors_fire_on_a_page_without_escaping(browser: Any, tmp_path: Path) -> None:
    """The control: the same payloads inserted raw do run, so a silent report is evidence."""
    control = write(tmp_path / "control.html", f"<!DOCTYPE html><html><body><p>{EVIL}</p></body></html>")
    audit, seen = _visit(browser, control)
    assert audit["pwned"] is not None and seen["dialogs"] and audit["bad"] and audit["tags"]
    assert any("evil.example" in u for u in seen["requests"])


def _hostile_record() -> RunRecord:
    rec = samples.record(evil=" " + EVIL)
    inv = dict(rec.inventory)
    inv["block_devices"] = [{**d, "name": f"nvme{i}n1{EVIL}", "model": EVIL}
                            for i, d in enumerate(inv["block_devices"])]
    inv["nics"] = [{**n, "name": EVIL} for n in inv["nics"]]
    inv["gpus"] = [{**g, "name": EVIL, "serial": PAYLOADS[3]} for g in inv["gpus"]]
    inv[EVIL] = {PAYLOADS[0]: PAYLOADS[2]}
    return dataclasses.replace(
        rec, inventory=inv, suite={**rec.suite, "description": EVIL, "path": PAYLOADS[3]},
        profile={**rec.profile, "name": PAYLOADS[4], "path": "javascript:alert(1)", "reason": EVIL},
        argv=("harness", "run", EVIL))


@pytest.fixture(scope="module")
def baseline(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Active elements the template itself draws (icons, charts) for the harmless sample record."""
    d = tmp_path_factory.mktemp("benign")
    samples.write_raw(d)
    write_reports(samples.record(), d)
    audit, seen = _visit(browser, d / "report.html")
    assert audit["bad"] == [] and audit["pwned"] is None and seen["dialogs"] == []
    return list(audit["tags"])


def _assert_inert(audit: dict[str, Any], seen: dict[str, list[Any]], page_file: Path) -> None:
    assert seen["dialogs"] == [] and seen["errors"] == []
    assert audit["pwned"] is None, "a payload executed"
    assert audit["bad"] == [], audit["bad"]
    assert [t for t in audit["tags"] if t != "svg"] == [], audit["tags"]  # template icons only
    assert seen["requests"] == [page_file.as_uri()]
    for p in PAYLOADS:  # shown as the literal text it is
        assert p.strip() in audit["text"], p


def test_hostile_record_renders_as_text(browser: Any, tmp_path: Path, baseline: list[str]) -> None:
    samples.write_raw(tmp_path, evil=EVIL)
    write_reports(_hostile_record(), tmp_path)
    audit, seen = _visit(browser, tmp_path / "report.html")
    _assert_inert(audit, seen, tmp_path / "report.html")
    assert audit["tags"] == baseline  # the same record shape draws the same elements, no more


def test_hostile_tool_output_of_a_real_run(browser: Any, tmp_path: Path) -> None:
    """Tool output becomes labels (regex groups), messages and raw tails; profile text too."""
    printer = write(tmp_path / "evil.py", "import sys\nfor p in sys.argv[1:]:\n"
                    "    print('dev=' + p.replace(' ', '_') + ' bw=1.5')\n"
                    "    print(p, file=sys.stderr)\n")
    args = ", ".join(f"'{p.replace(chr(39), chr(39) * 2)}'" for p in PAYLOADS)
    suite = write(tmp_path / "evil.yaml", f"""\
name: evil
description: '{EVIL.replace("'", "''")}'
checks:
  - id: tool
    kind: command
    params:
      argv: [{sys.executable}, {printer}, {args}]
      metrics: [{{name: app.bw, unit: GB/s, regex: 'dev=(?P<dev>[^ ]+) bw=(?P<value>[0-9.]+)'}}]
    expect:
      - {{metric: app.bw, min: 2, unit: GB/s, xfail: '{EVIL.replace("'", "''")}'}}
""")
    profile = write(tmp_path / "p.yaml", "name: evilprof\ndescription: '" + EVIL.replace("'", "''") + "'\n")
    out = tmp_path / "r"
    r = harness("run", str(suite), "--profile", str(profile), "--output", str(out))
    assert r.returncode in (0, 1), r.stderr
    (run_dir,) = run_dirs(out)
    audit, seen = _visit(browser, run_dir / "report.html")
    _assert_inert(audit, seen, run_dir / "report.html")
