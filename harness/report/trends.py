"""The report's History section as view data: node, changes, drift, trend charts, events.

Built from `RunRecord.history` (the snapshot harness.history.record wrote into results.json), so
`harness report` re-renders it without the history store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from harness.model import RunRecord
from harness.report.fmt import fmt_delta, fmt_labels, fmt_time, fmt_value
from harness.report.svg import ChartPoint, trend_chart

KIND_WORDS = {"gpu_swap": "GPU swapped", "gpu_added": "GPU added", "gpu_removed": "GPU missing",
              "nvme_swap": "NVMe changed", "renamed": "Renamed", "serial": "System serial",
              "software": "Software"}


@dataclass(frozen=True)
class TrendView:
    """One chart card: title, chart, and the go-live / previous / now values."""

    title: str
    unit: str
    check: str
    part: str
    svg: Markup
    golive: str
    previous: str
    current: str
    vs_golive: str
    vs_previous: str
    worse: bool
    golive_why: str = ""  # why there is no go-live value (no go-live run, other parameters, ...)


def _pct(now: float, then: float | None) -> float | None:
    if then is None or then == 0 or not math.isfinite(then):
        return None
    return 100.0 * (now - then) / abs(then)


def _worse(pct: float | None, better: str) -> bool:
    if pct is None:
        return False
    return (better == "higher" and pct < -5) or (better == "lower" and pct > 5)


def _trend(t: Mapping[str, Any]) -> TrendView:
    unit = str(t.get("unit", ""))
    days = [str(p.get("started", ""))[:10] for p in t.get("points", [])]
    width = 16 if len(set(days)) < len(days) else 10  # runs that share a day: axis shows the time too
    pts = [ChartPoint(float(p["value"]), str(p.get("started", ""))[:width].replace("T", " "),
                      f"{p.get('run_id', '')} · {str(p.get('started', ''))[:10]} · "
                      f"{fmt_value(float(p['value']), unit)} · {p.get('verdict', '')}",
                      bad=p.get("verdict") == "REJECTED")
           for p in t.get("points", []) if isinstance(p.get("value"), (int, float))]
    golive = (t.get("golive") or {}).get("value")
    prev = (t.get("previous") or {}).get("value")
    current = float(t.get("current", math.nan))
    title = f"{t.get('metric', '')}{fmt_labels(t.get('labels') or {})}"
    svg = trend_chart(pts, unit=unit, title=title, golive=golive, low=t.get("low"), high=t.get("high"))
    vs_g, vs_p = _pct(current, golive), _pct(current, prev)
    better = str(t.get("better", "none"))
    return TrendView(title, unit, str(t.get("check", "")), str(t.get("part") or ""), svg,
                     fmt_value(golive, unit), fmt_value(prev, unit), fmt_value(current, unit),
                     fmt_delta(vs_g), fmt_delta(vs_p), _worse(vs_g, better) or _worse(vs_p, better),
                     str(t.get("golive_missing") or "") if golive is None else "")


NO_GOLIVE = "none yet (no accepted run of an acceptance suite; pin one: harness history pin RUN --as go-live)"


def _run_text(p: Mapping[str, Any] | None, none: str = "—") -> str:
    if not p:
        return none
    what = ", ".join(x for x in (fmt_time(str(p.get("started", ""))), str(p.get("suite") or ""),
                                 str(p.get("verdict", "")), str(p.get("how") or "")) if x)
    return f"{p.get('run_id', '')} ({what})"


def history_view(record: RunRecord) -> dict[str, Any] | None:
    """Everything the History section shows, or None when the run has no history snapshot."""
    h = record.history
    if not h:
        return None
    node = h.get("node") or {}
    pairs = [("Node", f"{node.get('name') or record.host}"
              + (f" · system serial {node['system_serial']}" if node.get("system_serial") else "")),
             ("Earlier runs", str(node.get("runs_before", 0))
              + (f" since {fmt_time(str(node['first_seen']))}" if node.get("runs_before") else "")),
             ("Go-live run", _run_text(h.get("golive"), NO_GOLIVE)),
             ("Previous run", _run_text(h.get("previous"), "none of this suite with the same parameters")),
             ("History store", str(h.get("store", "—")))]
    changes = [(KIND_WORDS.get(str(c.get("kind")), str(c.get("kind"))), str(c.get("detail", "")))
               for c in h.get("changes", [])]
    events = [(fmt_time(str(e.get("started", ""))), str(e.get("run_id", "")),
               KIND_WORDS.get(str(e.get("kind")), str(e.get("kind"))), str(e.get("detail", "")))
              for e in reversed(h.get("events", []))]
    drifted = [(f"{d.get('metric', '')}{fmt_labels(d.get('labels') or {})}", str(d.get("outcome", "")),
                str(d.get("message", ""))) for d in h.get("drifted", [])]
    return {"pairs": pairs, "changes": changes, "events": events, "drifted": drifted,
            "trends": [_trend(t) for t in h.get("trends", [])],
            "not_compared": [str(n) for n in h.get("not_compared", [])],
            "first": not node.get("runs_before")}
