"""Parse the CUDA samples bandwidthTest and p2pBandwidthLatencyTest outputs.

Pure: text in, ParseResult out, never an exception.

bandwidthTest: `gpu.h2d_bw`, `gpu.d2h_bw`, `gpu.d2d_bw` (GB/s) per section and transfer size,
labelled {test: bandwidthTest, memory (pinned, pageable), size (bytes), gpu (the device the
run names)}; a `--device=all` run is one aggregate, labelled {devices: N} instead of gpu.
Current samples print GB/s (bytes / 1e9 / s); old ones print "MB/s" computed as 1024 * bytes
/ (ms * 2^20), i.e. units of 1,024,000 B/s, converted here as value * 0.001024 GB/s.
Device-to-device counts the read and the write (the sample doubles it).

p2pBandwidthLatencyTest: `gpu.p2p_bw` (GB/s, bytes / 1e9 / s) per GPU pair, labelled {test:
p2pBandwidthLatencyTest, src (row), dst (column), mode (unidirectional, bidirectional), p2p
(enabled, disabled)}; `gpu.p2p_lat` (us) {test, src, dst, p2p, side (gpu, cpu)};
`gpu.p2p_access` (1/0) per pair from the connectivity matrix. The diagonal gives no metric.
"""

from __future__ import annotations

import re
from typing import Optional

from harness.model import Metric
from harness.parsers.base import ParseResult, finite, integer, invalid
from harness.units import COUNT, GBPS, US

_SECTION = re.compile(r"^(Host to Device|Device to Host|Device to Device) Bandwidth,\s*(\d{1,9})\s+Device")
_MEMORY = re.compile(r"^(PINNED|PAGEABLE) Memory Transfers")
_UNIT = re.compile(r"Transfer Size \(Bytes\)\s+Bandwidth\((GB/s|MB/s)\)")
_RESULT = re.compile(r"^Result\s*=\s*(\w+)")
_DIRECTIONS = {"Host to Device": "h2d", "Device to Host": "d2h", "Device to Device": "d2d"}
BANDWIDTH_TEST, P2P_TEST = "bandwidthTest", "p2pBandwidthLatencyTest"
_TO_GBPS = {"GB/s": 1.0, "MB/s": 1024.0 * 1000 / 1e9}
_DEVICE = re.compile(r"^Device[:\s]+(\d{1,9})[:,]\s*(.+?)(?:,\s*pciBusID.*)?$")


def parse_bandwidthtest(text: str) -> ParseResult:
    """gpu.h2d_bw / gpu.d2h_bw / gpu.d2d_bw (GB/s) per memory kind and transfer size."""
    metrics: list[Metric] = []
    problems: list[str] = []
    devices: dict[str, str] = {}
    section: Optional[dict[str, str | int]] = None
    unit: Optional[str] = None
    rows_in_section = 0
    result: Optional[str] = None
    sections = 0
    for raw in text.splitlines():
        s = raw.strip()
        if m := _SECTION.match(s):
            if section is not None and rows_in_section == 0:
                problems.append(f"{section['direction']}: section has no result row")
            section = {"direction": _DIRECTIONS[m.group(1)], "devices": int(m.group(2))}
            unit, rows_in_section = None, 0
            sections += 1
        elif (m := _MEMORY.match(s)) and section is not None:
            section["memory"] = m.group(1).lower()
        elif m := _UNIT.search(s):
            unit = m.group(1)
        elif m := _RESULT.match(s):
            result = m.group(1)
        elif (m := _DEVICE.match(s)) and section is None:
            devices[f"gpu{m.group(1)}"] = m.group(2)
        elif section is not None and unit is not None:
            toks = s.split()
            value = finite(toks[1]) if len(toks) == 2 and toks[0].isdecimal() and len(toks[0]) < 20 else None
            if value is not None:
                metrics.append(_bandwidth_metric(section, devices, int(toks[0]), value * _TO_GBPS[unit]))
                rows_in_section += 1
    if sections == 0:
        return invalid("cuda-bandwidthtest", "not bandwidthTest output (no bandwidth section found)")
    if section is not None and rows_in_section == 0:
        problems.append(f"{section['direction']}: section has no result row (output truncated)")
    if result is not None and result.upper() != "PASS":
        problems.append(f"bandwidthTest reported Result = {result}")
    details = {"devices": devices, "result": result}
    return ParseResult("cuda-bandwidthtest", not problems, tuple(problems), tuple(metrics), details)


def _bandwidth_metric(section: dict[str, str | int], devices: dict[str, str], size: int,
                      gbps: float) -> Metric:
    labels: dict[str, str | int] = {"test": BANDWIDTH_TEST, "size": size}
    if "memory" in section:
        labels["memory"] = section["memory"]
    if section["devices"] != 1:
        labels["devices"] = section["devices"]
    elif len(devices) == 1:
        labels["gpu"] = int(next(iter(devices))[3:])
    return Metric(f"gpu.{section['direction']}_bw", gbps, GBPS, labels)


_MATRIX = re.compile(r"^(Unidirectional|Bidirectional) P2P=(Enabled|Disabled) Bandwidth")
_LATENCY = re.compile(r"^P2P=(Enabled|Disabled) Latency")
_CONNECTIVITY = re.compile(r"^P2P Connectivity Matrix")
_HEAD = re.compile(r"^(D\\D|GPU|CPU)((?:\s+\d{1,9})+)\s*$")


def parse_p2p(text: str) -> ParseResult:
    """gpu.p2p_bw, gpu.p2p_lat and gpu.p2p_access per GPU pair from p2pBandwidthLatencyTest."""
    metrics: list[Metric] = []
    problems: list[str] = []
    devices: dict[str, str] = {}
    kind: Optional[tuple[str, dict[str, str]]] = None  # (metric, labels) of the matrix being read
    columns: list[int] = []
    matrices: list[tuple[str, dict[str, str], int, int]] = []
    cannot: list[str] = []
    for raw in text.splitlines():
        s = raw.strip()
        if m := _MATRIX.match(s):
            kind, columns = ("gpu.p2p_bw", {"test": P2P_TEST, "mode": m.group(1).lower(),
                                            "p2p": m.group(2).lower()}), []
        elif m := _LATENCY.match(s):
            kind, columns = ("gpu.p2p_lat", {"test": P2P_TEST, "p2p": m.group(1).lower()}), []
        elif _CONNECTIVITY.match(s):
            kind, columns = ("gpu.p2p_access", {"test": P2P_TEST}), []
        elif "CANNOT Access Peer" in s:
            cannot.append(s)
        elif (m := _DEVICE.match(s)) and kind is None:
            devices[f"gpu{m.group(1)}"] = m.group(2)
        elif kind is not None and (m := _HEAD.match(s)):
            columns = [int(t) for t in m.group(2).split()]
            labels = dict(kind[1])
            if kind[0] == "gpu.p2p_lat":
                labels["side"] = m.group(1).lower()
            matrices.append((kind[0], labels, len(columns), 0))
        elif kind is not None and columns and s and integer(s.split()[0], 9) is not None:
            toks = s.split()
            cells = [finite(t) for t in toks[1:]]
            name, labels, ncols, nrows = matrices[-1]
            if len(cells) != ncols or any(c is None for c in cells):
                problems.append(f"{name} {_shown(labels)}: row {toks[0]} is incomplete")
                continue
            matrices[-1] = (name, labels, ncols, nrows + 1)
            r = int(toks[0])
            for c, value in zip(columns, cells, strict=True):
                if r == c or value is None:
                    continue
                unit = {"gpu.p2p_bw": GBPS, "gpu.p2p_lat": US, "gpu.p2p_access": COUNT}[name]
                metrics.append(Metric(name, value, unit, {**labels, "src": f"gpu{r}", "dst": f"gpu{c}"}))
    if not matrices:
        return invalid("p2p", "not p2pBandwidthLatencyTest output (no matrix found)")
    for name, labels, ncols, nrows in matrices:
        if nrows < ncols:
            problems.append(f"{name} {_shown(labels)}: {nrows} of {ncols} rows (output truncated)")
    details = {"devices": devices, "cannot_access_peer": cannot}
    return ParseResult("p2p", not problems, tuple(problems), tuple(metrics), details)


def _shown(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k != "test"}
