"""Parse `nvidia-smi --query-gpu=... --format=csv` into per-GPU metrics. Pure.

The header names the fields (with units in brackets: "power.draw [W]"); values may carry
units ("30.39 W", "0 %") or be "[N/A]" / "[Not Supported]", which are omitted. Drivers since
~535 answer a query for `clocks_throttle_reasons.*` with `clocks_event_reasons.*` headers;
both are read. Rows without an `index` column are numbered in order.
"""

from __future__ import annotations

import csv
import io
import math
import re

from harness.model import Metric
from harness.parsers import clockreasons
from harness.parsers.base import ParseResult, integer, invalid
from harness.units import CELSIUS, COUNT, MHZ, PERCENT, WATT

KIND = "nvidia-smi-csv"
# field -> (metric, unit, extra labels)
FIELDS: dict[str, tuple[str, str, dict[str, str]]] = {
    "temperature.gpu": ("gpu.temp", CELSIUS, {}),
    "temperature.memory": ("gpu.mem_temp", CELSIUS, {}),
    "power.draw": ("gpu.power", WATT, {}),
    "power.draw.instant": ("gpu.power", WATT, {}),
    "power.limit": ("gpu.power_limit", WATT, {}),
    "utilization.gpu": ("gpu.util", PERCENT, {}),
    "clocks.current.sm": ("gpu.sm_clock", MHZ, {"which": "current"}),
    "clocks.sm": ("gpu.sm_clock", MHZ, {"which": "current"}),
    "clocks.max.sm": ("gpu.sm_clock", MHZ, {"which": "max"}),
    "pcie.link.gen.current": ("gpu.pcie_gen", COUNT, {"which": "current"}),
    "pcie.link.gen.gpucurrent": ("gpu.pcie_gen", COUNT, {"which": "current"}),
    "pcie.link.gen.max": ("gpu.pcie_gen", COUNT, {"which": "max"}),
    "pcie.link.width.current": ("gpu.pcie_width", COUNT, {"which": "current"}),
    "pcie.link.width.max": ("gpu.pcie_width", COUNT, {"which": "max"}),
    "ecc.errors.corrected.volatile.total": ("gpu.ecc_corrected", COUNT, {"scope": "volatile"}),
    "ecc.errors.uncorrected.volatile.total": ("gpu.ecc_uncorrected", COUNT, {"scope": "volatile"}),
    "ecc.errors.corrected.aggregate.total": ("gpu.ecc_corrected", COUNT, {"scope": "aggregate"}),
    "ecc.errors.uncorrected.aggregate.total": ("gpu.ecc_uncorrected", COUNT, {"scope": "aggregate"}),
}
_NUM = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")
_REASON = re.compile(r"^clocks_(?:event|throttle)_reasons\.(\w+)$")


def parse(text: str) -> ParseResult:
    """gpu.temp, gpu.power, gpu.clocks_event{reason}, ... labelled {gpu} from query-gpu CSV."""
    try:
        rows = [r for r in csv.reader(io.StringIO(text.strip()), skipinitialspace=True) if r]
    except csv.Error as e:  # e.g. a stray carriage return inside a field
        return invalid(KIND, f"not readable as CSV: {e}")
    if len(rows) < 2 or not any("." in c or c in ("index", "name", "uuid") for c in rows[0]):
        return invalid(KIND, "not nvidia-smi --query-gpu CSV (no header row and data rows)")
    header = [re.sub(r"\s*\[[^\]]*\]\s*$", "", c.strip()) for c in rows[0]]
    problems: list[str] = []
    metrics: list[Metric] = []
    names: dict[int, str] = {}
    for n, row in enumerate(rows[1:], 1):
        if len(row) != len(header):
            problems.append(f"row {n}: {len(row)} fields for {len(header)} columns")
            continue
        cells = dict(zip(header, (c.strip() for c in row), strict=True))
        index = integer(cells.get("index", ""), 9)
        gpu = index if index is not None else n - 1  # as a GPU with no index column
        if cells.get("name"):
            names[gpu] = cells["name"]
        metrics.extend(_row_metrics(cells, gpu))
    used = [h for h in header if h in FIELDS or _REASON.match(h)]
    if not used:
        problems.append("none of the queried fields is one the harness reads")
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics),
                       {"fields": header, "names": names})


def _row_metrics(cells: dict[str, str], gpu: int) -> list[Metric]:
    out: list[Metric] = []
    reasons: dict[str, bool] = {}
    for field, value in cells.items():
        if field in FIELDS:
            m = _NUM.match(value)
            number = float(m.group(1)) if m else math.nan
            if math.isfinite(number):  # 400 digits read as inf: not a reading
                name, unit, extra = FIELDS[field]
                out.append(Metric(name, number, unit, {"gpu": gpu, **extra}))
            continue
        r = _REASON.match(field)
        if r is None:
            continue
        if r.group(1) == "active":
            mask = clockreasons.parse_mask(value)
            if mask is not None:
                for name in clockreasons.BITS:
                    reasons.setdefault(name, bool(mask & clockreasons.BITS[name]))
        elif r.group(1) in clockreasons.TAG_SUFFIXES and value in ("Active", "Not Active"):
            reasons[clockreasons.TAG_SUFFIXES[r.group(1)]] = value == "Active"
    out += [Metric("gpu.clocks_event", 1.0 if on else 0.0, COUNT, {"gpu": gpu, "reason": k})
            for k, on in reasons.items()]
    return out
