"""Prometheus exposition of runs and fleets (prometheus-client), for the node_exporter textfile
collector or a Pushgateway.

Families (every series carries `node`):
    harness_run_verdict{suite,verdict}          1 for the run's verdict, 0 for the others
    harness_run_timestamp_seconds{suite}        when the run finished (Unix time)
    harness_run_duration_seconds{suite}
    harness_check_status{check,kind,status}     1 for the check's status, 0 for the others
    harness_check_duration_seconds{check}
    harness_metric{check,name,unit,...}         every measured value with its own labels (only
                                                those it has), renamed metric_<label> on a clash
    harness_fleet_node_status{status}           (fleet) 1 for the node's fleet status
    harness_fleet_outlier_zscore{check,name,unit,...}  (fleet) robust z of each outlier
Label values come from the suite and the hardware (check ids, GPU indexes, job names), so the
label sets stay small and bounded; run ids and timestamps are values, never labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from harness.fsutil import atomic_write_text
from harness.model import VERDICTS, RunRecord, Status

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric as PromMetric

TEXTFILE_NAME = "harness.prom"
RESERVED = frozenset({"node", "check", "kind", "name", "unit", "status", "suite", "verdict", "job",
                      "instance", "le", "quantile"})
_BAD = re.compile(r"[^a-zA-Z0-9_]")


def label_name(key: str) -> str:
    """A metric's label key as a valid Prometheus label name that clashes with none of ours."""
    name = _BAD.sub("_", key) or "label"
    if name[0].isdigit() or name.startswith("__"):
        name = "l_" + name.lstrip("_")
    return f"metric_{name}" if name in RESERVED else name


@dataclass(frozen=True)
class Sample:
    family: str
    labels: tuple[tuple[str, str], ...]
    value: float


HELP = {
    "harness_run_verdict": "1 for the run's verdict (ACCEPTED, REJECTED, ERRORED, INCOMPLETE, "
                           "UNTESTED), 0 for the others",
    "harness_run_timestamp_seconds": "when the harness run finished, Unix time",
    "harness_run_duration_seconds": "wall time of the harness run",
    "harness_check_status": "1 for the check's status, 0 for the others",
    "harness_check_duration_seconds": "wall time of the check",
    "harness_metric": "a value measured by a check; unit in the unit label",
    "harness_fleet_node_status": "1 for the node's fleet status, 0 for the others",
    "harness_fleet_outlier_zscore": "robust z-score of a node far from its fleet on the bad side",
}


def _epoch(iso: str) -> float | None:
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _metric_labels(labels: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((label_name(k), str(v)) for k, v in labels.items()))


def run_samples(record: RunRecord, node: str) -> list[Sample]:
    """The samples of one run."""
    suite = str(record.suite.get("name", ""))
    out = [Sample("harness_run_verdict", (("node", node), ("suite", suite), ("verdict", v)),
                  1.0 if record.verdict == v else 0.0) for v in VERDICTS]
    finished = _epoch(record.finished)
    if finished is not None:
        out.append(Sample("harness_run_timestamp_seconds", (("node", node), ("suite", suite)), finished))
    out.append(Sample("harness_run_duration_seconds", (("node", node), ("suite", suite)), record.duration_s))
    for c in record.checks:
        out += [Sample("harness_check_status", (("node", node), ("check", c.id), ("kind", c.kind),
                                                ("status", s.value)), 1.0 if c.status is s else 0.0)
                for s in Status]
        out.append(Sample("harness_check_duration_seconds", (("node", node), ("check", c.id)), c.duration_s))
        for m in c.metrics:
            base = (("node", node), ("check", c.id), ("name", m.name), ("unit", m.unit))
            out.append(Sample("harness_metric", base + _metric_labels(m.labels), float(m.value)))
    return out


class _Collector:
    """Turns samples into gauge families; each sample keeps only the labels it has."""

    def __init__(self, samples: Sequence[Sample]) -> None:
        self.samples = samples

    def collect(self) -> Iterator[PromMetric]:
        # start-up: prometheus_client loads only to export
        from prometheus_client.core import GaugeMetricFamily

        by_family: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        for s in self.samples:
            # two identical series would make the exposition invalid: the last one wins
            by_family.setdefault(s.family, {})[s.labels] = s.value
        for family, series in by_family.items():
            g = GaugeMetricFamily(family, HELP.get(family, family))
            for labels, value in series.items():
                g.add_sample(family, dict(labels), value)
            yield g


def registry(samples: Iterable[Sample]) -> CollectorRegistry:
    from prometheus_client import CollectorRegistry  # start-up: prometheus_client loads only to export

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Collector(list(samples)))  # type: ignore[arg-type]
    return reg


def exposition(samples: Iterable[Sample]) -> str:
    """The samples in the Prometheus text format."""
    from prometheus_client import generate_latest  # start-up: prometheus_client loads only to export

    return generate_latest(registry(samples)).decode("utf-8")


def write_textfile(target: Path, samples: Iterable[Sample]) -> Path:
    """Write atomically to `target` (a directory gets harness.prom), as the textfile collector wants."""
    path = target / TEXTFILE_NAME if target.is_dir() else target
    atomic_write_text(path, exposition(samples))
    return path
