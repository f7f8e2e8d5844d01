"""The report picks a check's views by the sections it holds, from report/views.py's registry,
never by the check's kind: a section written by any kind gets its view, each view is included
through its own template, and CheckView has no slot typed Any."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import report_samples as samples
from observe_samples import check as observe_check
from observe_samples import window
from power_samples import power_check

from harness import sections
from harness.catalog import METRICS
from harness.report import html, views
from harness.report.html import render_html

TEMPLATES = Path(html.__file__).parent / "templates"


def _page(tmp_path: Path, *checks: object) -> str:
    return render_html(dataclasses.replace(samples.record(), checks=checks), tmp_path)


def test_every_view_names_a_section_or_a_metric_and_has_its_template() -> None:
    names = [sv.section for sv in views.VIEWS]
    assert len(names) == len(set(names))
    for sv in views.VIEWS:
        assert sv.section in sections.SECTIONS or sv.section in METRICS or sv.section == "gpus", sv
        assert (TEMPLATES / sv.template).is_file(), sv.template


def test_the_check_template_includes_views_and_names_no_kind() -> None:
    text = (TEMPLATES / "_check.html.j2").read_text(encoding="utf-8")
    assert "{% include section.template %}" in text
    assert "c.kind ==" not in text and "c.kind !=" not in text


def test_a_power_section_is_drawn_whatever_kind_wrote_it(tmp_path: Path) -> None:
    c = dataclasses.replace(power_check(tmp_path), kind="command")
    page = _page(tmp_path, c)
    assert "<h3>Power headroom</h3>" in page and 'class="chart power"' in page


def test_observe_findings_are_shown_whatever_kind_wrote_them(tmp_path: Path) -> None:
    c = dataclasses.replace(observe_check(tmp_path, window()), kind="command")
    page = _page(tmp_path, c)
    assert "What held the work back: network" in page and "<polyline" in page


def test_without_the_section_there_is_no_view(tmp_path: Path) -> None:
    c = power_check(tmp_path)
    bare = dataclasses.replace(c, details={k: v for k, v in c.details.items() if k != "power"})
    assert not [s for s in html._check_view(0, bare, tmp_path).sections if s.section == "power"]
    assert [s.section for s in html._check_view(0, c, tmp_path).sections] == ["power"]


def test_check_view_has_no_slot_typed_any() -> None:
    hints = typing.get_type_hints(html.CheckView)
    assert all(h is not typing.Any for h in hints.values()), hints
