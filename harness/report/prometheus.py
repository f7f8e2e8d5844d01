"""Prometheus exposition of runs and fleets (prometheus-client), for the node_exporter textfile
collector or a Pushgateway, named the Prometheus way.

One family per measured metric, its base unit in the name and its values in that unit
(harness.units.PROM_BASE, the one conversion table): `fio.bw` in GB/s becomes
`harness_fio_bandwidth_bytes_per_second` in B/s, `gpu.temp_max` `harness_gpu_temperature_max_celsius`,
a percentage a `_ratio` (0-1); the catalogue's cumulative counts (catalog.COUNTERS) are counters
(`_total`). No `unit` label. Every series carries `node`; a GPU's series carry `gpu` and `UUID`,
the labels dcgm-exporter uses, so they join its series. Message-size sweeps (a `size` label) are
exported as their value at the largest size; the whole curve stays in results.json.

Besides the metrics:
    harness_run_info{suite,profile,version,run} 1: the run's suite, profile (the SKU), harness version
                                                and run id, to split a mixed fleet by SKU and to find the
                                                run's report (one series per run: a run id is its label)
    harness_run_verdict{suite,verdict}          1 for the run's verdict, 0 for the others
    harness_run_timestamp_seconds{suite}        when the run finished (Unix time)
    harness_run_duration_seconds{suite}
    harness_check_status{check,kind,status}     1 for the check's status, 0 for the others
    harness_check_duration_seconds{check}
    harness_drift_change_ratio{check,metric,vs,...}  change since the drift rule's reference
    harness_drift_beyond_limit{check,metric,vs,...}  1 when that change is beyond the rule's limit
    harness_fleet_node_status{status}           (fleet) 1 for the node's fleet status
    harness_fleet_outlier_zscore{check,metric,...}  (fleet) robust z of each outlier
where `metric` names the family of the series concerned. Label values come from the suite and the
hardware (check ids, GPU indexes, job names), so label sets stay small and bounded; timestamps
are values, never labels, and a run id labels harness_run_info alone. No family ends in `_count`,
`_sum` or `_bucket` (reserved for histograms and summaries; promtool refuses them): a count of
devices is `_devices` (`harness_gpu_devices`); a drive's power-on hours are exported as seconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import catalog
from harness.fsutil import atomic_write_text
from harness.model import DRIFT_SOURCE, VERDICTS, CheckResult, Metric, Outcome, RunRecord, Status
from harness.units import PROM_BASE

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric as PromMetric

TEXTFILE_NAME = "harness.prom"
PREFIX = "harness_"
UUID = "UUID"  # dcgm-exporter's label for the GPU's UUID (its `gpu` label is the index)
SWEEP = "size"  # the label of a message-size sweep
RESERVED = frozenset({"node", "check", "kind", "metric", "status", "suite", "verdict", "job",
                      "instance", "le", "quantile", UUID})
_BAD = re.compile(r"[^a-zA-Z0-9_]")
# abbreviations of the catalogue spelled out, and unit words the base-unit suffix replaces
_WORDS = {"bw": "bandwidth", "busbw": "bus_bandwidth", "algbw": "algorithm_bandwidth", "temp": "temperature",
          "lat": "latency", "clat": "completion_latency", "util": "utilization"}
_DROP = frozenset({"pct", "tflops"})
# names the rules above would spell badly
_NAMES = {"data_path.samples_per_s": "data_path", "nvme.percentage_used": "nvme_endurance_used",
          "nvme.data_units_read": "nvme_data_read", "nvme.data_units_written": "nvme_data_written",
          # `_count` is reserved for histograms and summaries
          "gpu.count": "gpu_devices", "host.nvme_count": "host_nvme_devices", "nvme.count": "nvme_devices",
          "ib.hca_count": "ib_hca_devices", "gpu.nvswitch_count": "gpu_nvswitch_devices",
          # counted in hours by the drive; exported in the base unit (_SCALE)
          "nvme.power_on_hours": "nvme_power_on_seconds", "disk.power_on_hours": "disk_power_on_seconds"}
_SCALE = {"nvme.power_on_hours": 3600.0, "disk.power_on_hours": 3600.0}  # value factor beside PROM_BASE's
RESERVED_SUFFIXES = ("_count", "_sum", "_bucket")


def label_name(key: str) -> str:
    """A metric's label key as a valid Prometheus label name that clashes with none of ours."""
    name = _BAD.sub("_", key) or "label"
    if name[0].isdigit() or name.startswith("__"):
        name = "l_" + name.lstrip("_")
    return f"metric_{name}" if name in RESERVED else name


def family(name: str, unit: str) -> str:
    """The family of a metric in `unit` (base unit in the name, `_total` left to counters)."""
    stem = _NAMES.get(name)
    if stem is None:
        words = [w for w in _BAD.sub("_", name.lower()).split("_") if w and w not in _DROP]
        stem = "_".join(_WORDS.get(w, w) for w in words) or "metric"
    suffix = PROM_BASE.get(unit, (_BAD.sub("_", unit.lower()).strip("_"), 1.0))[0]
    if suffix and not stem.endswith("_" + suffix):
        stem += "_" + suffix
    if stem.endswith(RESERVED_SUFFIXES):  # a name _NAMES does not spell yet
        stem += "_value"
    return PREFIX + stem


def is_counter(name: str) -> bool:
    return name in catalog.COUNTERS


@dataclass(frozen=True)
class Sample:
    family: str
    labels: tuple[tuple[str, str], ...]
    value: float
    counter: bool = False  # a counter family: exposed as <family>_total


HELP = {
    "harness_run_info": "1; labels name the run's suite, profile, harness version and run id",
    "harness_run_verdict": "1 for the run's verdict (ACCEPTED, REJECTED, ERRORED, INCOMPLETE, "
                           "UNTESTED), 0 for the others",
    "harness_run_timestamp_seconds": "when the harness run finished, Unix time",
    "harness_run_duration_seconds": "wall time of the harness run",
    "harness_check_status": "1 for the check's status, 0 for the others",
    "harness_check_duration_seconds": "wall time of the check",
    "harness_drift_change_ratio": "relative change of a metric since its drift rule's reference run",
    "harness_drift_beyond_limit": "1 when a metric drifted beyond its drift rule's limit, else 0",
    "harness_fleet_node_status": "1 for the node's fleet status, 0 for the others",
    "harness_fleet_outlier_zscore": "robust z-score of a node far from its fleet on the bad side; "
                                    "label metric names the family",
}


@cache
def _catalogue_help() -> dict[str, str]:
    out = {}
    for name, spec in catalog.METRICS.items():
        unit = PROM_BASE.get(spec.unit, ("", 1.0))[0].replace("_", " ")
        out[family(name, spec.unit)] = f"{spec.description} (harness {name}{', in ' + unit if unit else ''})"
    return out


def help_of(fam: str) -> str:
    """The HELP text of a family: ours, the catalogue's description, else its name."""
    return HELP.get(fam) or _catalogue_help().get(fam, fam)


def _epoch(iso: str) -> float | None:
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def gpu_uuids(inventory: Mapping[str, Any]) -> dict[str, str]:
    """GPU index (as text) -> UUID, from the run's inventory."""
    out = {}
    for g in inventory.get("gpus") or ():
        if isinstance(g, Mapping) and g.get("uuid") is not None and g.get("index") is not None:
            out[str(g["index"])] = str(g["uuid"])
    return out


def label_pairs(labels: Mapping[str, object], uuids: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    out = {label_name(k): str(v) for k, v in labels.items()}
    if "gpu" in out and out["gpu"] in uuids:
        out[UUID] = uuids[out["gpu"]]
    return tuple(sorted(out.items()))


def summarised(metrics: Iterable[Metric]) -> list[Metric]:
    """The metrics with each message-size sweep cut to its largest size (without the `size` label)."""
    plain: list[Metric] = []
    largest: dict[tuple[str, str, tuple[tuple[str, str], ...]], tuple[float, Metric]] = {}
    for m in metrics:
        if SWEEP not in m.labels:
            plain.append(m)
            continue
        rest = {k: v for k, v in m.labels.items() if k != SWEEP}
        key = (m.name, m.unit, tuple(sorted((k, str(v)) for k, v in rest.items())))
        try:
            size = float(m.labels[SWEEP])
        except ValueError:
            continue
        if key not in largest or size >= largest[key][0]:
            largest[key] = (size, Metric(m.name, m.value, m.unit, rest))
    return plain + [m for _, m in largest.values()]


def metric_samples(check: CheckResult, node: str, uuids: Mapping[str, str]) -> list[Sample]:
    """One sample per measured value of a check, in its family's base unit."""
    out = []
    for m in summarised(check.metrics):
        factor = _SCALE.get(m.name) or PROM_BASE.get(m.unit, ("", 1.0))[1]
        labels = (("node", node), ("check", check.id), *label_pairs(m.labels, uuids))
        out.append(Sample(family(m.name, m.unit), tuple(sorted(labels)), float(m.value) * factor,
                          is_counter(m.name)))
    return out


def judges_drift(check: CheckResult) -> bool:
    """Whether the check holds drift evaluations (history's drift check): changes, not measurements."""
    return bool(check.evaluations) and all(e.source.startswith(DRIFT_SOURCE) for e in check.evaluations)


def drift_samples(check: CheckResult, node: str, uuids: Mapping[str, str]) -> list[Sample]:
    """The drift check's evaluations: the change since each reference and whether it is too much."""
    out = []
    for e in check.evaluations:
        if e.measured is None:
            continue
        labels = dict(e.labels)
        series_check = str(labels.pop("check", check.id))
        base = (("node", node), ("check", series_check), ("metric", family(e.metric, e.unit)))
        lab = tuple(sorted(base + label_pairs(labels, uuids)))
        if e.reference:
            out.append(Sample("harness_drift_change_ratio", lab,
                              (e.measured - e.reference) / abs(e.reference)))
        beyond = e.outcome in (Outcome.WARN, Outcome.FAIL, Outcome.XFAIL)
        out.append(Sample("harness_drift_beyond_limit", lab, 1.0 if beyond else 0.0))
    return out


def run_samples(record: RunRecord, node: str) -> list[Sample]:
    """The samples of one run."""
    suite = str(record.suite.get("name", ""))
    uuids = gpu_uuids(record.inventory)
    info = (("node", node), ("profile", str(record.profile.get("name", ""))), ("run", record.run_id),
            ("suite", suite), ("version", record.harness_version))
    out = [Sample("harness_run_info", info, 1.0)]
    out += [Sample("harness_run_verdict", (("node", node), ("suite", suite), ("verdict", v)),
                  1.0 if record.verdict == v else 0.0) for v in VERDICTS]
    finished = _epoch(record.finished)
    if finished is not None:
        out.append(Sample("harness_run_timestamp_seconds", (("node", node), ("suite", suite)), finished))
    out.append(Sample("harness_run_duration_seconds", (("node", node), ("suite", suite)), record.duration_s))
    for c in record.checks:
        out += [Sample("harness_check_status", (("check", c.id), ("kind", c.kind), ("node", node),
                                                ("status", s.value)), 1.0 if c.status is s else 0.0)
                for s in Status]
        out.append(Sample("harness_check_duration_seconds", (("check", c.id), ("node", node)), c.duration_s))
        out += drift_samples(c, node, uuids) if judges_drift(c) else metric_samples(c, node, uuids)
    return out


class _Collector:
    """Turns samples into gauge and counter families; each sample keeps only the labels it has."""

    def __init__(self, samples: Sequence[Sample]) -> None:
        self.samples = samples

    def collect(self) -> Iterator[PromMetric]:
        # start-up: prometheus_client loads only to export
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        by_family: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        counters: set[str] = set()
        for s in self.samples:
            # two identical series would make the exposition invalid: the last one wins
            by_family.setdefault(s.family, {})[s.labels] = s.value
            if s.counter:
                counters.add(s.family)
        for fam, series in by_family.items():
            if fam in counters:
                c = CounterMetricFamily(fam, help_of(fam))
                for labels, value in series.items():
                    c.add_sample(fam + "_total", dict(labels), value)
                yield c
            else:
                g = GaugeMetricFamily(fam, help_of(fam))
                for labels, value in series.items():
                    g.add_sample(fam, dict(labels), value)
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
