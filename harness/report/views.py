"""The explicit registry of the report's section views: a section of a check's details (or a
metric family, such as the NCCL busbw curve) -> the view built from it and the template that lays
it out. The report picks a view by what a check holds, never by the check's kind.

A view builds what its template shows from a check (and the run directory, where the saved series
lie), or None when the check holds nothing it can show. `_check.html.j2` includes the template of
every view a check has, in the order of VIEWS, with the view as `section.view`. A view may say what
it already shows, so the generic tables leave it out: metrics, evaluations, detail keys.

Adding a picture for a new section: its type in harness/sections.py, a view module here, its
template, and one entry in VIEWS (prometheus_client's explicit Collector registry is the model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from harness.model import CheckResult, Evaluation, Metric
from harness.report import audit, charts, contention, gpu_table, observe_svg, power_svg, telemetry_svg

Build = Callable[[CheckResult, Optional[Path]], Optional[object]]


def _never(_view: object, _item: object) -> bool:
    return False


@dataclass(frozen=True)
class SectionView:
    """One registered view: what it shows, how it is built, its template, what it already covers."""

    section: str  # the details section (harness/sections.py) or metric family it shows
    template: str
    build: Build
    hides_metric: Callable[[object, Metric], bool] = _never
    hides_evaluation: Callable[[object, Evaluation], bool] = _never
    hides_details: tuple[str, ...] = ()  # detail keys the view shows, left out of the Details list


@dataclass(frozen=True)
class Shown:
    """A view a check has: its template and what it shows (the template reads `section.view`)."""

    section: str
    template: str
    view: object


def _nccl(check: CheckResult, _run_dir: Optional[Path]) -> Optional[object]:
    if not any(m.name == "nccl.busbw" for m in check.metrics):
        return None
    return charts.nccl_busbw_figure(check)


def _audit(check: CheckResult, _run_dir: Optional[Path]) -> Optional[object]:
    return audit.audit_view(check.details)


def _gpus(check: CheckResult, _run_dir: Optional[Path]) -> Optional[object]:
    return gpu_table.gpu_table(check.metrics, check.evaluations)


def _holds(view: object, m: Metric) -> bool:
    return isinstance(view, gpu_table.GpuTable) and gpu_table.holds(view, m)


# In the order the report shows them.
VIEWS: tuple[SectionView, ...] = (
    SectionView("contention", "_contention.html.j2", contention.contention_view,
                hides_details=("contention",)),
    SectionView("nccl.busbw", "_nccl_chart.html.j2", _nccl),
    SectionView("power", "_power.html.j2", power_svg.power_view),
    SectionView("audit", "_audit.html.j2", _audit,
                hides_metric=lambda _v, m: audit.shows_metric(m.name),
                hides_evaluation=lambda _v, e: audit.is_audit_evaluation(e), hides_details=("audit",)),
    SectionView("gpus", "_gpus.html.j2", _gpus, hides_metric=_holds),
    SectionView("findings", "_observe.html.j2", observe_svg.observe_view),
    SectionView("telemetry", "_telemetry.html.j2", telemetry_svg.telemetry_figure),
)


def shown(check: CheckResult, run_dir: Optional[Path]) -> tuple[tuple[SectionView, Shown], ...]:
    """Every registered view the check has, with its registry entry, in the report's order."""
    out = []
    for sv in VIEWS:
        view = sv.build(check, run_dir)
        if view is not None:
            out.append((sv, Shown(sv.section, sv.template, view)))
    return tuple(out)
