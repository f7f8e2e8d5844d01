"""Write a run's rendered outputs (report.html, junit.xml) into its run directory."""

from __future__ import annotations

from pathlib import Path

from harness.fsutil import atomic_write_text
from harness.model import RunRecord
from harness.report.html import render_html
from harness.report.junit import render_junit

HTML_NAME = "report.html"
JUNIT_NAME = "junit.xml"


def write_reports(record: RunRecord, run_dir: Path) -> None:
    """Write report.html and junit.xml into `run_dir`, each atomically."""
    html, junit = render_html(record, run_dir), render_junit(record)
    # Both are re-renderable from results.json (harness report): no fsync needed.
    atomic_write_text(run_dir / HTML_NAME, html, durable=False)
    atomic_write_text(run_dir / JUNIT_NAME, junit, durable=False)
