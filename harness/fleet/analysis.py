"""The fleet's verdict (pure): node outcomes + fleet-relative outliers -> one FleetReport.

The nodes stream through a FleetBuilder one at a time: each run is read for its samples (into
columns), the better-directions its expectations imply and its junit suite, then let go, so a
fleet of 10,000 nodes never holds 10,000 RunRecords. Series are keyed by SKU, check, metric, unit
and labels (a `repeat` label is folded so repeats average). Which side is bad comes from the
metric catalogue, else from the expectations the runs were judged by (only a lower bound: higher
is better; only an upper bound: lower is better), else both sides count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

from harness import catalog
from harness.fleet import stats
from harness.fleet.collect import (
    SEVERITY,
    MetricRow,
    NodeOutcome,
    NodeStatus,
    counts,
    metric_rows,
    record_metrics,
)
from harness.fleet.columns import Columns, NodeMetrics, SeriesBuilder
from harness.fleet.junit import SuiteXml, node_suite
from harness.fleet.stats import Outlier, SeriesKey
from harness.model import RunRecord, verdict_of

# what --drain-unfit drains (FleetReport.unfit)
UNFIT = (NodeStatus.REJECTED, NodeStatus.ERRORED, NodeStatus.UNTESTED)

FOLDED_LABELS = frozenset({"repeat"})
Reload = Callable[[NodeOutcome], "RunRecord | None"]


def _no_reload(outcome: NodeOutcome) -> RunRecord | None:
    return None


@dataclass(frozen=True)
class OutlierSettings:
    threshold: float = stats.DEFAULT_THRESHOLD
    min_nodes: int = stats.DEFAULT_MIN_NODES
    min_rel: float = stats.DEFAULT_MIN_REL


@dataclass(frozen=True)
class FleetReport:
    """Everything the fleet outputs (html, json, junit, Prometheus) are rendered from."""

    suite: str
    profile: str
    submitted: str
    generated: str
    nodes: tuple[NodeOutcome, ...]  # worst first
    outliers: tuple[Outlier, ...]  # farthest first
    series: Mapping[SeriesKey, Mapping[str, float]] = field(repr=False)
    better: Mapping[SeriesKey, str] = field(repr=False)
    settings: OutlierSettings = OutlierSettings()
    junit: tuple[SuiteXml, ...] = field(default=(), repr=False)  # by node, in `nodes` order
    # a node's run read again (its results.json) when a streamed node no longer holds it
    reload: Reload = field(default=_no_reload, repr=False, compare=False)

    @property
    def counts(self) -> dict[str, int]:
        return counts(self.nodes)

    @property
    def verdict(self) -> str:
        """The worst node's: REJECTED, ERRORED, INCOMPLETE (or any has no verdict yet), UNTESTED (or
        there are no nodes), ACCEPTED."""
        c = self.counts
        return verdict_of(c["REJECTED"], c["ERRORED"], bool(c["INCOMPLETE"] or c["PENDING"] or c["RUNNING"]),
                          untested=bool(c["UNTESTED"]) or not self.nodes)

    @property
    def to_drain(self) -> list[NodeOutcome]:
        """Nodes whose hardware measured badly: drain them, and RMA what stays bad."""
        return [n for n in self.nodes if n.status is NodeStatus.REJECTED]

    @property
    def unfit(self) -> list[NodeOutcome]:
        """What --drain-unfit drains: rejected nodes, and those that errored (a driver not loaded,
        a tool missing) or judged too little (UNTESTED): none of them is fit for work."""
        return [n for n in self.nodes if n.status in UNFIT]

    @cached_property
    def _by_node(self) -> dict[str, list[Outlier]]:
        out: dict[str, list[Outlier]] = {}
        for o in self.outliers:
            out.setdefault(o.node, []).append(o)
        return out

    def outliers_of(self, node: str) -> list[Outlier]:
        return list(self._by_node.get(node, ()))

    @property
    def outlier_nodes(self) -> list[str]:
        return list(self._by_node)

    def record_of(self, outcome: NodeOutcome) -> RunRecord | None:
        """The node's run: the one it holds, else read again."""
        return outcome.record if outcome.record is not None else self.reload(outcome)


def natural(name: str) -> tuple[object, ...]:
    """Sort key that puts n2 before n10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def samples(outcomes: Iterable[NodeOutcome]) -> Iterable[tuple[SeriesKey, str, float]]:
    """Every metric of every node's run as (series key, node, value)."""
    keys: dict[tuple[object, ...], SeriesKey] = {}  # one key object per series, not per sample
    for o in outcomes:
        if o.record is not None:
            for key, value in _keyed(o.sku, metric_rows(o.record), keys):
                yield key, o.node, value


def _keyed(sku: str, rows: Iterable[MetricRow],
           keys: dict[tuple[object, ...], SeriesKey]) -> Iterable[tuple[SeriesKey, float]]:
    for check, name, unit, labels, value in rows:
        lab = tuple((k, str(v)) for k, v in labels.items() if k not in FOLDED_LABELS)
        raw = (sku, check, name, unit, lab)
        key = keys.get(raw)
        if key is None:
            key = keys[raw] = SeriesKey(sku, check, name, unit, tuple(sorted(lab)))
        yield key, value


def note_directions(out: dict[str, str], record: RunRecord) -> None:
    """Add the better-directions one run's expectations imply (the first word on a metric stays)."""
    for c in record.checks:
        for e in c.evaluations:
            if e.metric in out:
                continue
            spec = catalog.spec(e.metric)
            if spec is not None:
                out[e.metric] = spec.better
            elif e.low is not None and e.high is None:
                out[e.metric] = "higher"
            elif e.high is not None and e.low is None:
                out[e.metric] = "lower"


def directions(records: Iterable[RunRecord]) -> dict[str, str]:
    """Better-direction by metric name: the catalogue's, else what the expectations imply."""
    out: dict[str, str] = {}
    for rec in records:
        note_directions(out, rec)
    return out


def _better(name: str, implied: Mapping[str, str]) -> str:
    spec = catalog.spec(name)
    return spec.better if spec is not None else implied.get(name, "none")


@dataclass(frozen=True)
class Part:
    """A FleetBuilder's nodes, implied directions and columns, sent from a pool worker."""

    nodes: tuple[tuple[NodeOutcome, SuiteXml | None], ...]
    implied: Mapping[str, str]
    with_record: frozenset[str]
    columns: Columns


class FleetBuilder:
    """Takes node outcomes one at a time and keeps only what the report needs of their runs."""

    def __init__(self, *, keep_records: bool = False, junit: bool = True) -> None:
        self._keep = keep_records
        self._junit = junit
        self._series = SeriesBuilder()
        self._implied: dict[str, str] = {}
        self._nodes: list[tuple[NodeOutcome, SuiteXml | None]] = []
        self.with_record: set[str] = set()  # nodes whose outcome came with a run

    def add(self, o: NodeOutcome, metrics: NodeMetrics | None = None) -> None:
        """One node; `metrics` are its run's when the run it holds lacks them (collect.load_run)."""
        rec = o.record
        if rec is not None:
            self.with_record.add(o.node)
            self._series.add_metrics(o.node, o.sku, record_metrics(rec) if metrics is None else metrics,
                                     FOLDED_LABELS)
            note_directions(self._implied, rec)
        suite = node_suite(o) if self._junit else None
        self._nodes.append((o if self._keep or rec is None else replace(o, record=None), suite))

    def part(self) -> Part:
        """What this builder holds, to merge into another (a pool worker's chunk of nodes)."""
        return Part(tuple(self._nodes), dict(self._implied), frozenset(self.with_record),
                    self._series.parts())

    def merge(self, part: Part) -> None:
        """A part built from the nodes that come next, as if they had been added here one by one."""
        self._series.merge(part.columns)
        for metric, better in part.implied.items():
            self._implied.setdefault(metric, better)  # the first word on a metric stays
        self._nodes += part.nodes
        self.with_record |= part.with_record

    def report(self, *, suite: str, profile: str, submitted: str, generated: str,
               settings: OutlierSettings = OutlierSettings(), reload: Reload = _no_reload) -> FleetReport:
        """Sort the nodes worst first and find the outliers."""
        series = self._series.table()
        better = {k: _better(k.metric, self._implied) for k in series}
        outliers = series.outliers(better.__getitem__, settings.threshold, settings.min_nodes,
                                   settings.min_rel)
        far = {o.node for o in outliers}
        nodes = sorted(self._nodes, key=lambda p: (SEVERITY[p[0].status], p[0].node not in far,
                                                   natural(p[0].node)))
        junit = tuple(x for _, x in nodes if x is not None)
        return FleetReport(suite, profile, submitted, generated, tuple(o for o, _ in nodes), tuple(outliers),
                           series, better, settings, junit, reload)


def analyse(outcomes: Iterable[NodeOutcome], *, suite: str, profile: str, submitted: str,
            generated: str, settings: OutlierSettings = OutlierSettings(), keep_records: bool = True,
            reload: Reload = _no_reload) -> FleetReport:
    """Sort the nodes worst first and find the outliers. With `keep_records` off, the outcomes may
    be a stream: each run is let go once read, and `reload` reads it again when an output needs it."""
    b = FleetBuilder(keep_records=keep_records)
    for o in outcomes:
        b.add(o)
    return b.report(suite=suite, profile=profile, submitted=submitted, generated=generated,
                    settings=settings, reload=reload)
