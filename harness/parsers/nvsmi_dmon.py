"""Parse `nvidia-smi dmon` output into per-GPU aggregates, as the telemetry reports them. Pure.

The columns depend on `-s` (and `-o D/T` adds Date/Time in front), so the layout is read from
the `#` header that names them ("# gpu pwr gtemp ..."), with its units line ("# Idx W C ...")
checked where present; nothing is assumed. '-' marks a value the GPU does not report. Per GPU
(label `gpu`: dmon's Idx), whatever the columns allow: peak GPU and memory temperature
(gtemp, mtemp), mean and peak power (pwr), mean SM utilisation (sm) and mean clock (pclk, the
graphics clock, which is the SM clock on datacenter parts). A last row cut short (the capture
stopped mid-line) is dropped; a broken row elsewhere makes the output invalid.
"""

from __future__ import annotations

from typing import Any

from harness.model import Metric
from harness.parsers.base import ParseResult, finite, invalid
from harness.units import CELSIUS, MHZ, PERCENT, WATT

KIND = "nvidia-smi-dmon"
# column -> (dmon's unit, [(metric, aggregate)], harness unit)
COLUMNS: dict[str, tuple[str, tuple[tuple[str, str], ...], str]] = {
    "pwr": ("W", (("gpu.power_mean", "mean"), ("gpu.power_max", "max")), WATT),
    "gtemp": ("C", (("gpu.temp_max", "max"),), CELSIUS),
    "mtemp": ("C", (("gpu.mem_temp_max", "max"),), CELSIUS),
    "sm": ("%", (("gpu.util_mean", "mean"),), PERCENT),
    "pclk": ("MHz", (("gpu.sm_clock_mean", "mean"),), MHZ),
}


def _header(line: str) -> list[str] | None:
    """The column names of a '# gpu pwr ...' or '#Date Time gpu ...' line; None for other lines."""
    if not line.startswith("#"):
        return None
    names = line.lstrip("#").split()
    return names if "gpu" in names else None


def parse(text: str) -> ParseResult:
    """gpu.temp_max, gpu.mem_temp_max, gpu.power_mean/max, gpu.util_mean, gpu.sm_clock_mean {gpu}."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    columns: list[str] | None = None
    units: dict[str, str] = {}
    samples: dict[int, dict[str, list[float]]] = {}
    rows: dict[int, int] = {}
    bad: list[tuple[int, str]] = []
    seen: list[str] = []
    pmon = False
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            names = _header(line)
            if names and "pid" in names:  # `nvidia-smi pmon`: per-process rows, not per-GPU samples
                pmon = True
                columns = None
            elif names:
                columns = names
                seen += [c for c in names if c not in seen]
            elif columns and len(line.lstrip("#").split()) == len(columns):  # the units line under it
                units.update(zip(columns, line.lstrip("#").split(), strict=True))
            continue
        fields = line.split()
        if columns is None:
            bad.append((n, "a data row before any '# gpu ...' header"))
            continue
        if len(fields) != len(columns):
            bad.append((n, f"{len(fields)} fields for {len(columns)} columns"))
            continue
        row = dict(zip(columns, fields, strict=True))
        if not row["gpu"].isdecimal() or len(row["gpu"]) > 9:
            bad.append((n, f"GPU index {row['gpu']!r} is not a number"))
            continue
        gpu = int(row["gpu"])
        rows[gpu] = rows.get(gpu, 0) + 1
        for col in COLUMNS:
            v = finite(row[col]) if col in row else None  # '-': not reported
            if v is not None:
                samples.setdefault(gpu, {}).setdefault(col, []).append(v)
    if not seen:
        if pmon:
            return invalid(KIND, "this is nvidia-smi pmon output (per-process rows), not dmon")
        return invalid(KIND, "not nvidia-smi dmon output (no '# gpu ...' header naming the columns)")
    last = max((n for n, raw in enumerate(lines, 1) if raw.strip()), default=0)
    truncated = bool(bad) and bad[-1][0] == last and not bad[-1][1].startswith("a data row")
    broken = [f"line {n}: {why}" for n, why in (bad[:-1] if truncated else bad)]
    problems = broken[:5] + ([f"... and {len(broken) - 5} more broken rows"] if len(broken) > 5 else [])
    if not rows:
        problems.append("no samples under the dmon header")
    mismatched = {c: units[c] for c in COLUMNS if c in units and units[c] != COLUMNS[c][0]}
    read = [c for c in COLUMNS if c in seen and c not in mismatched]
    if rows and not read:
        problems.append(f"none of the columns {seen} is one the harness reads ({', '.join(COLUMNS)})")
    metrics = [m for gpu in sorted(samples) for m in _aggregate(gpu, samples[gpu], read)]
    details: dict[str, Any] = {"columns": seen, "units": units, "samples": {g: rows[g] for g in sorted(rows)},
                               "truncated_tail": truncated}
    if mismatched:
        details["unit_mismatch"] = mismatched  # a unit other than dmon's own: not converted, not read
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)


def _aggregate(gpu: int, cols: dict[str, list[float]], read: list[str]) -> list[Metric]:
    out = []
    for col in read:
        vals = cols.get(col)
        if not vals:
            continue
        _, aggs, unit = COLUMNS[col]
        for name, how in aggs:
            value = max(vals) if how == "max" else sum(vals) / len(vals)
            out.append(Metric(name, value, unit, {"gpu": gpu}))
    return out
