"""Runs into history and history into runs: the end-of-run hook, import, and the trend snapshot.

At the end of `harness run`, before anything final is written, `RunHistory.annotate` reads the
node's earlier runs from the store, judges the suite's and profile's drift rules (a `drift`
check) and puts a snapshot of trends and hardware/software changes into the record
(`RunRecord.history`, shown by the report); `RunHistory.keep` then records the run. A store that
cannot be opened or read costs a warning, never the run; a bug here propagates to the runner,
which records it as an error of the run.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness import results
from harness.compare.judge import status_of
from harness.config.driftrules import DriftRule
from harness.errors import ConfigError, HarnessError
from harness.history.drift import (
    VALID,
    RunPoint,
    SeriesKey,
    SourcedRule,
    collapse,
    reference,
    selects,
    why_missing,
)
from harness.history.drift import evaluate as evaluate_drift
from harness.history.identity import NodeIdentity, changes, identity_of
from harness.history.series import better_of, golive_of, suite_params
from harness.history.store import RunRow, Store, open_store, problems_text
from harness.model import CheckResult, Evaluation, RunRecord, Status

OFF = ("off", "none", "no", "false", "0")
DEFAULT_NAME = "history.sqlite"
KEY_METRICS = ("gpu_burn.tflops", "gpu.tflops", "nccl.busbw", "nccl.avg_busbw", "rdma.bw_avg", "gpu.h2d_bw",
               "gpu.d2h_bw", "gpu.p2p_bw", "fio.iops", "fio.bw", "power.headroom_pct", "nvme.percentage_used",
               "gpu.ecc_corrected", "gpu.retired_pages")
MAX_SERIES, MAX_POINTS, MAX_EVENTS, LOAD_RUNS = 16, 12, 20, 60


SYSTEM_DIR = Path("/var/lib/harness")


def default_store() -> Path:
    """The node's own store, the same whatever --output is: $HARNESS_STATE_DIR/history.sqlite when
    set, /var/lib/harness/history.sqlite for root, else $XDG_STATE_HOME (~/.local/state)/harness/."""
    if state := os.environ.get("HARNESS_STATE_DIR", "").strip():
        return Path(state) / DEFAULT_NAME
    if os.geteuid() == 0:
        return SYSTEM_DIR / DEFAULT_NAME
    xdg = os.environ.get("XDG_STATE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "harness" / DEFAULT_NAME


def store_path(output: Path | None = None, explicit: str | Path | None = None) -> Path | None:
    """The store `explicit` names (--history or $HARNESS_HISTORY, which the CLI reads), else the
    node's default store (default_store; `output` no longer matters); None when it is 'off'."""
    del output  # kept for callers: the store follows the node, not the output directory
    value = str(explicit or "").strip()
    if value.lower() in OFF:
        return None
    if value:
        return Path(value)
    return default_store()


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
            annotated = annotate(record, self.store, self.rules)
        except (HarnessError, sqlite3.Error) as e:
            _warn(f"{e}; no trends or drift in this report, and this run is not recorded")
            self.close()  # a store that cannot be read is not written to either: one warning
            return record
        if note := problems_text(self.store):
            _warn(f"{note}; trends and drift leave them out")
        return annotated

    def keep(self, record: RunRecord, run_dir: Path) -> None:
        """Record the run (as it is written) in the store, then close it."""
        if self.store is None:
            return
        try:
            row = self.store.record(record, run_dir)
            if row.run_id != record.run_id:
                _warn(f"run id {record.run_id} is another run's in {self.path}; this run is stored as "
                      f"{row.run_id}")
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
    """This run's identity, its node id (None when new) and the node's earlier runs, oldest first.

    Earlier: started before it, or in the same second (`started` has whole seconds) and recorded
    before it; a run not yet recorded is the newest of its second (the run lock keeps a node's runs
    apart, so whatever is stored finished before it)."""
    ident = identity_of(record.inventory, record.host)
    known = store.run(record.run_id)
    node = store.node(known.node_id) if known else store.resolve(ident)
    if node is None:
        return ident, None, []
    runs = store.runs(node.node_id)
    ids = [r.run_id for r in runs]
    rows = runs[:ids.index(record.run_id)] if record.run_id in ids else \
        [r for r in runs if r.started <= record.started]
    return ident, node.node_id, rows


def _params_of(row: RunRow, record: RunRecord) -> Mapping[str, str]:
    """A stored run's parameter digests; a run from before digests of this run's own suite is
    taken to have run its checks as this run does (nothing better is known)."""
    if row.params or row.suite != str(record.suite.get("name", "")):
        return row.params
    return suite_params(record.suite)


def load_points(store: Store, rows: Sequence[RunRow], record: RunRecord,
                extra: Sequence[RunRow] = ()) -> list[RunPoint]:
    """Series values of this suite's latest runs plus `extra` (the go-live run), oldest first."""
    suite = str(record.suite.get("name", ""))
    same = [r for r in rows if r.suite == suite]
    chosen = {r.run_id for r in (*extra, *same[-LOAD_RUNS:])}
    picked = [r for r in rows if r.run_id in chosen]
    metrics = store.metrics([r.run_id for r in picked])
    return [RunPoint(r.run_id, r.started, r.verdict,
                     {k: v for k, (v, _) in collapse(metrics[r.run_id], r.identity,
                                                     _params_of(r, record)).items()}, r.suite,
                     _params_of(r, record))
            for r in picked]


def current_series(record: RunRecord, ident: NodeIdentity) -> dict[SeriesKey, tuple[float, str]]:
    return collapse([(c.id, m) for c in record.checks if c.status.value in VALID for m in c.metrics], ident,
                    suite_params(record.suite))


def references(record: RunRecord, points: Sequence[RunPoint], golive_id: str | None,
               current: Mapping[SeriesKey, tuple[float, str]]) -> tuple[RunPoint | None, RunPoint | None]:
    """(go-live, previous): the go-live run's point, and the latest earlier run of this suite whose
    checks ran with this run's parameters and that measured a series of this run (the one drift
    compares with and the report names)."""
    golive = next((p for p in points if p.run_id == golive_id), None)
    suite = str(record.suite.get("name", ""))
    mine = suite_params(record.suite)

    def alike(p: RunPoint) -> bool:
        return p.suite == suite and all(p.params[c] == v for c, v in mine.items() if c in p.params) \
            and any(k in p.values for k in current)

    previous = next((p for p in reversed(points) if alike(p)), None)
    return golive, previous


def annotate(record: RunRecord, store: Store, rules: Sequence[SourcedRule]) -> RunRecord:
    """The record with a `drift` check (when rules exist) and the history snapshot."""
    ident, node_id, rows = past_runs(store, record)
    pinned = store.pinned(node_id, "go-live") if node_id is not None else None
    golive_row = golive_of(rows, pinned)
    points = load_points(store, rows, record, [golive_row] if isinstance(golive_row, RunRow) else [])
    current = current_series(record, ident)
    golive, previous = references(record, points, golive_row.run_id if golive_row else None, current)
    checks = list(record.checks)
    drift_check: CheckResult | None = None
    if rules and not record.interrupted:  # an interrupted run is judged when resumed
        drift_check = drift_result(record, rules, current, golive, previous)
        checks.append(drift_check)
    snapshot = snapshot_of(record, ident, node_id, rows, points, current, rules,
                           drift_check.evaluations if drift_check else (), store.path,
                           golive, previous, pinned is not None and golive is not None
                           and golive.run_id == pinned,
                           tuple(drift_check.details.get("notes", ())) if drift_check else ())
    return replace(record, checks=tuple(checks), history=snapshot)


def drift_result(record: RunRecord, rules: Sequence[SourcedRule],
                 current: Mapping[SeriesKey, tuple[float, str]], golive: RunPoint | None,
                 previous: RunPoint | None) -> CheckResult:
    """The drift rules judged as one check, so they count in the verdict, junit and the report."""
    ids = {c.id for c in record.checks}
    cid = "drift" if "drift" not in ids else "history-drift"
    base = CheckResult(cid, "drift", Status.SKIPPED, started=record.finished or record.started)
    out = evaluate_drift(rules, current, record.started, golive, previous)
    details = {"notes": list(out.notes)} if out.notes else {}
    if not out.evaluations:
        why = "no earlier run of this node with this suite and parameters to compare with" \
            if golive is None and previous is None else "no drift rule found a metric with an earlier value"
        return replace(base, message=why, details=details)
    bad = sum(1 for e in out.evaluations if e.outcome.value in ("fail", "warn"))
    msg = (f"{len(out.evaluations)} comparison(s) with earlier runs: "
           + (f"{bad} drifted beyond their limit" if bad else "none drifted beyond its limit"))
    return replace(base, status=status_of(out.evaluations), message=msg, evaluations=out.evaluations,
                   details=details)


def _point(p: RunPoint | None, **extra: Any) -> dict[str, Any] | None:
    if p is None:
        return None
    return {"run_id": p.run_id, "started": p.started, "verdict": p.verdict, "suite": p.suite, **extra}


def snapshot_of(record: RunRecord, ident: NodeIdentity, node_id: int | None, rows: Sequence[RunRow],
                points: Sequence[RunPoint], current: Mapping[SeriesKey, tuple[float, str]],
                rules: Sequence[SourcedRule], drift_evals: Sequence[Evaluation], path: str,
                golive: RunPoint | None, previous: RunPoint | None, pinned: bool = False,
                not_compared: Sequence[str] = ()) -> dict[str, Any]:
    """Plain JSON for results.json: node, go-live/previous runs, changes, events, trends, and the
    drift rules' series that had no earlier value to compare with, each with why."""
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
        "golive": _point(golive, how="pinned" if pinned else "first accepted run of an acceptance suite"),
        "previous": _point(previous),
        "changes": since_previous,
        "events": events[-MAX_EVENTS:],
        "drifted": [e.to_dict() for e in drift_evals if e.outcome.value in ("warn", "fail")],
        "not_compared": list(not_compared),
        "trends": trends(record, current, points, rules, golive, previous),
    }


def _wanted(key: SeriesKey, rules: Sequence[SourcedRule]) -> tuple[int, str] | None:
    if any(selects(r.rule, key) for r in rules):
        return (-1, key.text())
    if key.metric in KEY_METRICS:
        return (KEY_METRICS.index(key.metric), key.text())
    return None


def trends(record: RunRecord, current: Mapping[SeriesKey, tuple[float, str]],
           points: Sequence[RunPoint], rules: Sequence[SourcedRule], golive_run: RunPoint | None,
           previous_run: RunPoint | None) -> list[dict[str, Any]]:
    """Per key metric series: this suite's recent values, go-live and previous values, the band."""
    ranked = sorted((rank, k) for k in current if (rank := _wanted(k, rules)) is not None)
    suite = str(record.suite.get("name", ""))
    out = []
    for _, key in ranked[:MAX_SERIES]:
        value, unit = current[key]
        past = [p for p in points if key in p.values and p.suite == suite]
        golive = reference(key, "golive", golive_run, None)
        prev = reference(key, "previous", None, previous_run)
        low, high = _band(record, key)
        out.append({
            "check": key.check, "metric": key.metric, "labels": key.label_dict, "part": key.part,
            "unit": unit, "better": better_of(record.suite, key.check, key.metric),
            "points": [{"run_id": p.run_id, "started": p.started, "verdict": p.verdict,
                        "value": p.values[key]} for p in past[-(MAX_POINTS - 1):]]
            + [{"run_id": record.run_id, "started": record.started, "verdict": record.verdict,
                "value": value}],
            "golive": None if golive is None else {"run_id": golive.run_id, "value": golive.values[key]},
            "golive_missing": None if golive is not None else why_missing(key, "golive", golive_run, None),
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

def import_runs(store: Store, run_dirs: Sequence[Path], problems: list[str] | None = None) -> list[RunRow]:
    """Record existing run directories (results.json as written); returns the stored rows.

    With `problems`, a run that cannot be read (too large, not JSON, a value the schema refuses)
    adds its one line there and the others are still recorded; without, it raises."""
    records = []
    for d in run_dirs:
        try:
            records.append((d, results.load(d)))
        except ConfigError as e:
            if problems is None:
                raise
            problems.extend(str(p) for p in e.problems)
    # oldest first (nodes resolve in order); runs of one second in the order given, never by the
    # run id's random suffix (a go-live would pair with its quarterly at random)
    records.sort(key=lambda x: (x[1].started, x[1].finished))
    return [store.record(rec, d if d.is_dir() else d.parent) for d, rec in records]
