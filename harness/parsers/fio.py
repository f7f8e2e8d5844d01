"""Parse fio's `--output-format=json` / `json+` output into per-job, per-direction metrics.

Pure: text in, ParseResult out. Text before or after the JSON document (notes fio prints
when --output is not used, shell noise) is tolerated. Latency metrics are omitted, never
zero-filled, when fio recorded no completion-latency samples (gtod_reduce, N == 0).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from typing import Any, Optional

from harness.model import Metric
from harness.parsers.base import ParseResult, invalid, json_objects, number
from harness.units import GBPS, IOPS, US, to_gbps, to_us

KIND = "fio"
DIRECTIONS = ("read", "write", "trim")
# metric name -> percentile it reports
PERCENTILES = {"fio.clat_p50": 50.0, "fio.clat_p99": 99.0, "fio.clat_p999": 99.9}
NOT_JSON = "not fio JSON output (use --output-format=json)"


def find_document(text: str) -> Optional[dict[str, Any]]:
    """The first JSON object in `text` that looks like fio's report, else None."""
    return next((o for o in json_objects(text) if "fio version" in o or "jobs" in o), None)


def parse(text: str) -> ParseResult:
    """Metrics fio.iops, fio.bw, fio.clat_* labelled {job, rw} from fio JSON output."""
    doc = find_document(text)
    if doc is None:
        return invalid(KIND, NOT_JSON)
    jobs = doc.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        return invalid(KIND, "fio JSON output has no jobs")
    names = Counter(_name(j, i) for i, j in enumerate(jobs) if isinstance(j, dict))
    seen: Counter[str] = Counter()
    problems: list[str] = []
    metrics: list[Metric] = []
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            problems.append(f"jobs[{i}] is not an object")
            continue
        name = _name(job, i)
        labels: dict[str, str | int] = {"job": name}
        if names[name] > 1:  # same name reported more than once (numjobs without group_reporting)
            labels["instance"] = seen[name]
            seen[name] += 1
        err = _num(job.get("error"))
        if err:  # its numbers are not a measurement: report the error, no metrics
            known = os.strerror(int(err)) if abs(err) < 1 << 31 else "not an errno"
            problems.append(f"job {name}: error {int(err)} ({known})")
            continue
        for rw in DIRECTIONS:
            block = job.get(rw)
            if isinstance(block, dict) and _did_io(block):
                metrics.extend(_direction_metrics(block, {**labels, "rw": rw}))
    if not metrics and not problems:
        problems.append("no job did any I/O")
    details = {"fio_version": doc.get("fio version"), "jobs": list(names)}
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)


def totals(text: str) -> dict[tuple[str, str], tuple[float, float]]:
    """(job name, rw) -> (runtime in s, bytes moved) for every direction that did I/O.

    The runtime of a reporting group is its longest member's and, for a job with end_fsync,
    includes the final fsync (fio runs it inside the job). Errored jobs are left out.
    """
    doc = find_document(text)
    jobs = doc.get("jobs") if doc is not None else None
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for i, job in enumerate(jobs if isinstance(jobs, list) else []):
        if not isinstance(job, dict) or _num(job.get("error")):
            continue
        for rw in DIRECTIONS:
            block = job.get(rw)
            if isinstance(block, dict) and _did_io(block):
                out[(_name(job, i), rw)] = (_num(block.get("runtime")) / 1000.0,
                                            _num(block.get("io_bytes")))
    return out


def _name(job: Mapping[str, Any], index: int) -> str:
    name = job.get("jobname")
    return str(name) if name not in (None, "") else f"job{index}"


def _num(value: Any) -> float:
    """A finite number from a JSON value, else 0 (base.number)."""
    v = number(value)
    return 0.0 if v is None else v


def _did_io(block: Mapping[str, Any]) -> bool:
    return _num(block.get("total_ios")) > 0 or _num(block.get("io_bytes")) > 0


def _direction_metrics(block: Mapping[str, Any], labels: Mapping[str, str | int]) -> list[Metric]:
    out = [Metric("fio.iops", _num(block.get("iops")), IOPS, labels)]
    if "bw_bytes" in block:
        out.append(Metric("fio.bw", to_gbps(_num(block["bw_bytes"]), "B/s"), GBPS, labels))
    elif "bw" in block:  # fio < 3.0: KiB/s
        out.append(Metric("fio.bw", to_gbps(_num(block["bw"]), "KiB/s"), GBPS, labels))
    out.extend(_latency(block, labels))
    return out


def _latency(block: Mapping[str, Any], labels: Mapping[str, str | int]) -> list[Metric]:
    """clat mean and percentiles in us; nothing when fio kept no latency samples."""
    if isinstance(block.get("clat_ns"), dict):
        clat, unit = block["clat_ns"], "ns"
    elif isinstance(block.get("clat"), dict):  # fio < 3.0: usec
        clat, unit = block["clat"], "us"
    else:
        return []
    pct = clat.get("percentile")
    pct = pct if isinstance(pct, dict) else {}
    if "N" in clat:
        sampled = _num(clat["N"]) > 0
    else:  # fio < 3.2x has no N: a run without samples reports all zeros
        sampled = _num(clat.get("max")) > 0 or any(_num(v) > 0 for v in pct.values())
    if not sampled:
        return []
    out = [Metric("fio.clat_mean", to_us(_num(clat.get("mean")), unit), US, labels)]
    by_level: dict[float, Any] = {}
    for key, value in pct.items():
        try:
            by_level[round(float(key), 6)] = value
        except ValueError:
            continue
    for name, level in PERCENTILES.items():
        if level in by_level:
            out.append(Metric(name, to_us(_num(by_level[level]), unit), US, labels))
    return out
