"""The observe check in report.html: findings table and charts from the saved window; hostile
device and process names (a veth named by a tenant, a comm set with prctl) stay text; a window
path that leads outside the run directory is not read."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import report_samples as samples

from harness.model import CheckResult, Status
from harness.report.observe_svg import observe_figure, panel, signals
from harness.report.outputs import write_reports
from harness.series.observed import Net, Tick, Window
from harness.series.stall import diagnose

EVIL = '<img src=x onerror="alert(1)">'


def window() -> Window:
    ticks = tuple(Tick(t=float(i + 1), dt=1.0, tcp_send=1e6, tcp_out=1000.0, tcp_retrans=0.0,
                       net={EVIL: Net(rx_bps=1e5, tx_bps=2.5e6, drops=0.0)}) for i in range(5))
    return Window("command", "2026-12-01T00:00:00Z", 5.0, 1.0, ticks, pids=(7,))


def check(run_dir: Path, w: Window, series_file: str = "raw/obs/observe-series.json") -> CheckResult:
    d = diagnose(w)
    (run_dir / "raw" / "obs").mkdir(parents=True, exist_ok=True)
    (run_dir / "raw" / "obs" / "observe-series.json").write_text(json.dumps(w.to_dict()))
    findings = [f.to_dict() for f in d.findings]
    findings[0]["processes"] = [{"pid": 7, "comm": f"<script>{EVIL}", "what": "sleeping"}]
    return CheckResult("obs", "observe", Status.PASSED, d.verdict,
                       details={"primary": d.primary, "verdict": d.verdict, "findings": findings,
                                "series": {"file": series_file}})


def test_the_network_finding_is_charted_with_its_device(tmp_path: Path) -> None:
    w = window()
    assert diagnose(w).primary == "network"
    title, unit, lines = signals(w, "network", [EVIL])
    assert (title, unit) == ("Network", "MB/s") and lines[f"{EVIL} sent"][0] == (1.0, 2.5)
    svg = panel(title, unit, lines)
    assert EVIL not in svg and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in svg
    fig = observe_figure(check(tmp_path, w), tmp_path)
    assert fig is not None and "<polyline" in fig and "<img" not in fig


def test_the_report_shows_findings_as_text(tmp_path: Path) -> None:
    c = check(tmp_path, window())
    rec = dataclasses.replace(samples.record(), checks=(c,))
    write_reports(rec, tmp_path)
    html = (tmp_path / "report.html").read_text()
    assert "What held the work back: network" in html
    assert "<script>&lt;img" not in html and "&lt;script&gt;&lt;img src=x" in html


def test_a_window_path_outside_the_run_directory_is_not_read(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    c = check(run_dir, window(), series_file="../../../etc/passwd")
    assert observe_figure(c, run_dir) is None
    no_window = {k: v for k, v in c.details.items() if k != "series"}
    assert observe_figure(dataclasses.replace(c, details=no_window), run_dir) is None
