"""The observe check in report.html: findings table and charts from the saved window; hostile
device and process names (a veth named by a tenant, a comm set with prctl) stay text; a window
path that leads outside the run directory is not read."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import report_samples as samples
from observe_samples import EVIL, check, window

from harness.report.observe_svg import observe_figure, panel, signals
from harness.report.outputs import write_reports
from harness.series.stall import diagnose


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
