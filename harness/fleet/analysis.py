"""The fleet's verdict (pure): node outcomes + fleet-relative outliers -> one FleetReport.

Series are keyed by SKU, check, metric, unit and labels (a `repeat` label is folded so repeats
average). Which side is bad comes from the metric catalogue, else from the expectations the
runs were judged by (only a lower bound: higher is better; only an upper bound: lower is better),
else both sides count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from harness import catalog
from harness.fleet import stats
from harness.fleet.collect import SEVERITY, NodeOutcome, NodeStatus, counts
from harness.fleet.stats import Outlier, SeriesKey
from harness.model import RunRecord, verdict_of

FOLDED_LABELS = frozenset({"repeat"})


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

    def outliers_of(self, node: str) -> list[Outlier]:
        return [o for o in self.outliers if o.node == node]

    @property
    def outlier_nodes(self) -> list[str]:
        seen: dict[str, None] = {}
        for o in self.outliers:
            seen.setdefault(o.node, None)
        return list(seen)


def natural(name: str) -> tuple[object, ...]:
    """Sort key that puts n2 before n10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def samples(outcomes: Iterable[NodeOutcome]) -> Iterable[tuple[SeriesKey, str, float]]:
    """Every metric of every node's run as (series key, node, value)."""
    keys: dict[tuple[object, ...], SeriesKey] = {}  # one key object per series, not per sample
    for o in outcomes:
        rec = o.record
        if rec is None:
            continue
        for c in rec.checks:
            for m in c.metrics:
                labels = tuple((k, str(v)) for k, v in m.labels.items() if k not in FOLDED_LABELS)
                raw = (o.sku, c.id, m.name, m.unit, labels)
                key = keys.get(raw)
                if key is None:
                    key = keys[raw] = SeriesKey(o.sku, c.id, m.name, m.unit, tuple(sorted(labels)))
                yield key, o.node, float(m.value)


def directions(records: Iterable[RunRecord]) -> dict[str, str]:
    """Better-direction by metric name: the catalogue's, else what the expectations imply."""
    out: dict[str, str] = {}
    for rec in records:
        for c in rec.checks:
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
    return out


def _better(name: str, implied: Mapping[str, str]) -> str:
    spec = catalog.spec(name)
    return spec.better if spec is not None else implied.get(name, "none")


def analyse(outcomes: Sequence[NodeOutcome], *, suite: str, profile: str, submitted: str,
            generated: str, settings: OutlierSettings = OutlierSettings()) -> FleetReport:
    """Sort the nodes worst first and find the outliers."""
    series = stats.group(samples(outcomes))
    implied = directions(o.record for o in outcomes if o.record is not None)
    better = {k: _better(k.metric, implied) for k in series}
    outliers = stats.find_outliers(series, better.__getitem__, settings.threshold, settings.min_nodes,
                                   settings.min_rel)
    far = {o.node for o in outliers}
    nodes = sorted(outcomes, key=lambda o: (SEVERITY[o.status], o.node not in far, natural(o.node)))
    return FleetReport(suite, profile, submitted, generated, tuple(nodes), tuple(outliers), series,
                       better, settings)
