"""The config audit's table for the report, built from the check's details (results.json).

One row per fact and rule outcome, in catalogue order: fact, device, found, expected, outcome
and where the value was read. A fact no rule judges is shown as 'recorded'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.facts import CONFIG_SOURCE, FACTS, display
from harness.model import Evaluation

_ORDER = ("fail", "error", "warn", "pass", "skip", "recorded")


@dataclass(frozen=True)
class AuditRow:
    fact: str
    device: str
    found: str
    expected: str
    outcome: str  # pass | warn | fail | error | skip | recorded
    note: str
    source: str


@dataclass(frozen=True)
class AuditView:
    rows: tuple[AuditRow, ...]
    counts: tuple[tuple[str, int], ...]  # (outcome, how many), worst first
    attention: tuple[AuditRow, ...]  # fail, error and warn rows


def is_audit_evaluation(ev: Evaluation) -> bool:
    """Whether an evaluation comes from a config rule (the audit table shows it)."""
    return ev.source.endswith(CONFIG_SOURCE)


def shows_metric(name: str) -> bool:
    """Whether the audit table already shows a metric of this name (a numeric fact)."""
    return name in FACTS


def _device(labels: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in labels.items())


def _outcome_row(o: Mapping[str, Any], source: str) -> AuditRow:
    note = o.get("message", "")
    if o.get("note"):
        note += f" — {o['note']}"
    rule_from = o.get("rule_source", "")
    return AuditRow(o.get("fact", ""), _device(o.get("labels", {})) or "—", o.get("found", ""),
                    o.get("expected", ""), o.get("outcome", ""), note,
                    source + (f"; rule from {rule_from}" if rule_from else ""))


def audit_view(details: Mapping[str, Any]) -> AuditView | None:
    """The table of a config_audit check's details, or None when there is no audit in them."""
    audit = details.get("audit")
    if not isinstance(audit, Mapping) or not isinstance(audit.get("facts"), list):
        return None
    facts = [f for f in audit["facts"] if isinstance(f, Mapping)]
    outcomes = [o for o in audit.get("outcomes", []) if isinstance(o, Mapping)]
    used: set[int] = set()
    rows: list[AuditRow] = []
    names = list(dict.fromkeys(str(f.get("name")) for f in facts))
    names.sort(key=lambda n: list(FACTS).index(n) if n in FACTS else len(FACTS))
    for name in names:
        for f in (f for f in facts if f.get("name") == name):
            labels = f.get("labels", {})
            source = str(f.get("source", ""))
            mine = [i for i, o in enumerate(outcomes)
                    if i not in used and o.get("fact") == name and o.get("labels", {}) == labels]
            used.update(mine)
            rows += [_outcome_row(outcomes[i], source) for i in mine]
            if not mine:
                value = f.get("value")
                found = display(name, value) if value is not None else "unknown"
                rows.append(AuditRow(name, _device(labels) or "—", found, "—", "recorded",
                                     str(f.get("reason") or ""), source))
        rest = [i for i, o in enumerate(outcomes) if i not in used and o.get("fact") == name]
        used.update(rest)
        rows += [_outcome_row(outcomes[i], "all devices") for i in rest]
    rows += [_outcome_row(o, "") for i, o in enumerate(outcomes) if i not in used]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    ordered = tuple((k, counts[k]) for k in _ORDER if k in counts)
    attention = tuple(r for r in rows if r.outcome in ("fail", "error", "warn"))
    return AuditView(tuple(rows), ordered, attention)
