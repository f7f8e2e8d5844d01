"""Parse perftest output (ib_write_bw, ib_read_bw, ib_send_bw and the *_lat tools).

Pure: text in, ParseResult out, never an exception. Units, as perftest computes them
(perftest_resources.c): "MB/sec" is 2^20 bytes per second (format_factor 0x100000) and
"Gb/sec" (--report_gbits) is 10^9 bits per second (bytes / 125000000); both become GB/s
(10^9 B/s). Latency columns are in usec.

Bandwidth tools give `rdma.bw_avg` (BW average) and `rdma.bw_peak`; latency tools give
`rdma.lat_min`, `_max`, `_typical`, `_avg`, `_p99` and `_p999`. Labels: test, size
(bytes), device and qps when the header names them. Warnings inside the table (e.g.
"Conflicting CPU frequency values") are skipped; connection failures, completion errors
and "no devices" messages make the run invalid.
"""

from __future__ import annotations

import re
from typing import Optional

from harness.model import Metric
from harness.parsers.base import ParseResult, finite, integer, invalid
from harness.units import GBPS, US, to_gbps

KIND = "perftest"
NOT_PERFTEST = "not perftest output (no result table)"

_TITLE = re.compile(r"^\s*(RDMA_Write|RDMA_Read|Send|Atomic\s+\w+)\s+(BW|Latency)\s+Test\s*$")
_VERBS = {"RDMA_Write": "write", "RDMA_Read": "read", "Send": "send"}
_FIELD = re.compile(r"(Device|Number of qps|Link type|Mtu|Transport type|Connection type)"
                    r"\s*:\s*([^\t]+?)(?=\s{2,}|\t|$)")
_BW_HEAD = re.compile(r"#bytes\s+#iterations\s+BW peak\[(MB/sec|Gb/sec)\]\s+BW average\[(MB/sec|Gb/sec)\]")
_LAT_HEAD = re.compile(r"#bytes\s+#iterations\s+t_min\[usec\]")
_LAT_COLS = re.compile(r"(t_min|t_max|t_typical|t_avg|t_stdev|99% percentile|99\.9% percentile)\[usec\]")
LAT_STATS = {"t_min": "min", "t_max": "max", "t_typical": "typical", "t_avg": "avg",
             "99% percentile": "p99", "99.9% percentile": "p999"}  # t_stdev is not a latency
_UNITS = {"MB/sec": "MiB/s", "Gb/sec": "Gb/s"}
_FAILURE = re.compile(r"Couldn't|Could not|Completion with error|\bFailed\b|Unable to|"
                      r"Did not detect|No IB devices|not found|\bERROR\b", re.IGNORECASE)


def test_name(title_verb: str, kind: str) -> str:
    """'RDMA_Write', 'BW' -> 'ib_write_bw'; 'Atomic FETCH_AND_ADD', 'BW' -> 'ib_atomic_bw'."""
    verb = _VERBS.get(title_verb, "atomic" if title_verb.startswith("Atomic") else title_verb.lower())
    return f"ib_{verb}_{'bw' if kind == 'BW' else 'lat'}"


def parse(text: str, test: Optional[str] = None) -> ParseResult:
    """rdma.bw_avg / rdma.bw_peak (GB/s) or rdma.lat_* (us) per message size."""
    fields: dict[str, str] = {}
    failures: list[str] = []
    metrics: list[Metric] = []
    bw_unit: Optional[str] = None
    lat_cols: list[str] = []
    name = test
    for raw in text.splitlines():
        s = raw.strip()
        if not s:
            continue
        if m := _TITLE.match(s):
            name = test_name(m.group(1), m.group(2))
            continue
        if _FAILURE.search(s):
            failures.append(s[:300])
            continue
        if m := _BW_HEAD.search(s):
            bw_unit, lat_cols = _UNITS[m.group(2)], []
            continue
        if _LAT_HEAD.search(s):
            lat_cols, bw_unit = _LAT_COLS.findall(s), None
            continue
        if bw_unit is None and not lat_cols:
            for key, value in _FIELD.findall(s):
                fields.setdefault(key, value.strip())
            continue
        metrics += _row(s, bw_unit, lat_cols, _labels(name, fields))
    details = {"test": name, "device": fields.get("Device"), "link_type": fields.get("Link type"),
               "mtu": fields.get("Mtu"), "qps": fields.get("Number of qps"),
               "connection": fields.get("Connection type")}
    problems: list[str] = []
    if failures:
        more = f" (and {len(failures) - 1} more error lines)" if len(failures) > 1 else ""
        problems.append(f"perftest failed: {failures[0]}{more}")
    if not metrics and not failures:
        if not fields:
            return invalid(KIND, NOT_PERFTEST)
        problems.append("no result rows")
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)


def _labels(name: Optional[str], fields: dict[str, str]) -> dict[str, str | int]:
    labels: dict[str, str | int] = {"test": name or "unknown"}
    if fields.get("Device"):
        labels["device"] = fields["Device"]
    qps = integer(fields.get("Number of qps", ""), 9)
    if qps is not None:
        labels["qps"] = qps
    return labels


def _row(line: str, bw_unit: Optional[str], lat_cols: list[str],
         labels: dict[str, str | int]) -> list[Metric]:
    toks = line.split()
    size = integer(toks[0]) if len(toks) >= 3 else None
    if size is None or integer(toks[1]) is None:
        return []  # not a result row (a size or count of more than 20 digits is none)
    values = [finite(t) for t in toks[2:]]
    if any(v is None for v in values):
        return []
    nums = [v for v in values if v is not None]
    lab = {**labels, "size": size}
    if bw_unit is not None:
        if len(nums) < 2:
            return []
        return [Metric("rdma.bw_avg", to_gbps(nums[1], bw_unit), GBPS, lab),
                Metric("rdma.bw_peak", to_gbps(nums[0], bw_unit), GBPS, lab)]
    if len(nums) < len(lat_cols):
        return []
    return [Metric(f"rdma.lat_{LAT_STATS[col]}", v, US, lab)
            for col, v in zip(lat_cols, nums[:len(lat_cols)], strict=True) if col in LAT_STATS]
