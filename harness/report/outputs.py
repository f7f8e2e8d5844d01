"""Write a run's rendered outputs (report.html, junit.xml) into its run directory."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from harness.model import RunRecord
from harness.report.files import HTML_NAME, JUNIT_NAME, write_rendered
from harness.report.html import load_template, render_html
from harness.report.junit import render_junit

Renderer = Callable[[RunRecord, Path], str]


def _junit(record: RunRecord, run_dir: Path) -> str:
    return render_junit(record)


RENDERERS: Mapping[str, Renderer] = {HTML_NAME: render_html, JUNIT_NAME: _junit}  # files.NAMES, in order


def write_reports(record: RunRecord, run_dir: Path) -> None:
    """Render and write report.html and junit.xml into `run_dir` (`harness report`)."""
    write_rendered(run_dir, {name: render(record, run_dir) for name, render in RENDERERS.items()})


def prepare(output: Path) -> None:
    """Load what rendering the reports of a run directory in `output` needs (Jinja2, the compiled
    template) ahead of the render: a run does so while it would otherwise wait (its first
    contention look). A failure here is left to the render, which reports it in the record."""
    try:
        load_template(output)
    except Exception:  # the render meets it again and records it as the run's error
        return
