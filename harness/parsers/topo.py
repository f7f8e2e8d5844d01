"""Parse `nvidia-smi topo -m` (and `-mp`): the GPU/NIC connection matrix and CPU/NUMA affinity.

Pure: text in, ParseResult out, never an exception. Metrics, with GPUs named gpu<N> and NICs
as printed (mlx5_0, NIC0, ...):
  topo.nvlinks {src, dst}        bonded NVLinks between two GPUs (NV18 -> 18, 0 where none)
  topo.path {src, dst, path}     1 for each GPU-GPU and GPU-NIC pair (path: PIX, PXB, PHB,
                                 NODE, SYS, NV#)
  topo.nic_rank {gpu, nic}       the nearest NIC of each GPU as a rank: 1 PIX, 2 PXB, 3 PHB,
                                 4 NODE, 5 SYS (so "max: 2" means a NIC at PIX or PXB)
CPU and NUMA affinity per GPU, and the NIC legend (NIC0 -> mlx5_0), go to details. Rows are
TAB-separated as printed (nvidia-smi puts two TABs before GPU NUMA ID); outputs whose TABs became
spaces are split on whitespace, which works while affinity cells are not empty.
"""

from __future__ import annotations

import re
from typing import Any

from harness.model import Metric
from harness.parsers.base import ParseResult, invalid
from harness.units import COUNT

KIND = "nvidia-smi-topo"
RANK = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "SOC": 5}  # SOC: old drivers' SYS
_PATH = re.compile(r"^(X|PIX|PXB|PHB|NODE|SYS|NV\d{1,4}|SOC)$")
_AFFINITY = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")


def _name(raw: str) -> str:
    return f"gpu{raw[3:]}" if re.fullmatch(r"GPU\d+", raw) else raw


def _header(line: str) -> tuple[list[str], list[str]] | None:
    """(device columns, affinity columns) of a header line, else None."""
    if "\t" in line:
        cells = [c.strip() for c in line.split("\t")]
    else:  # TABs lost in a copy: columns are at least two spaces apart
        cells = re.split(r"\s{2,}|\s(?=GPU\d)", line.strip())
    cells = [c for c in cells if c]
    if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
        return None
    devices = [c for c in cells if c not in _AFFINITY]
    return devices, [c for c in cells if c in _AFFINITY]


def parse(text: str) -> ParseResult:
    """topo.nvlinks, topo.path and topo.nic_rank from the matrix; affinity in details."""
    lines = text.splitlines()
    head = None
    start = 0
    for i, line in enumerate(lines):
        head = _header(line)
        if head is not None:
            start = i + 1
            break
    if head is None:
        return invalid(KIND, "not nvidia-smi topo -m output (no GPU0 header row)")
    devices, affinity_cols = head
    matrix: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict[str, str]] = {}
    problems: list[str] = []
    for line in lines[start:]:
        if not line.strip():
            break
        cells = [c.strip() for c in line.split("\t")] if "\t" in line else line.split()
        row, values = cells[0], cells[1:]
        if row not in devices:
            continue
        paths = values[:len(devices)]
        if len(paths) < len(devices) or not all(_PATH.match(p) for p in paths):
            problems.append(f"row {row}: expected {len(devices)} connection cells, got {' '.join(paths)!r}")
            continue
        matrix[row] = dict(zip(devices, paths, strict=True))
        extra = values[len(devices):]
        while len(extra) > len(affinity_cols) and "" in extra[1:]:  # nvidia-smi pads with a 2nd TAB
            del extra[extra.index("", 1)]
        affinity[_name(row)] = {k: v for k, v in zip(affinity_cols, extra, strict=False) if v}
    missing = [d for d in devices if d not in matrix]
    if missing:
        problems.append(f"no matrix row for {', '.join(missing)} (output truncated)")
    metrics = _metrics(devices, matrix)
    details: dict[str, Any] = {"devices": [_name(d) for d in devices],
                               "affinity": {k: v for k, v in affinity.items() if k.startswith("gpu")},
                               "nic_names": {m.group(1): m.group(2) for ln in lines[start:]
                                             if (m := _NIC_LEGEND.match(ln))}}
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)


def _metrics(devices: list[str], matrix: dict[str, dict[str, str]]) -> list[Metric]:
    gpus = [d for d in devices if d.startswith("GPU")]
    nics = [d for d in devices if not d.startswith("GPU")]
    out: list[Metric] = []
    for g in gpus:
        row = matrix.get(g)
        if row is None:
            continue
        for other in devices:
            path = row[other]
            if other == g or path == "X":
                continue
            labels: dict[str, str | int] = {"src": _name(g), "dst": _name(other)}
            if other in gpus:
                links = int(path[2:]) if path.startswith("NV") else 0
                out.append(Metric("topo.nvlinks", float(links), COUNT, labels))
            out.append(Metric("topo.path", 1.0, COUNT, {**labels, "path": path}))
        ranked = [(RANK[row[n]], n) for n in nics if row[n] in RANK]
        if ranked:
            rank, nic = min(ranked)
            out.append(Metric("topo.nic_rank", float(rank), COUNT, {"gpu": _name(g), "nic": nic}))
    return out
