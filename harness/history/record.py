"""Runs into history and history into runs: the end-of-run hook, import, and the trend snapshot.

At the end of `harness run`, before anything final is written, `RunHistory.annotate` reads the
node's earlier runs from the store, judges the suite's and profile's drift rules (a `drift`
check) and puts a snapshot of trends and hardware/software changes into the record
(`RunRecord.history`, shown by the report); `RunHistory.keep` then records the run. A store that
cannot be opened or read costs a warning, never the run; a bug here propagates to the runner,
which records it as an error of the run.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness import catalog, results
from harness.compare import status_of
from harness.config.driftrules import DriftRule
from harness.errors import HarnessError
from harness.history.drift import VALID, RunPoint, SeriesKey, SourcedRule, collapse, reference, selects
from harness.history.drift import evaluate as evaluate_drift
from harness.history.identity import NodeIdentity, changes, identity_of
from harness.history.store import RunRow, Store, open_store
from harness.model import CheckResult, Evaluation, RunRecord, Status

OFF = ("off", "none", "no", "false", "0")
DEFAULT_NAME = "history.sqlite"
KEY_METRICS = ("gpu_burn.tflops", "gpu.tflops", "nccl.busbw", "nccl.avg_busbw", "rdma.bw_avg", "gpu.h2d_bw",
               "gpu.d2h_bw", "gpu.p2p_bw", "fio.iops", "fio.bw", "power.headroom_pct", "nvme.percentage_used",
               "gpu.ecc_corrected", "gpu.retired_pages")
MAX_SERIES, MAX_POINTS, MAX_EVENTS, LOAD_RUNS = 16, 12, 20, 60


def store_path(output: Path | None, explicit: str | Path | None = None) -> Path | None:
    """The store `explicit` names (--history or $HARNESS_HISTORY, which the CLI reads), else
    <output>/history.sqlite; None when it is 'off'."""
    value = str(explicit or "").strip()
    if value.lower() in OFF:
        return None
    if value:
        return Path(value)
    return (output or Path("reports")) / DEFAULT_NAME


def _warn(text: str) -> None:
    print(f"warning: history: {text}", file=sys.stderr)


class RunHistory:
    """The history store of one run: `annotate` the record before it is written, `keep` it after.

    `path` None records nothing. Store problems (cannot open, corrupt, locked) are warnings;
    anything else is a bug and propagates to the caller.
    """

    def __init__(self, path: Path | None, drift_rules: Sequence[SourcedRule] = ()) -> None:
        self.path = path
        self.rules = tuple(drift_rules)
        self.store: Store | None = None

    def annotate(self, record: RunRecord) -> RunRecord:
        """The record with drift and trends; unchanged when there is no usable store."""
        if self.path is None:
            return record
        if self.store is None:
            try:
                self.store = open_store(self.path)
            except HarnessError as e:
                _warn(f"{e}; this run is not recorded")
                self.path = None
                return record
        try:
            return annotate(record, self.store, self.rules)
        except (HarnessError, sqlite3.Error) as e:
            _warn(f"{e}; no trends or drift in this report")
            return record

    def keep(self, record: RunRecord, run_dir: Path) -> None:
        """Record the run (as it is written) in the store, then close it."""
        if self.store is None:
            return
        try:
            self.store.record(record, run_dir)
        except HarnessError as e:
            _warn(f"{e}; this run is not recorded")
        finally:
            self.close()

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None


def rules_of(suite: Any, profile: Any) -> list[SourcedRule]:
    """Suite rules, with the profile's rules replacing those of the same key."""
    mine: dict[tuple[object, ...], SourcedRule] = {}
    for owner, label in ((suite, "suite"), (profile, "profile")):
        for r in getattr(owner, "drift", None) or ():
            assert isinstance(r, DriftRule)
            mine[r.key()] = SourcedRule(r, f"{label} {owner.name}")
    return list(mine.values())


# ---------------------------------------------------------------- snapshot

def past_runs(store: Store, record: RunRecord) -> tuple[NodeIdentity, int | None, list[RunRow]]:
    """This run's identity, its node id (None when new) and the node's earlier runs, oldest first."""
    ident = identity_of(record.inventory, record.host)
    known = store.run(record.run_id)
    node = store.node(known.node_id) if known else store.resolve(ident)
    if node is None:
        return ident, None, []
    rows = [r for r in store.runs(node.node_id)
            if r.run_id != record.run_id and (r.started, r.run_id) < (record.started, record.run_id)]
    return ident, node.node_id, rows


def load_points(store: Store, rows: Sequence[RunRow]) -> list[RunPoint]:
    """Series values of the latest runs plus the first accepted ones (go-live candidates)."""
    first_ok = [r for r in rows if r.verdict == "ACCEPTED"][:3]
    chosen = {r.run_id for r in (*first_ok, *rows[-LOAD_RUNS:])}
    picked = [r for r in rows if r.run_id in chosen]
    metrics = store.metrics([r.run_id for r in picked])
    return [RunPoint(r.run_id, r.started, r.verdict,
                     {k: v for k, (v, _) in collapse(metrics[r.run_id], r.identity).items()})
            for r in picked]


def current_series(record: RunRecord, ident: NodeIdentity) -> dict[SeriesKey, tuple[float, str]]:
    return collapse([(c.id, m) for c in record.checks if c.status.value in VALID for m in c.metrics], ident)


def annotate(record: RunRecord, store: Store, rules: Sequence[SourcedRule]) -> RunRecord:
    """The record with a `drift` check (when rules exist) and the history snapshot."""
    ident, node_id, rows = past_runs(store, record)
    points = load_points(store, rows)
    current = current_series(record, ident)
    checks = list(record.checks)
    drift_check: CheckResult | None = None
    if rules and not record.interrupted:  # an interrupted run is judged when resumed
        drift_check = drift_result(record, rules, current, points)
        checks.append(drift_check)
    snapshot = snapshot_of(record, ident, node_id, rows, points, current, rules,
                           drift_check.evaluations if drift_check else (), store.path)
    return replace(record, checks=tuple(checks), history=snapshot)


def drift_result(record: RunRecord, rules: Sequence[SourcedRule],
                 current: Mapping[SeriesKey, tuple[float, str]], points: Sequence[RunPoint]) -> CheckResult:
    """The drift rules judged as one check, so they count in the verdict, junit and the report."""
    ids = {c.id for c in record.checks}
    cid = "drift" if "drift" not in ids else "history-drift"
    base = CheckResult(cid, "drift", Status.SKIPPED, started=record.finished or record.started)
    out = evaluate_drift(rules, current, record.started, points)
    details = {"notes": list(out.notes)} if out.notes else {}
    if not out.evaluations:
        why = "no earlier run of this node to compare with" if not points else \
            "no drift rule found a metric with an earlier value"
        return replace(base, message=why, details=details)
    bad = sum(1 for e in out.evaluations if e.outcome.value in ("fail", "warn"))
    msg = (f"{len(out.evaluations)} comparison(s) with earlier runs: "
           + (f"{bad} drifted beyond their limit" if bad else "none drifted beyond its limit"))
    return replace(base, status=status_of(out.evaluations), message=msg, evaluations=out.evaluations,
                   details=details)


def _point(p: RunPoint | RunRow | None) -> dict[str, str] | None:
    return None if p is None else {"run_id": p.run_id, "started": p.started, "verdict": p.verdict}


def snapshot_of(record: RunRecord, ident: NodeIdentity, node_id: int | None, rows: Sequence[RunRow],
                points: Sequence[RunPoint], current: Mapping[SeriesKey, tuple[float, str]],
                rules: Sequence[SourcedRule], drift_evals: Sequence[Evaluation], path: str) -> dict[str, Any]:
    """Plain JSON for results.json: node, go-live/previous runs, changes, events and trends."""
    golive = next((r for r in rows if r.verdict == "ACCEPTED"), None)
    previous = rows[-1] if rows else None
    events: list[dict[str, Any]] = []
    chain = [(r.run_id, r.started, r.identity) for r in rows] + [(record.run_id, record.started, ident)]
    for (_, _, a), (run_id, started, b) in pairwise(chain):
        events += [{"run_id": run_id, "started": started, **c.to_dict()} for c in changes(a, b)]
    since_previous = [e for e in events if e["run_id"] == record.run_id]
    return {
        "store": path,
        "node": {"id": node_id, "name": ident.hostname, "system_serial": ident.system_serial,
                 "gpus": len(ident.gpus), "runs_before": len(rows),
                 "first_seen": rows[0].started if rows else record.started},
        "golive": _point(golive), "previous": _point(previous),
        "changes": since_previous,
        "events": events[-MAX_EVENTS:],
        "drifted": [e.to_dict() for e in drift_evals if e.outcome.value in ("warn", "fail")],
        "trends": trends(record, current, points, rules),
    }


def _wanted(key: SeriesKey, rules: Sequence[SourcedRule]) -> tuple[int, str] | None:
    if any(selects(r.rule, key) for r in rules):
        return (-1, key.text())
    if key.metric in KEY_METRICS:
        return (KEY_METRICS.index(key.metric), key.text())
    return None


def trends(record: RunRecord, current: Mapping[SeriesKey, tuple[float, str]],
           points: Sequence[RunPoint], rules: Sequence[SourcedRule]) -> list[dict[str, Any]]:
    """Per key metric series: recent values, go-live and previous values, and the allowed band."""
    ranked = sorted((rank, k) for k in current if (rank := _wanted(k, rules)) is not None)
    out = []
    for _, key in ranked[:MAX_SERIES]:
        value, unit = current[key]
        past = [p for p in points if key in p.values]
        golive, prev = reference(key, "golive", points), reference(key, "previous", points)
        spec = catalog.spec(key.metric)
        low, high = _band(record, key)
        out.append({
            "check": key.check, "metric": key.metric, "labels": key.label_dict, "part": key.part,
            "unit": unit, "better": spec.better if spec else "none",
            "points": [{"run_id": p.run_id, "started": p.started, "verdict": p.verdict,
                        "value": p.values[key]} for p in past[-(MAX_POINTS - 1):]]
            + [{"run_id": record.run_id, "started": record.started, "verdict": record.verdict,
                "value": value}],
            "golive": None if golive is None else {"run_id": golive.run_id, "value": golive.values[key]},
            "previous": None if prev is None else {"run_id": prev.run_id, "value": prev.values[key]},
            "current": value, "low": low, "high": high,
        })
    return out


def _band(record: RunRecord, key: SeriesKey) -> tuple[float | None, float | None]:
    labels = key.label_dict
    for c in record.checks:
        if c.id != key.check:
            continue
        for e in c.evaluations:
            if e.metric == key.metric and e.reduce == "each" and all(
                    str(e.labels.get(k)) == v for k, v in labels.items()):
                return e.low, e.high
    return None, None


# ---------------------------------------------------------------- import

def import_runs(store: Store, run_dirs: Sequence[Path]) -> list[RunRow]:
    """Record existing run directories (results.json as written); returns the stored rows."""
    records = [(d, results.load(d)) for d in run_dirs]
    records.sort(key=lambda x: (x[1].started, x[1].run_id))  # oldest first: nodes resolve in order
    return [store.record(rec, d if d.is_dir() else d.parent) for d, rec in records]
