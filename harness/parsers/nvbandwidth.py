"""Parse nvbandwidth's text output (v0.7 to v0.10): every test's matrices, SUM and CoV lines.

Pure: text in, ParseResult out, never an exception. nvbandwidth reports bytes/s * 1e-9, so
its GB/s are 10^9 B/s; latency matrices are in ns and become us.

Each bandwidth cell (GB/s), every metric labelled with the nvbandwidth `test` name:
  gpu.h2d_bw {gpu}        host (cpu) to GPU N      gpu.d2h_bw {gpu}   GPU N to host
  gpu.p2p_bw {src, dst}   GPU to GPU, gpu<N> names
Latency cells (us): gpu.p2p_lat {src, dst} and gpu.host_lat {gpu}. The arrow in the matrix
title sets the direction: "A(row) -> B(column)" is row to column, "<-" column to row; for
"<->" the direction the test name states (host_to_device / device_to_host), else row to
column. Bidirectional tests print three matrices (Read1/Read2/Total, Write1/Write2/Total):
their cells carry a `part` label. N/A cells (the diagonal, GPU pairs without peer access)
give no metric. `gpu.bw_sum` {test[, part]} comes from the SUM lines of bandwidth tests.
A test that started but printed no complete matrix, "ERROR:" lines and CUDA/ASSERT errors
make the run invalid; output cut off after the last complete test is fine.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Optional

from harness.model import Metric
from harness.parsers.base import ParseResult, integer, invalid
from harness.units import GBPS, US, to_us

KIND = "nvbandwidth"
NOT_NVBANDWIDTH = "not nvbandwidth output (no result matrix found)"

_TITLE = re.compile(r"^(?P<pre>.*?)\b(?P<row>CPU|GPU)\(row\)\s*(?P<arrow><->|->|<-)\s*"
                    r"(?P<col>CPU|GPU)\(column\)\s*(?P<post>.*?)\s*\((?P<unit>GB/s|ns)\):?\s*$")
_RUNNING = re.compile(r"^Running\s+(\S+?)\.?\s*$")
_SUM = re.compile(r"^SUM\s+(\S+)\s+(\S+)\s*$")
_COV = re.compile(r"^COEFFICIENT_OF_VARIATION\s+(\S+)\s+(\S+)\s*$")
_DEVICE = re.compile(r"^Device\s+(\d+):\s*(.+?)\s*$")
_ERROR = re.compile(r"^(ERROR|Error)\b|\[CUDA_ERROR_\w+\]|\[cuda\w*Error\w*\]|^NVML_ERROR|"
                    r"\bASSERT in expression\b|\bCUDA_ERROR_\w+")
_PART_SUFFIX = re.compile(r"_(read1|read2|write1|write2|total)$")
_PART = re.compile(r"\b(Read1|Read2|Write1|Write2|Total)\b")


@dataclass
class _Matrix:
    test: Optional[str]
    row_kind: str
    col_kind: str
    arrow: str
    unit: str
    part: Optional[str]
    columns: list[int] = field(default_factory=list)
    rows: list[tuple[int, list[Optional[float]]]] = field(default_factory=list)
    closed: bool = False


def _cell(tok: str) -> Optional[float]:
    try:
        v = float(tok)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def parse(text: str) -> ParseResult:
    """gpu.h2d_bw / gpu.d2h_bw / gpu.p2p_bw (or latency) per cell, gpu.bw_sum per bandwidth test."""
    started: list[str] = []
    matrices: list[_Matrix] = []
    sums: dict[tuple[str, Optional[str]], float] = {}
    details: dict[str, object] = {"version": None, "driver": None, "devices": {}, "cov": {},
                                  "waived": 0, "tests": started}
    errors: list[str] = []
    current: Optional[str] = None
    mat: Optional[_Matrix] = None
    for raw in text.splitlines():
        s = raw.strip()
        if mat is not None and not mat.closed:
            if not s:
                if mat.rows:
                    mat.closed = True
                continue
            toks = s.split()
            ids = [integer(t, 9) for t in toks]  # a GPU index of 10 digits is not one
            if not mat.columns and all(i is not None for i in ids):
                mat.columns = [i for i in ids if i is not None]
                continue
            if mat.columns and ids[0] is not None:
                mat.rows.append((ids[0], [_cell(t) for t in toks[1:]]))
                continue
            mat.closed = True  # anything else ends the matrix; fall through to read the line
        if not s:
            continue
        if m := _TITLE.match(s):
            pm = _PART.search(m.group("post"))
            mat = _Matrix(current, m.group("row"), m.group("col"), m.group("arrow"), m.group("unit"),
                          pm.group(1).lower() if pm else None)
            matrices.append(mat)
        elif m := _RUNNING.match(s):
            current = m.group(1)
            started.append(current)
        elif m := _SUM.match(s):
            test, part = _split_part(m.group(1))
            for pending in matrices:
                if pending.test is None:
                    pending.test = test
            value = _cell(m.group(2))
            if value is not None:
                sums[(test, part)] = value
        elif m := _COV.match(s):
            cov = details["cov"]
            if isinstance(cov, dict):
                cov[m.group(1)] = _cell(m.group(2))
        elif _ERROR.search(s):
            errors.append(s[:300])
        elif s.startswith("Waived"):
            details["waived"] = int(str(details["waived"])) + 1
        elif s.startswith("nvbandwidth Version:"):
            details["version"] = s.split(":", 1)[1].strip()
        elif s.startswith("Driver Version:"):
            details["driver"] = s.split(":", 1)[1].strip()
        elif m := _DEVICE.match(s):
            devices = details["devices"]
            if isinstance(devices, dict):
                devices[f"gpu{m.group(1)}"] = m.group(2)
    return _result(started, matrices, sums, errors, details)


def _split_part(name: str) -> tuple[str, Optional[str]]:
    m = _PART_SUFFIX.search(name)
    return (name[:m.start()], m.group(1)) if m else (name, None)


def _node(kind: str, index: int) -> str:
    return "cpu" if kind == "CPU" else f"gpu{index}"


def _direction(mat: _Matrix, test: str, r: int, c: int) -> tuple[str, str]:
    row, col = _node(mat.row_kind, r), _node(mat.col_kind, c)
    if mat.arrow == "<-" or (mat.arrow == "<->" and mat.row_kind == "CPU"
                             and test.startswith("device_to_host")):
        return col, row
    return row, col


def cell_metric(test: str, part: Optional[str], src: str, dst: str, value: float, *,
                latency: bool = False) -> Metric:
    """One cell as gpu.h2d_bw / gpu.d2h_bw {gpu} or gpu.p2p_bw {src, dst} (latency: *_lat, us)."""
    labels: dict[str, str | int] = {"test": test, **({"part": part} if part else {})}
    if src == "cpu" or dst == "cpu":
        labels["gpu"] = int((dst if src == "cpu" else src)[3:])
        name = "gpu.host_lat" if latency else ("gpu.h2d_bw" if src == "cpu" else "gpu.d2h_bw")
    else:
        labels.update(src=src, dst=dst)
        name = "gpu.p2p_lat" if latency else "gpu.p2p_bw"
    return Metric(name, to_us(value, "ns") if latency else value, US if latency else GBPS, labels)


def _matrix_problems(mat: _Matrix, test: str) -> list[str]:
    want_rows = 1 if mat.row_kind == "CPU" else len(mat.columns)
    if not mat.columns or len(mat.rows) < want_rows:
        return [f"{test}: matrix incomplete ({len(mat.rows)} of {want_rows} rows): output truncated"]
    short = [r for r, cells in mat.rows if len(cells) != len(mat.columns)]
    if short:
        return [f"{test}: row {short[0]} has a different number of cells than the "
                f"{len(mat.columns)} columns"]
    return []


def _result(started: list[str], matrices: list[_Matrix], sums: dict[tuple[str, Optional[str]], float],
            errors: list[str], details: dict[str, object]) -> ParseResult:
    if not matrices and not errors and not started:
        return invalid(KIND, NOT_NVBANDWIDTH)
    problems: list[str] = []
    metrics: list[Metric] = []
    missing: list[str] = []
    latency_tests: set[str] = set()
    for mat in matrices:
        test = mat.test or "unknown"
        bad = _matrix_problems(mat, test)
        problems += bad
        if bad:
            continue
        if mat.unit == "ns":
            latency_tests.add(test)
        for r, cells in mat.rows:
            for c, value in zip(mat.columns, cells, strict=True):
                src, dst = _direction(mat, test, r, c)
                if value is None:
                    if src != dst:
                        missing.append(f"{test}: {src}->{dst}")
                    continue
                metrics.append(cell_metric(test, mat.part, src, dst, value, latency=mat.unit == "ns"))
    for (test, part), value in sums.items():
        if test not in latency_tests:
            labels = {"test": test, **({"part": part} if part else {})}
            metrics.append(Metric("gpu.bw_sum", value, GBPS, labels))
    printed = {m.test for m in matrices}
    for test in started:
        if test not in printed:
            problems.append(f"{test}: started but printed no result matrix (crashed or output truncated)")
    if errors:
        more = f" (and {len(errors) - 1} more error lines)" if len(errors) > 1 else ""
        problems.append(f"nvbandwidth error: {errors[0]}{more}")
    if not metrics and not problems:
        problems.append("no measurement in the output")
    details["not_measured"] = missing
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)
