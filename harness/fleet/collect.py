"""Each node's outcome from what the scheduler said and what the node's run left behind.

`judge` is pure: scheduler state + exit file + results.json in, one NodeOutcome out. A node is
REJECTED only when a check *failed* (the hardware measured badly: drain it, RMA it); a job that
failed, timed out, never started or left no results, and a check that errored, make it ERRORED
with the scheduler's or the tool's reason, never a hardware verdict. A run that judged nothing, or
skipped a check its profile expects, is UNTESTED. The reason names the checks that warned, were
skipped, errored or only recorded: never "all checks passed" unless every check passed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from harness import results
from harness.errors import RecordError, printable
from harness.fleet import layout
from harness.fleet.columns import NodeMetrics
from harness.fleet.layout import Manifest, NodeJob, SeenJob
from harness.fleet.record import RunDoc, from_json, spells_non_finite
from harness.fleet.record import read as read_node
from harness.fsutil import read_regular
from harness.model import CheckResult, Metric, Outcome, RunRecord, Status
from harness.report.fmt import expectation_text, fmt_labels
from harness.results import RESULTS

DRAIN_PREFIX = "harness:"
# (check id, metric name, unit, labels, value): one measured value, as the fleet statistics read it
MetricRow = tuple[str, str, str, Mapping[str, Any], float]
DRAIN_REASON_MAX = 120


class NodeStatus(str, Enum):
    ACCEPTED = "ACCEPTED"
    REJECTED = "REJECTED"  # a check failed: the hardware measured badly
    ERRORED = "ERRORED"  # the job or a tool failed: not a hardware verdict
    INCOMPLETE = "INCOMPLETE"  # the run was interrupted
    UNTESTED = "UNTESTED"  # the run judged nothing, or skipped a check its profile expects
    PENDING = "PENDING"
    RUNNING = "RUNNING"


# worst first: the order of the fleet report
SEVERITY = {NodeStatus.REJECTED: 0, NodeStatus.ERRORED: 1, NodeStatus.INCOMPLETE: 2,
            NodeStatus.UNTESTED: 3, NodeStatus.PENDING: 4, NodeStatus.RUNNING: 5, NodeStatus.ACCEPTED: 6}
# how a node's reason names its other checks: at most this many per status, messages cut short
REASON_CHECKS, REASON_MESSAGE = 5, 80


@dataclass(frozen=True)
class Evidence:
    """Why a node is not accepted: which check, and measured vs expected (or the error)."""

    check: str
    what: str  # 'fio.bw{job=seqread_1m,rw=read}' or 'run'
    detail: str  # 'measured 0.05 GB/s, expected >= 0.1 GB/s (...)' or the error message
    kind: str  # 'failed' | 'errored'


@dataclass(frozen=True)
class NodeOutcome:
    """One node's verdict with the reason and the evidence behind it."""

    node: str
    status: NodeStatus
    reason: str
    job_id: str | None = None
    job_state: str = ""
    run_dir: str | None = None  # relative to the fleet directory
    sku: str = ""
    evidence: tuple[Evidence, ...] = ()
    record: RunRecord | None = field(default=None, compare=False, repr=False)

    @property
    def drain_reason(self) -> str:
        """'harness: <check> <short reason>' for a rejected node; 'harness: ERRORED <check> <error>'
        and 'harness: UNTESTED <why>' for the nodes --drain-unfit drains too (a node whose driver is
        not loaded is not fit for work either); '' for any other node. Every reason starts with
        DRAIN_PREFIX, so `fleet resume` resumes what the harness drained, and only that."""
        if self.status is NodeStatus.REJECTED:
            ev = next((e for e in self.evidence if e.kind == "failed"), None)
            short = f"{ev.check} {ev.what} {ev.detail.split(' (')[0]}" if ev else self.reason
        elif self.status is NodeStatus.ERRORED:
            ev = next((e for e in self.evidence if e.kind == "errored"), None)
            short = f"ERRORED {ev.check} {ev.detail}" if ev else f"ERRORED {self.reason}"
        elif self.status is NodeStatus.UNTESTED:
            short = f"UNTESTED {self.reason}"
        else:
            return ""
        return f"{DRAIN_PREFIX} {' '.join(short.split())}"[:DRAIN_REASON_MAX].rstrip()


def sku_of(record: RunRecord) -> str:
    """The hardware class a node belongs to: GPU count and model, else the CPU model."""
    inv = record.inventory
    gpus = inv.get("gpus") or []
    if gpus:
        return f"{len(gpus)}x {gpus[0].get('name', 'GPU')}"
    cpu = inv.get("cpu") or {}
    return f"{cpu.get('model') or 'unknown CPU'}, {cpu.get('online') or '?'} CPUs, no GPU"


def evidence_of(record: RunRecord) -> tuple[Evidence, ...]:
    """Failed expectations and errored checks of a run, in check order."""
    out: list[Evidence] = []
    for c in record.checks:
        if c.status not in (Status.FAILED, Status.ERRORED):
            continue
        kind = "failed" if c.status is Status.FAILED else "errored"
        bad = [e for e in c.evaluations if e.outcome in (Outcome.FAIL, Outcome.ERROR)]
        if kind == "errored" or not bad:
            out.append(Evidence(c.id, "run", c.message or f"check {kind}", kind))
        for e in bad if kind == "failed" else ():
            out.append(Evidence(c.id, e.metric + fmt_labels(e.labels), expectation_text(e),
                                "failed" if e.outcome is Outcome.FAIL else "errored"))
    return tuple(out)


def status_of_record(record: RunRecord) -> NodeStatus:
    """The run's own verdict; a run that never finished is INCOMPLETE."""
    if record.verdict in ("ACCEPTED", "UNTESTED") and not record.finished:
        return NodeStatus.INCOMPLETE
    return NodeStatus(record.verdict)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_MESSAGE else text[:REASON_MESSAGE - 3] + "..."


def _others(record: RunRecord, named: set[str]) -> list[str]:
    """'errored: a, b', 'warned: c', 'skipped: d (why)', ... for checks the reason has not named."""
    out = []
    for st, word in ((Status.FAILED, "failed"), (Status.ERRORED, "errored"), (Status.WARNED, "warned"),
                     (Status.SKIPPED, "skipped"), (Status.RECORDED, "recorded, not judged"),
                     (Status.NOT_RUN, "not run")):
        cs = [c for c in record.checks if c.status is st and c.id not in named]
        if not cs:
            continue
        shown = [f"{c.id} ({_short(c.message)})" if st is Status.SKIPPED and c.message else c.id
                 for c in cs[:REASON_CHECKS]]
        more = f" and {len(cs) - REASON_CHECKS} more" if len(cs) > REASON_CHECKS else ""
        out.append(f"{word}: {', '.join(shown)}{more}")
    return out


def reason_of(record: RunRecord, status: NodeStatus, ev: Sequence[Evidence]) -> str:
    """One line: the first piece of evidence (or why the run is untested or incomplete, or how
    many passed), then every other check that did not simply pass, by status."""
    named: set[str] = set()
    if ev:
        first = ev[0]
        what = "" if first.what == "run" else first.what + " "
        head = [f"{first.check} {first.kind}: {what}{first.detail}"]
        named.add(first.check)
    elif status is NodeStatus.UNTESTED:
        head = list(record.untested)
        named.update(c.id for c in record.checks if c.expected_skip)
    elif status is NodeStatus.INCOMPLETE:
        head = ["the run was interrupted"]
    elif status is NodeStatus.ACCEPTED:
        passed = record.counts[Status.PASSED.value]
        head = ["all checks passed" if passed == len(record.checks) else f"{passed} passed"]
    else:
        head = [record.verdict]
    return "; ".join(head + _others(record, named))


def _from_record(base: NodeOutcome, record: RunRecord) -> NodeOutcome:
    status = status_of_record(record)
    ev = evidence_of(record)
    return NodeOutcome(base.node, status, reason_of(record, status, ev), base.job_id, base.job_state,
                       base.run_dir, sku_of(record), ev, record)


def judge(node: str, job: NodeJob, seen: SeenJob | None, exit_file: Mapping[str, Any] | None,
          record: RunRecord | None, run_dir: str | None = None, output_tail: str = "",
          results_problem: str = "") -> NodeOutcome:
    """One node's outcome (pure). `results_problem` says why a results.json could not be read."""
    state = seen.job if seen else None
    base = NodeOutcome(node, NodeStatus.ERRORED, "", job.job_id, state.describe() if state else "",
                       run_dir, sku_of(record) if record else "")
    if job.submit_error:
        return _with(base, NodeStatus.ERRORED, job.submit_error)
    complete = record is not None and bool(record.finished) and not record.interrupted
    if state is None:
        if record is not None and complete:
            return _from_record(base, record)
        return _with(base, NodeStatus.PENDING, "submitted; not polled yet" if job.job_id
                     else "no complete run in the results volume yet")
    if not state.started:
        return _with(base, NodeStatus.PENDING, f"waiting to start: {state.describe()}")
    if not state.finished:
        return _with(base, NodeStatus.RUNNING, f"job {state.job_id} {state.describe()}", record)
    note = seen.note if seen else ""
    if record is not None and complete and not note and state.state in ("COMPLETED", "FAILED", "GONE"):
        return _from_record(base, record)
    # the job ended without a complete run: the scheduler's word is the verdict
    why = note or f"job {state.job_id} ended {state.describe()}"
    if state.state == "GONE" and exit_file is not None:
        why += f"; its exit file says harness exited {exit_file.get('rc')}"
    why += ("; the run is incomplete" if record is not None
            else f"; {results_problem}" if results_problem else "; it left no results")
    last = output_tail.strip().splitlines()[-1:] if output_tail else []
    if last:  # a node's text: escaped, so it cannot repaint a terminal or a report
        why += f"; last output: {printable(last[0][:200])}"
    out = _with(base, NodeStatus.ERRORED, why, record)
    return NodeOutcome(out.node, out.status, out.reason, out.job_id, out.job_state, out.run_dir, out.sku,
                       (Evidence("slurm-job", "job", why, "errored"),
                        *(evidence_of(record) if record else ())), record)


def _with(base: NodeOutcome, status: NodeStatus, reason: str, record: RunRecord | None = None) -> NodeOutcome:
    return NodeOutcome(base.node, status, reason, base.job_id, base.job_state, base.run_dir, base.sku,
                       base.evidence, record)


def _tail(path: Path | None, n: int = 4000) -> str:
    """The last `n` bytes of a node's job output: a regular file only, never through a symlink (a
    node's files are read on the report host, whose files they must not reveal)."""
    if path is None:
        return ""
    try:
        return read_regular(path, n, tail=True).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _document(path: Path, raw: bytes) -> dict[str, Any]:
    """results.json read and checked against the schema, as results.load checks it (RecordError,
    one line naming the file and the field, when anything in it is wrong).

    The walk for NaN and infinity (JSON has neither; Python's reader takes them) runs only when the
    bytes spell one, so a fleet of clean files pays for the schema alone.
    """
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise RecordError(path, "", "results must be a JSON object")
    problems = results.validate(data)
    if problems:
        raise RecordError(path, *problems[0], more=len(problems) - 1)
    if spells_non_finite(raw):
        results.finite(path, data)
    return data


def _unusable(path: Path, e: Exception) -> str:
    if isinstance(e, RecordError):
        return str(e)
    return f"{path}: unreadable: {type(e).__name__}: {e}"


def load_record(run_dir: Path) -> tuple[RunRecord | None, str]:
    """A node's results.json, or (None, why) when it cannot be used: unreadable, or a value in it
    that the schema refuses (someone edited it), named by file and field in one line."""
    path = run_dir / RESULTS
    try:
        raw = read_node(path)
        doc = from_json(raw)
        if doc is not None:
            return _run_of(doc, whole=True)[0], ""
        return RunRecord.from_dict(_document(path, raw)), ""
    except (OSError, RecordError, ValueError, RecursionError, KeyError, TypeError, AttributeError) as e:
        return None, _unusable(path, e)


def metric_rows(record: RunRecord) -> list[MetricRow]:
    """Every metric of a run as a row, in check and metric order."""
    return [(c.id, m.name, m.unit, m.labels, float(m.value)) for c in record.checks for m in c.metrics]


def record_metrics(record: RunRecord) -> NodeMetrics:
    """A whole run's metrics by check, as a validated document holds them."""
    return [(c.id, [{"name": m.name, "value": float(m.value), "unit": m.unit, "labels": m.labels}
                    for m in c.metrics]) for c in record.checks]


def _run_of(doc: RunDoc, whole: bool = False) -> tuple[RunRecord, NodeMetrics]:
    """The run of a validated document and its metrics by check; unless `whole`, the run comes
    without its metrics (those carry them), but a recorded check's (its junit case counts them)."""
    groups: list[tuple[str, Sequence[Mapping[str, Any]]]] = []
    checks = []
    for c in doc["checks"]:
        metrics = c.get("metrics", ())
        groups.append((c["id"], metrics))
        keep = whole or c["status"] is Status.RECORDED
        kept = tuple(Metric(m["name"], float(m["value"]), m["unit"], m.get("labels", {}))
                     for m in metrics) if keep else ()
        fields: dict[str, Any] = {**c, "metrics": kept}
        checks.append(CheckResult(**fields))
    run: dict[str, Any] = {**doc, "checks": tuple(checks)}
    return RunRecord(**run), groups


def load_run(run_dir: Path) -> tuple[RunRecord | None, NodeMetrics, str]:
    """A node's results.json read once for a fleet report: the run to judge, its metrics by check,
    and why the run cannot be used ('' when it can).

    The bytes are read once, by results' one rule (fleet.record.read), and parsed and validated
    in one compiled pass (fleet.record.from_json); only a file that pass refuses, or one that
    spells NaN or Infinity, is read again as load_record reads it, so a broken one is reported in
    the same words. The run comes without its metrics (those carry them: nothing that judges a
    node or renders its junit suite reads them), except a recorded check's, whose junit case
    counts them.
    """
    path = run_dir / RESULTS
    try:
        raw = read_node(path)
        doc = from_json(raw)
        if doc is not None:
            record, metrics = _run_of(doc)
            return record, metrics, ""
        record = RunRecord.from_dict(_document(path, raw))
    except (OSError, RecordError, ValueError, RecursionError, KeyError, TypeError, AttributeError) as e:
        return None, [], _unusable(path, e)
    return _without_metrics(record), record_metrics(record), ""


def _without_metrics(record: RunRecord) -> RunRecord:
    return replace(record, checks=tuple(c if c.status is Status.RECORDED or not c.metrics
                                        else replace(c, metrics=()) for c in record.checks))


def stream(fleet_dir: Path, manifest: Manifest,
           seen: Mapping[str, SeenJob]) -> Iterator[tuple[NodeOutcome, NodeMetrics]]:
    """Every node's outcome and metrics, in manifest order, one node at a time: each node's
    results.json is read once, when the node is asked for."""
    for node in manifest.nodes:
        yield node_outcome(fleet_dir, manifest, seen, node)


def node_outcome(fleet_dir: Path, manifest: Manifest, seen: Mapping[str, SeenJob],
                 node: str) -> tuple[NodeOutcome, NodeMetrics]:
    """One node's outcome and metrics (its results.json read once, by load_run)."""
    job = manifest.jobs[node]
    dirs = layout.run_dirs(fleet_dir, node, layout.is_volume(manifest))
    record, metrics, problem = load_run(dirs[-1]) if dirs else (None, [], "")
    rel = str(dirs[-1].relative_to(fleet_dir)) if dirs else None
    tail = _tail(layout.slurm_output(fleet_dir, node, job.job_id))
    return judge(node, job, seen.get(node), layout.read_exit_file(fleet_dir, node), record, rel, tail,
                 problem), metrics


def reload(fleet_dir: Path, outcome: NodeOutcome) -> RunRecord | None:
    """The run a streamed outcome was judged from, read again from its run directory."""
    if outcome.run_dir is None:
        return None
    return load_record(fleet_dir / outcome.run_dir)[0]


def counts(outcomes: Sequence[NodeOutcome]) -> dict[str, int]:
    c = {s.value: 0 for s in NodeStatus}
    for o in outcomes:
        c[o.status.value] += 1
    return c
