"""One row per metric value: who (node, serial), which run, when, what (check, metric, labels),
the value and unit, and how it was judged (the check's status, the value's outcome, the verdict).

Label keys become columns of their own (at most MAX_LABEL_COLUMNS; the rest are written together
in one more column); a key that would shadow a fixed column is prefixed `label_`. Label values
are text in every format (a `gpu` label is "0", not 0), so a column never mixes types. What is
not known (a label a metric lacks, no serial, no judgement) is None: null in JSON Lines and
Parquet, an empty cell in CSV.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from harness.history.identity import identity_of
from harness.model import CheckResult, Evaluation, Metric, Outcome, RunRecord

COLUMNS = ("node", "serial", "run", "time", "suite", "profile", "check", "kind", "metric", "value", "unit",
           "status", "outcome", "verdict")
# the worst outcome judging a value wins: an error over a failure over a warning ...
_WORST = {o: i for i, o in enumerate((Outcome.PASS, Outcome.XPASS, Outcome.XFAIL, Outcome.WARN,
                                       Outcome.FAIL, Outcome.ERROR))}

Row = dict[str, Any]


def label_column(key: str) -> str:
    """The column a label is written to."""
    return f"label_{key}" if key in COLUMNS or key.startswith("label_") else key


def outcome_of(metric: Metric, evaluations: Sequence[Evaluation]) -> str | None:
    """The worst outcome of the evaluations that judged this value (None when none did)."""
    judged = [e.outcome for e in evaluations if e.metric == metric.name and metric.matches(e.labels)]
    return max(judged, key=lambda o: _WORST[o]).value if judged else None


def _row(base: Mapping[str, Any], check: str, kind: str | None, time: str, status: str | None,
         metric: Metric, outcome: str | None) -> Row:
    row: Row = {**base, "time": time, "check": check, "kind": kind, "metric": metric.name,
                "value": float(metric.value), "unit": metric.unit, "status": status, "outcome": outcome}
    for k, v in metric.labels.items():
        row[label_column(k)] = str(v)
    return row


def record_rows(record: RunRecord, node: str | None = None) -> Iterator[Row]:
    """The rows of one run, in check and metric order; `node` names it as a fleet does (else its host)."""
    serial = identity_of(record.inventory, record.host).system_serial
    base = {"node": record.host if node is None else node, "serial": serial, "run": record.run_id,
            "suite": str(record.suite.get("name", "")), "profile": str(record.profile.get("name", "")),
            "verdict": record.verdict}
    for c in record.checks:
        yield from _check_rows(base, c, c.started or record.started)


def _check_rows(base: Mapping[str, Any], c: CheckResult, time: str) -> Iterator[Row]:
    for m in c.metrics:
        yield _row(base, c.id, c.kind, time, c.status.value, m, outcome_of(m, c.evaluations))


def stored_rows(node: str, serial: str | None, run: str, time: str, suite: str, profile: str,
                verdict: str, metrics: Iterable[tuple[str, Metric]]) -> Iterator[Row]:
    """The rows of a run kept in the history store, which keeps values but not checks' judgements."""
    base = {"node": node, "serial": serial, "run": run, "suite": suite, "profile": profile,
            "verdict": verdict}
    for check, m in metrics:
        yield _row(base, check, None, time, None, m, None)


MAX_LABEL_COLUMNS = 128  # label keys that get a column of their own; the rest share MORE_LABELS
MORE_LABELS = "more_labels"  # 'k=v,k2=v2' of a row's labels beyond MAX_LABEL_COLUMNS (else empty)
MORE_LABELS_MAX = 32 * 1024  # characters of that cell at most, then '... (N more)


def columns(rows: Iterable[Row]) -> list[str]:
    """The fixed columns, with the label columns (sorted) after `metric`: the MAX_LABEL_COLUMNS
    keys most rows carry (one node with 20,000 label keys must not give every row of a fleet
    20,000 empty cells), then MORE_LABELS when some keys are left over."""
    counts: dict[str, int] = {}
    for r in rows:
        for k in r:
            counts[k] = counts.get(k, 0) + 1
    for c in COLUMNS:
        counts.pop(c, None)
    keys = sorted(counts)
    if len(keys) > MAX_LABEL_COLUMNS:
        keep = set(sorted(keys, key=lambda k: (-counts[k], k))[:MAX_LABEL_COLUMNS])
        keys = [k for k in keys if k in keep and k != MORE_LABELS] + [MORE_LABELS]
    at = COLUMNS.index("metric") + 1
    return [*COLUMNS[:at], *keys, *COLUMNS[at:]]


def fit(row: Row, cols: Sequence[str], known: frozenset[str]) -> Row:
    """`row` with the labels that have no column (not in `known`, the set of `cols`) folded into
    MORE_LABELS as 'k=v,...' (at most MORE_LABELS_MAX characters, then how many more there were):
    the table stays as wide as `cols`, and every cell bounded."""
    extra = [k for k in row if k not in known]
    if not extra:
        return row
    out = {k: v for k, v in row.items() if k in known}
    parts: list[str] = []
    size = 0
    for k in sorted(extra):
        part = f"{k}={row[k]}"
        if size + len(part) > MORE_LABELS_MAX:
            parts.append(f"... ({len(extra) - len(parts)} more)")
            break
        parts.append(part)
        size += len(part) + 1
    out[MORE_LABELS] = ",".join(parts)
    return out
