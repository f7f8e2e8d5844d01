"""fleet.html carries the same Content-Security-Policy as report.html: no script, no remote load."""

from __future__ import annotations

import re
from pathlib import Path

from fleet_samples import outcome, record
from report_samples import EVIL

from harness.fleet.analysis import analyse
from harness.fleet.report import write

POLICY = re.compile(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">')


def test_fleet_html_has_the_report_s_policy(tmp_path: Path):
    rep = analyse([outcome(f"n{i}", record(f"n{i}", 100.0)) for i in range(3)],
                  suite=f"acceptance{EVIL}", profile="lenient", submitted="2026-11-29T10:00:00Z",
                  generated="2026-11-29T10:05:00Z")
    html = write(tmp_path, rep)["html"].read_text()
    report = (Path(__file__).parents[2] / "harness/report/templates/report.html.j2").read_text()
    (fleet_policy,) = POLICY.findall(html)
    (report_policy,) = POLICY.findall(report)
    assert fleet_policy == report_policy
    assert "default-src 'none'" in fleet_policy and "script-src" not in fleet_policy
    assert html.index("Content-Security-Policy") < html.index("<title>")  # before any content
