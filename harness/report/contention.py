"""The `contention` section in the report: what competed with a check's measurement, and how much.

Shown only when something contended (before the check, or during it); a quiet node's readings stay
in results.json. Pure: from the section's mapping to rows the template lays out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from harness.model import CheckResult
from harness.numfmt import fmt_value

# a reading's keys, in words, with how to show the number (a share, a count per CPU, a rate)
LOADS = (("runnable_per_cpu", "runnable tasks of other processes per CPU", "count"),
         ("steal", "CPU time stolen by the hypervisor", "share"),
         ("psi_cpu_some", "tasks waiting for a CPU (PSI)", "share"),
         ("psi_io_some", "tasks waiting for I/O (PSI)", "share"),
         ("psi_memory_some", "tasks stalled on memory (PSI)", "share"),
         ("foreign_io_bps", "other processes' disk I/O", "rate"),
         ("mem_available", "memory available", "share"))
LIMIT_OF = {"psi_cpu_some": "cpu_some", "psi_io_some": "io_some", "psi_memory_some": "mem_some"}


@dataclass(frozen=True)
class Row:
    load: str
    before: str
    during: str  # the worst window's
    limit: str


@dataclass(frozen=True)
class ContentionView:
    before: tuple[str, ...]  # what contended before the check, in words
    waited_s: Optional[float]
    gated: bool
    during: str  # what contended during it ("" for nothing)
    windows: Optional[int]
    contended_windows: Optional[int]
    rows: tuple[Row, ...]
    processes: tuple[str, ...]
    gpu_processes: tuple[str, ...]


def _show(value: Any, how: str) -> str:
    if not isinstance(value, (int, float)):
        return "—"
    if how == "share":
        return f"{value:.0%}"
    if how == "rate":
        return fmt_value(value / 1e9, "GB/s", 3)
    return f"{value:g}"


def contention_view(check: CheckResult, _run_dir: object = None) -> Optional[ContentionView]:
    """The view of a check's `contention` section, or None when nothing contended."""
    sec: Mapping[str, Any] = check.details.get("contention") or {}
    during: Mapping[str, Any] = sec.get("during") or {}
    if not sec.get("contended") and not during.get("contended"):
        return None
    before: Mapping[str, Any] = sec.get("before") or {}
    worst: Mapping[str, Any] = during.get("worst") or {}
    limits: Mapping[str, Any] = sec.get("limits") or {}
    rows = tuple(Row(words, _show(before.get(key), how), _show(worst.get(key), how),
                     _show(limits.get(LIMIT_OF.get(key, key)), how))
                 for key, words, how in LOADS if key in before or key in worst)
    gpu = tuple(dict.fromkeys([*before.get("gpu_processes", ()), *during.get("gpu_processes", ())]))
    return ContentionView(tuple(sec.get("contended") or ()), sec.get("waited_s"), sec.get("gated", True),
                          str(during.get("contended") or ""), during.get("windows"),
                          during.get("contended_windows"), rows, tuple(before.get("processes") or ()), gpu)
