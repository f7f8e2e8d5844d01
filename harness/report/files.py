"""The files a run's reports are written to, and how: light (no renderer, no Jinja2 loads here), so a
run that has its reports rendered by its helper process writes them without loading the renderers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.fsutil import atomic_write_text

HTML_NAME = "report.html"
JUNIT_NAME = "junit.xml"
NAMES = (HTML_NAME, JUNIT_NAME)  # every rendered output of a run, as outputs.RENDERERS renders them


def write_rendered(run_dir: Path, texts: Mapping[str, str]) -> None:
    """Write rendered reports (file name -> text) into `run_dir`, each atomically."""
    for name, text in texts.items():
        # re-renderable from results.json (harness report): no fsync needed
        atomic_write_text(run_dir / name, text, durable=False)
