"""The power_headroom check's samples: node power (BMC, or estimated), GPU power, PSU state. Pure.

Each sample is one tick: the BMC and every GPU read at the same timestamp, seconds from the
start of the load (negative before it). `build()` turns samples into a columnar series, saved
as raw/<check>/power.json for the report's chart; `derive()` gives the metrics and
`judge_gpus()` the GPU and airflow verdicts (power capped below the default limit, peak
temperature at or near the GPU's own slowdown threshold, fans, inlet air).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Optional

from pydantic import ConfigDict, Field, StringConstraints
from typing_extensions import TypedDict

from harness import results
from harness.errors import RecordError
from harness.model import BmcReading, Finding, Metric, Outcome
from harness.platform.nvml import GpuLimits, GpuSample
from harness.series import psu as power
from harness.units import CELSIUS, COUNT, PERCENT, WATT

FORMAT_VERSION = 1
FILE_NAME = "power.json"
CAP_TOLERANCE_W = 1.0  # an enforced limit this close to the default is not a cap


@dataclass(frozen=True)
class Sample:
    """One tick: the BMC's reading (or why there is none) and every GPU, at `t` s from the load's start."""

    t: float
    phase: str  # before | load | cooldown
    bmc: Optional[BmcReading] = None
    bmc_error: Optional[str] = None
    gpus: tuple[GpuSample, ...] = ()

    def gpu_sum(self) -> Optional[float]:
        w = [g.power for g in self.gpus]
        return float(sum(x for x in w if x is not None)) if w and None not in w else None


@dataclass(frozen=True)
class PowerSeries:
    """Columns over the ticks; `node_w` is measured, or estimated (GPU power + allowance) when marked."""

    period_s: float
    t: tuple[float, ...]
    phase: tuple[str, ...]
    node_w: tuple[Optional[float], ...]
    gpu_w: Mapping[int, tuple[Optional[float], ...]]
    psu_ok: Mapping[str, tuple[Optional[bool], ...]] = field(default_factory=dict)
    psu_in_w: Mapping[str, tuple[Optional[float], ...]] = field(default_factory=dict)
    redundant: tuple[Optional[bool], ...] = ()
    inlet_c: tuple[Optional[float], ...] = ()
    estimated: bool = False
    allowance_w: Optional[float] = None
    capacity_w: Optional[float] = None
    source: str = ""
    bmc_errors: int = 0

    def to_dict(self) -> dict[str, Any]:
        def r(v: Sequence[Optional[float]]) -> list[Optional[float]]:
            return [None if x is None else round(x, 2) for x in v]

        return {"version": FORMAT_VERSION, "period_s": self.period_s, "t": [round(x, 3) for x in self.t],
                "phase": list(self.phase), "node_w": r(self.node_w),
                "gpu_w": {str(g): r(v) for g, v in self.gpu_w.items()},
                "psu_ok": {k: list(v) for k, v in self.psu_ok.items()},
                "psu_in_w": {k: r(v) for k, v in self.psu_in_w.items()},
                "redundant": list(self.redundant), "inlet_c": r(self.inlet_c), "estimated": self.estimated,
                "allowance_w": self.allowance_w, "capacity_w": self.capacity_w, "source": self.source,
                "bmc_errors": self.bmc_errors}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PowerSeries:
        def opt(v: Any) -> Optional[float]:
            return None if v is None else float(v)

        def col(v: Any) -> tuple[Optional[float], ...]:
            return tuple(opt(x) for x in v)

        def flags(v: Any) -> tuple[Optional[bool], ...]:
            return tuple(None if x is None else bool(x) for x in v)

        return cls(float(d["period_s"]), tuple(float(x) for x in d["t"]), tuple(str(p) for p in d["phase"]),
                   col(d["node_w"]), {int(g): col(v) for g, v in d.get("gpu_w", {}).items()},
                   {str(k): flags(v) for k, v in d.get("psu_ok", {}).items()},
                   {str(k): col(v) for k, v in d.get("psu_in_w", {}).items()},
                   flags(d.get("redundant", [])), col(d.get("inlet_c", [])), bool(d.get("estimated", False)),
                   opt(d.get("allowance_w")), opt(d.get("capacity_w")), str(d.get("source", "")),
                   int(d.get("bmc_errors", 0)))

    def load_values(self, column: Sequence[Optional[float]]) -> list[float]:
        """The known values of a column during the load phase."""
        return [float(v) for p, v in zip(self.phase, column, strict=True) if p == "load" and v is not None
                and math.isfinite(v)]

    def gpu_sum(self) -> tuple[Optional[float], ...]:
        """All GPUs' power per tick (None where a GPU did not answer)."""
        cols = list(self.gpu_w.values())
        if not cols:
            return tuple(None for _ in self.t)
        return tuple(None if any(c[i] is None for c in cols) else float(sum(c[i] or 0.0 for c in cols))
                     for i in range(len(self.t)))


def build(samples: Sequence[Sample], period_s: float, *, allowance_w: Optional[float],
          capacity_w: Optional[float], source: str) -> PowerSeries:
    """The series of the samples. Node power comes from the BMC where any load tick has it;
    otherwise, with an allowance, from GPU power + allowance, and the series is marked estimated."""
    measured = [power.node_power(s.bmc) if s.bmc else None for s in samples]
    estimated = not any(m is not None for m, s in zip(measured, samples, strict=True) if s.phase == "load")
    if estimated:
        node = [None if allowance_w is None or not s.gpus else
                power.estimate([g.power for g in s.gpus], allowance_w) for s in samples]
    else:
        node = measured
    gpus = sorted({g.gpu for s in samples for g in s.gpus})
    gpu_w = {g: tuple(next((x.power for x in s.gpus if x.gpu == g), None) for s in samples) for g in gpus}
    names = list(dict.fromkeys(p.name for s in samples if s.bmc for p in s.bmc.psus))

    def psu_col(name: str, attr: str) -> tuple[Any, ...]:
        return tuple(next((getattr(p, attr) for p in s.bmc.psus if p.name == name), None) if s.bmc else None
                     for s in samples)

    return PowerSeries(
        period_s, tuple(s.t for s in samples), tuple(s.phase for s in samples), tuple(node), gpu_w,
        {n: psu_col(n, "ok") for n in names}, {n: psu_col(n, "power_in_w") for n in names},
        tuple(s.bmc.redundant if s.bmc else None for s in samples),
        tuple(s.bmc.inlet_temp_c if s.bmc else None for s in samples),
        estimated and allowance_w is not None, allowance_w if estimated else None, capacity_w, source,
        sum(1 for s in samples if s.bmc_error))


def save(series: PowerSeries, raw_dir: Path) -> Path:
    raw_dir.mkdir(parents=True, exist_ok=True)
    path = raw_dir / FILE_NAME
    path.write_text(json.dumps(series.to_dict(), separators=(",", ":")), encoding="utf-8")
    return path


_STRICT = ConfigDict(strict=True, allow_inf_nan=False)
Num = Annotated[float, Field(ge=-1e12, le=1e12)]  # no reading is larger; a chart scales by it
Secs = Annotated[float, Field(ge=-1e7, le=1e7)]  # seconds from the start (~115 days)
_Col = list[Optional[Num]]


class _File(TypedDict, total=False):
    """What a saved series may hold (strict: a string where a number belongs is an error)."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]
    version: int
    period_s: Annotated[float, Field(gt=0, le=1e4)]
    t: list[Secs]
    phase: list[str]
    node_w: _Col
    gpu_w: Mapping[Annotated[str, StringConstraints(pattern=r"^[0-9]{1,6}$")], _Col]
    psu_ok: Mapping[str, list[Optional[bool]]]
    psu_in_w: Mapping[str, _Col]
    redundant: list[Optional[bool]]
    inlet_c: _Col
    estimated: bool
    allowance_w: Optional[Num]
    capacity_w: Optional[Num]
    source: str
    bmc_errors: Annotated[int, Field(ge=0)]


_REQUIRED = ("period_s", "t", "phase", "node_w")


def load(path: Path) -> PowerSeries:
    """A saved series: FileNotFoundError when it is missing, RecordError (naming the field) when a
    value in it is wrong or missing, or a column does not have one value per time."""
    data = results.load_validated(path, _File)
    missing = next((k for k in _REQUIRED if k not in data), None)
    if missing:
        raise RecordError(path, missing, "missing")
    n = len(data["t"])
    cols = {"phase": data["phase"], "node_w": data["node_w"],
            **{f"gpu_w.{g}": v for g, v in data.get("gpu_w", {}).items()},
            **{f"psu_ok.{k}": v for k, v in data.get("psu_ok", {}).items()},
            **{f"psu_in_w.{k}": v for k, v in data.get("psu_in_w", {}).items()}}
    results.same_lengths(path, n, cols)
    results.same_lengths(path, n, {"redundant": data.get("redundant", []),
                                   "inlet_c": data.get("inlet_c", [])}, empty_ok=True)
    return PowerSeries.from_dict(data)


# ---------------------------------------------------------------- metrics

def derive(series: PowerSeries, samples: Sequence[Sample], policy: Optional[power.PsuPolicy],
           limits: Sequence[GpuLimits]) -> tuple[Metric, ...]:
    """Node and GPU power over the load, headroom against the usable capacity, PSU and GPU facts."""
    out: list[Metric] = []
    node = series.load_values(series.node_w)
    gsum = series.load_values(series.gpu_sum())
    if node:
        peak = max(node)
        out += [Metric("power.node_peak", peak, WATT),
                Metric("power.node_p99", power.percentile(node, 99), WATT),
                Metric("power.estimated", 1.0 if series.estimated else 0.0, COUNT)]
        if policy is not None:
            out.append(Metric("power.headroom_pct", power.headroom_pct(peak, policy.capacity_w), PERCENT))
    if policy is not None:
        out.append(Metric("power.usable_capacity", policy.capacity_w, WATT))
    if gsum:
        out.append(Metric("power.gpu_peak", max(gsum), WATT))
        pairs = [(g, n) for p, g, n in zip(series.phase, series.gpu_sum(), series.node_w, strict=True)
                 if p == "load" and g is not None and n]
        if pairs:
            share = 100.0 * sum(g for g, _ in pairs) / sum(n for _, n in pairs)
            out.append(Metric("power.gpu_share_pct", share, PERCENT))
    out += _psu_metrics(series, samples)
    inlet = [v for v in series.inlet_c if v is not None]
    if inlet:
        out.append(Metric("bmc.inlet_temp_max", max(inlet), CELSIUS))
    for lim in limits:
        for which, v in (("enforced", lim.power_limit_w), ("default", lim.default_limit_w)):
            if v is not None:
                out.append(Metric("gpu.power_limit", v, WATT, {"gpu": lim.gpu, "which": which}))
    for (gpu, sensor), (margin, _peak, _limit) in temp_margins(samples, limits).items():
        out.append(Metric("gpu.temp_margin", margin, CELSIUS, {"gpu": gpu, "sensor": sensor}))
    return tuple(out)


def _psu_metrics(series: PowerSeries, samples: Sequence[Sample]) -> list[Metric]:
    out: list[Metric] = []
    for name, oks in series.psu_ok.items():
        known = [o for o in oks if o is not None]
        if known:
            out.append(Metric("psu.ok", 1.0 if all(known) else 0.0, COUNT, {"psu": name}))
        ins = series.psu_in_w.get(name)
        peak_in = series.load_values(ins) if ins is not None else []
        if peak_in:
            out.append(Metric("psu.power_in", max(peak_in), WATT, {"psu": name, "stat": "peak"}))
    red = [r for r in series.redundant if r is not None]
    if red:
        out.append(Metric("psu.redundant", 1.0 if all(red) else 0.0, COUNT))
    readings = [s.bmc for s in samples if s.bmc is not None and s.bmc.psus]
    if readings:
        out.append(Metric("power.psus_ok", float(min(power.healthy_count(r) for r in readings)), COUNT))
    return out


def temp_margins(samples: Sequence[Sample], limits: Sequence[GpuLimits]
                 ) -> dict[tuple[int, str], tuple[float, float, float]]:
    """(gpu, 'gpu'|'memory') -> (threshold - peak, peak, threshold) over all samples."""
    peaks: dict[tuple[int, str], float] = {}
    for s in samples:
        for g in s.gpus:
            for sensor, v in (("gpu", g.temp), ("memory", g.mem_temp)):
                if v is not None:
                    peaks[(g.gpu, sensor)] = max(v, peaks.get((g.gpu, sensor), v))
    out = {}
    for lim in limits:
        for sensor, th in (("gpu", lim.slowdown_c), ("memory", lim.mem_max_c)):
            peak = peaks.get((lim.gpu, sensor))
            if th is not None and peak is not None:
                out[(lim.gpu, sensor)] = (th - peak, peak, th)
    return out


# ---------------------------------------------------------------- verdicts

def _ev(metric: str, labels: Mapping[str, Any], outcome: Outcome, measured: Optional[float], unit: str,
        message: str, low: Optional[float] = None, severity: str = "fail",
        high: Optional[float] = None) -> Finding:
    return Finding(metric=metric, labels=labels, outcome=outcome, severity=severity, measured=measured,
                   unit=unit, low=low, high=high, message=message)


def judge_gpus(samples: Sequence[Sample], limits: Sequence[GpuLimits], margin_c: float
               ) -> tuple[Finding, ...]:
    """A GPU power-capped below its default limit fails; a peak at or above the GPU's own slowdown
    (or HBM) threshold fails, within `margin_c` of it warns. One pass row each when all are fine."""
    out: list[Finding] = []
    capped = [lim for lim in limits if lim.power_limit_w is not None and lim.default_limit_w is not None
              and lim.power_limit_w < lim.default_limit_w - CAP_TOLERANCE_W]
    for lim in capped:
        out.append(_ev("gpu.power_limit", {"gpu": lim.gpu, "which": "enforced"}, Outcome.FAIL,
                       lim.power_limit_w, WATT,
                       f"GPU {lim.gpu}: enforced power limit {lim.power_limit_w:.0f} W is below its default "
                       f"{lim.default_limit_w:.0f} W: capped, so this load understates the node's peak",
                       lim.default_limit_w))
    known = [lim for lim in limits if lim.power_limit_w is not None and lim.default_limit_w is not None]
    if known and not capped:
        watts = sorted({f"{lim.power_limit_w:.0f} W" for lim in known})
        out.append(_ev("gpu.power_limit", {"which": "enforced"}, Outcome.PASS,
                       min(lim.power_limit_w or 0.0 for lim in known), WATT,
                       f"{len(known)} GPU(s) at their default power limit ({', '.join(watts)})"))
    margins = temp_margins(samples, limits)
    bad = 0
    for (gpu, sensor), (margin, peak, th) in sorted(margins.items()):
        what = "GPU" if sensor == "gpu" else "HBM"
        limit = "slowdown threshold" if sensor == "gpu" else "memory temperature limit"
        if margin <= 0:
            out.append(_ev("gpu.temp_margin", {"gpu": gpu, "sensor": sensor}, Outcome.FAIL, margin, CELSIUS,
                           f"GPU {gpu}: {what} peak {peak:.0f} C reached its {limit} {th:.0f} C", 0.0))
        elif margin < margin_c:
            out.append(_ev("gpu.temp_margin", {"gpu": gpu, "sensor": sensor}, Outcome.WARN, margin, CELSIUS,
                           f"GPU {gpu}: {what} peak {peak:.0f} C within {margin_c:g} C of its {limit} "
                           f"{th:.0f} C", margin_c, "warn"))
        else:
            continue
        bad += 1
    if margins and not bad:
        worst = min(margins.items(), key=lambda kv: kv[1][0])
        (gpu, sensor), (margin, peak, th) = worst
        what = "" if sensor == "gpu" else " HBM"
        out.append(_ev("gpu.temp_margin", {"sensor": sensor}, Outcome.PASS, margin, CELSIUS,
                       f"{len(margins)} GPU and HBM peaks at least {margin_c:g} C below their thresholds; "
                       f"closest: GPU {gpu}{what} {peak:.0f} C, {margin:.0f} C below {th:.0f} C", margin_c))
    return tuple(out)


def judge_airflow(samples: Sequence[Sample], inlet_max_c: Optional[float]) -> tuple[Finding, ...]:
    """Fans the BMC reports not OK fail; inlet air above `inlet_max_c` warns."""
    out: list[Finding] = []
    bad_fans = next((s for s in samples if s.bmc is not None and s.bmc.fans_ok is False), None)
    if bad_fans is not None:
        out.append(_ev("bmc.fans_ok", {"phase": bad_fans.phase}, Outcome.FAIL, 0.0, COUNT,
                       f"the BMC reports a fan fault {_when(bad_fans)}", 1.0))
    inlet = [(s.bmc.inlet_temp_c, s) for s in samples if s.bmc is not None and s.bmc.inlet_temp_c is not None]
    if inlet and inlet_max_c is not None:
        hot, s = max(inlet, key=lambda x: x[0])
        if hot > inlet_max_c:
            out.append(_ev("bmc.inlet_temp_max", {}, Outcome.WARN, hot, CELSIUS,
                           f"inlet air {hot:.0f} C {_when(s)}, above {inlet_max_c:g} C", None, "warn",
                           inlet_max_c))
    return tuple(out)


def _when(s: Sample) -> str:
    return power.when(power.BmcTick(s.t, s.phase, s.bmc or BmcReading(0.0, None)))
