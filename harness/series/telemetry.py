"""GPU telemetry of one check, pure: the series, what it says, and the rules it brings.

The series are columnar: one time axis, and per GPU one list per field, None where NVML did not answer
(`Series`; saved by the sampler thread in harness.run.sampler, read back with `load`).

Metrics per GPU (label `gpu`): peak GPU and HBM temperature, mean and peak power, mean SM clock, mean
utilisation, energy (from the driver's energy counter, or power integrated over time when the GPU has
none), the peak of NVML's 1-s averaged power (`gpu.power_avg_max`: what a power limit is enforced on;
`gpu.power_max` is the instantaneous peak, for PSU headroom), the share of busy samples (utilisation >=
LOADED_UTIL; all samples when the GPU was never busy) spent in each throttling clock-event reason
(`gpu.throttle_pct`, label `reason`, see harness.parsers.clockreasons), HW Slowdown counted only where
it persists for PERSIST_S (NVML reports it also during a P-state or clock change), how many separate HW
Slowdown runs the busy GPU had however short (`gpu.hw_slowdown_episodes`: NVML's "power draw too high,
Fast Trigger protection" comes in sub-second bursts that a 2 Hz share erases), the best PCIe link seen
(`which` current/max), and how much the PCIe replay and ECC counters grew during the check.

Findings (judged by compare.judge like every kind's): a GPU that stopped answering NVML fails
(`gpu.lost`); a GPU whose PCIe link stayed below its maximum while busy (utilisation >= LOADED_UTIL)
fails as "trained down". A GPU that was never busy is not judged on its link: idle GPUs downshift on
purpose. Kinds that take TelemetryParams add the sibling rule on peak temperature (`own_rules`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from itertools import groupby, pairwise
from pathlib import Path
from typing import Annotated, Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from typing_extensions import TypedDict

from harness import results, siblings
from harness.model import Finding, Metric, Outcome
from harness.parsers import clockreasons
from harness.platform import nvml
from harness.units import CELSIUS, COUNT, JOULE, MHZ, PERCENT, WATT

DEFAULT_PERIOD_S = 1.0
FORMAT_VERSION = 1
FIELDS: tuple[str, ...] = tuple(f.name for f in fields(nvml.GpuSample) if f.name not in ("gpu", "error"))
Value = Union[float, int, None]


class TelemetryParams(BaseModel):
    """Params of kinds that tune the telemetry run alongside them; a kind's params derive from
    this and from checks.base.Params (same config: unknown keys are errors, values immutable)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    telemetry_period: float = Field(DEFAULT_PERIOD_S, ge=0.05, le=60.0,
                                    description="seconds between telemetry samples (0.1 = 10 Hz)")
    sibling_temp_offset: Optional[float] = Field(
        10.0, gt=0, le=50, description="a GPU whose peak temperature is more than this many C above the "
        "median of its siblings (3 or more) fails; null to turn off")
    sibling_temp_tolerance: Optional[float] = Field(
        None, gt=0, lt=1, description="instead of the offset: a fraction above the median (a fraction "
        "of degrees Celsius allows more on a hot node than on a cool one)")


def own_rules(params: Any) -> list[siblings.SiblingRule]:
    """The telemetry's rule from a kind's TelemetryParams (judged with the check's, listed by --dry-run)."""
    if not isinstance(params, TelemetryParams):
        return []
    if params.sibling_temp_tolerance is not None:
        return [siblings.SiblingRule("gpu.temp_max", ("gpu",), params.sibling_temp_tolerance, "lower")]
    if params.sibling_temp_offset is None:
        return []
    return [siblings.SiblingRule("gpu.temp_max", ("gpu",), None, "lower", offset=params.sibling_temp_offset)]


def verdicts(params: Any) -> list[str]:
    """The telemetry's built-in verdicts, for --dry-run: only kinds that take TelemetryParams list them
    (every check samples when the node has GPUs, but these are the ones that load them)."""
    if not isinstance(params, TelemetryParams):
        return []
    return ["a GPU that stops answering NVML during the check fails (telemetry)",
            "a busy GPU's PCIe link below its maximum generation or width fails (telemetry)"]


@dataclass(frozen=True)
class Series:
    """Telemetry of one check: shared time axis (s from the start) and per-GPU columns."""

    period_s: float
    t: tuple[float, ...]
    gpus: Mapping[int, Mapping[str, tuple[Value, ...]]]
    lost: Mapping[int, tuple[float, str]] = field(default_factory=dict)  # gpu -> (t, why)
    overruns: int = 0  # ticks skipped because a sample took longer than the period
    sample_cost_s: float = 0.0  # mean wall time of one sample of all GPUs

    def column(self, gpu: int, name: str) -> tuple[Value, ...]:
        return self.gpus.get(gpu, {}).get(name, ())

    def to_dict(self) -> dict[str, Any]:
        return {"version": FORMAT_VERSION, "period_s": self.period_s, "t": [round(x, 3) for x in self.t],
                "gpus": {str(g): {k: list(v) for k, v in cols.items() if any(x is not None for x in v)}
                         for g, cols in self.gpus.items()},
                "lost": {str(g): {"t": round(t, 3), "why": why} for g, (t, why) in self.lost.items()},
                "overruns": self.overruns, "sample_cost_s": round(self.sample_cost_s, 6)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Series:
        t = tuple(float(x) for x in d.get("t", []))
        gpus = {int(g): {k: tuple(v) for k, v in cols.items()} for g, cols in d.get("gpus", {}).items()}
        lost = {int(g): (float(v["t"]), str(v["why"])) for g, v in d.get("lost", {}).items()}
        return cls(float(d.get("period_s", DEFAULT_PERIOD_S)), t, gpus, lost,
                   int(d.get("overruns", 0)), float(d.get("sample_cost_s", 0.0)))


_STRICT = ConfigDict(strict=True, allow_inf_nan=False)
Num = Annotated[float, Field(ge=-1e12, le=1e12)]  # no reading is larger; a chart scales by it
Secs = Annotated[float, Field(ge=-1e7, le=1e7)]  # seconds from the start (~115 days)
GpuKey = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,6}$")]


class _Lost(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    t: Secs
    why: str


class _File(TypedDict, total=False):
    """What a saved series may hold (strict: a string where a number belongs is an error)."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]
    version: int
    period_s: Annotated[float, Field(gt=0, le=1e4)]
    t: list[Secs]
    gpus: Mapping[GpuKey, Mapping[str, list[Union[Annotated[int, Field(ge=-2**63, lt=2**64)], Num, None]]]]
    lost: Mapping[GpuKey, _Lost]
    overruns: Annotated[int, Field(ge=0)]
    sample_cost_s: Annotated[float, Field(ge=0, le=1e4)]


def load(path: Path) -> Series:
    """A saved series: FileNotFoundError when it is missing, RecordError (naming the field) when a
    value in it is wrong or a column does not have one value per time."""
    data = results.load_validated(path, _File)
    n = len(data.get("t", []))
    for g, cols in data.get("gpus", {}).items():
        results.same_lengths(path, n, {f"gpus.{g}.{k}": v for k, v in cols.items()})
    return Series.from_dict(data)


LOADED_UTIL = 50.0  # % utilisation from which a GPU counts as busy (link and throttle judgements)
PERSIST_S = 0.5  # HW Slowdown shorter than this (and than 2 samples) is a P-state change, not a fault
TRANSIENT = clockreasons.BITS["hw_slowdown"]
SOURCE = "telemetry"
REASONS: dict[str, int] = {**{r: clockreasons.BITS[r] for r in clockreasons.THROTTLING},
                           **clockreasons.GROUPS}


def _vals(col: Sequence[Value]) -> list[float]:
    return [float(x) for x in col if x is not None and math.isfinite(float(x))]


def energy_j(t: Sequence[float], energy_mj: Sequence[Value], power_w: Sequence[Value]) -> float | None:
    """Joules used: the energy counter's growth, else the power samples integrated (trapezoids)."""
    counter = [(i, float(e)) for i, e in enumerate(energy_mj) if e is not None]
    if len(counter) >= 2 and counter[-1][1] >= counter[0][1]:
        return (counter[-1][1] - counter[0][1]) / 1000.0
    pts = [(t[i], float(p)) for i, p in enumerate(power_w) if p is not None and i < len(t)]
    if len(pts) < 2:
        return None
    return sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in pairwise(pts))


def persistent(masks: Sequence[Value], bits: int, runs: int) -> list[int | None]:
    """The masks with `bits` cleared wherever they were not set in at least `runs` consecutive samples."""
    known = [None if m is None else int(m) for m in masks]
    out = list(known)
    for on, grp in groupby(range(len(known)), key=lambda k: bool((known[k] or 0) & bits)):
        idx = list(grp)
        if on and len(idx) < runs:
            for k in idx:
                out[k] = (known[k] or 0) & ~bits
    return out


def throttle_pct(masks: Sequence[Value], util: Sequence[Value] = (), runs: int = 1) -> dict[str, float]:
    """Percent of busy samples (utilisation >= LOADED_UTIL; every sample with a known bitmask when
    the GPU was never busy) in which each throttling reason was set; HW Slowdown counts only in
    runs of at least `runs` samples."""
    cleaned = persistent(masks, TRANSIENT, runs)
    known = [(i, m) for i, m in enumerate(cleaned) if m is not None]
    busy_at = {i for i, u in enumerate(util) if u is not None and float(u) >= LOADED_UTIL}
    busy = [m for i, m in known if i in busy_at]
    window = busy or [m for _, m in known]
    if not window:
        return {}
    return {r: 100.0 * sum(1 for m in window if m & bit) / len(window) for r, bit in REASONS.items()}


def episodes(masks: Sequence[Value], bits: int, util: Sequence[Value] = ()) -> int | None:
    """How many separate runs of samples had any of `bits` set, however short, counted over the busy
    samples (every sample when the GPU was never busy); None when no bitmask is known."""
    busy = [u is not None and float(u) >= LOADED_UTIL for u in util]
    known = [(i, int(m)) for i, m in enumerate(masks) if m is not None]
    if not known:
        return None
    window = [(i, m) for i, m in known if i < len(busy) and busy[i]] or known
    runs, prev = 0, None
    for i, m in window:
        on = bool(m & bits)
        if on and (prev is None or not prev[1] or prev[0] != i - 1):
            runs += 1
        prev = (i, on)
    return runs


def _power_avg(cols: Mapping[str, tuple[Value, ...]]) -> list[float]:
    """The 1-s averaged power samples: NVML's power_avg, else `power` where it was not instantaneous."""
    avg = _vals(cols.get("power_avg", ()))
    if avg:
        return avg
    instant = cols.get("power_instant", ())
    return _vals([p for i, p in enumerate(cols.get("power", ()))
                  if not (i < len(instant) and instant[i])])


def _growth(col: Sequence[Value]) -> float | None:
    v = _vals(col)
    return max(0.0, v[-1] - v[0]) if len(v) >= 2 else None


def derive(series: Series) -> tuple[Metric, ...]:
    """The per-GPU metrics of a series (nothing for a field NVML never answered)."""
    out: list[Metric] = []
    for g in sorted(series.gpus):
        cols = series.gpus[g]
        lab = {"gpu": g}

        def col(name: str, cols: Mapping[str, tuple[Value, ...]] = cols) -> tuple[Value, ...]:
            return cols.get(name, ())

        def add(name: str, value: float | None, unit: str, lab: dict[str, int] = lab, **extra: str) -> None:
            if value is not None:
                out.append(Metric(name, value, unit, {**lab, **extra}))

        temp, mem, power, sm, util = (_vals(col(k))
                                      for k in ("temp", "mem_temp", "power", "sm_clock", "util"))
        add("gpu.temp_max", max(temp) if temp else None, CELSIUS)
        add("gpu.mem_temp_max", max(mem) if mem else None, CELSIUS)
        add("gpu.power_mean", sum(power) / len(power) if power else None, WATT)
        add("gpu.power_max", max(power) if power else None, WATT)
        avg = _power_avg(cols)
        add("gpu.power_avg_max", max(avg) if avg else None, WATT)
        add("gpu.sm_clock_mean", sum(sm) / len(sm) if sm else None, MHZ)
        add("gpu.util_mean", sum(util) / len(util) if util else None, PERCENT)
        add("gpu.energy", energy_j(series.t, col("energy_mj"), col("power")), JOULE)
        runs = max(2, math.ceil(PERSIST_S / series.period_s)) if series.period_s > 0 else 2
        for reason, pct in throttle_pct(col("reasons"), col("util"), runs).items():
            add("gpu.throttle_pct", pct, PERCENT, reason=reason)
        n = episodes(col("reasons"), TRANSIENT, col("util"))
        add("gpu.hw_slowdown_episodes", None if n is None else float(n), COUNT)
        for key, name in (("pcie_gen", "gpu.pcie_gen"), ("pcie_width", "gpu.pcie_width")):
            cur, top = _vals(col(key)), _vals(col(f"{key}_max"))
            add(name, max(cur) if cur else None, COUNT, which="current")
            add(name, max(top) if top else None, COUNT, which="max")
        add("gpu.pcie_replays", _growth(col("pcie_replays")), COUNT)
        add("gpu.ecc_corrected", _growth(col("ecc_corrected")), COUNT, scope="during_check")
        add("gpu.ecc_uncorrected", _growth(col("ecc_uncorrected")), COUNT, scope="during_check")
        if g in series.lost:
            add("gpu.lost", 1.0, COUNT)
    return tuple(out)


def link_under_load(series: Series, gpu: int) -> tuple[int, int, int, int, int] | None:
    """(gen, gen max, width, width max, busy samples) over the samples where the GPU was busy."""
    util = series.column(gpu, "util")
    busy = [i for i, u in enumerate(util) if u is not None and float(u) >= LOADED_UTIL]
    if not busy:
        return None

    def best(name: str) -> int | None:
        v = [series.column(gpu, name)[i] for i in busy if i < len(series.column(gpu, name))]
        known = [int(x) for x in v if x is not None]
        return max(known) if known else None

    gen, gmax = best("pcie_gen"), best("pcie_gen_max")
    width, wmax = best("pcie_width"), best("pcie_width_max")
    if None in (gen, gmax, width, wmax):
        return None
    return gen, gmax, width, wmax, len(busy)  # type: ignore[return-value]


def findings(series: Series) -> tuple[Finding, ...]:
    """Telemetry's own verdicts: lost GPUs, and PCIe links below their maximum while busy."""
    out: list[Finding] = []
    for g, (t, why) in sorted(series.lost.items()):
        out.append(Finding(metric="gpu.lost", labels={"gpu": g}, outcome=Outcome.FAIL, measured=1.0,
                           high=0.0, message=f"GPU {g} stopped answering NVML {t:.1f} s into the check: "
                           f"{why}", source=SOURCE))
    good: list[tuple[int, int, int]] = []
    for g in sorted(series.gpus):
        link = link_under_load(series, g)
        if link is None:
            continue
        gen, gmax, width, wmax, busy = link
        if gen >= gmax and width >= wmax:
            good.append((g, gen, width))
            continue
        metric, measured, want = (("gpu.pcie_gen", gen, gmax) if gen < gmax
                                  else ("gpu.pcie_width", width, wmax))
        out.append(Finding(metric=metric, labels={"gpu": g, "which": "current"}, outcome=Outcome.FAIL,
                           measured=float(measured), reference=float(want), low=float(want),
                           message=f"PCIe link trained down: Gen{gen} x{width} of Gen{gmax} x{wmax} "
                           f"while busy ({busy} samples at >= {LOADED_UTIL:g}% utilisation)",
                           source=SOURCE))
    if good:
        links = sorted({f"Gen{gen} x{width}" for _, gen, width in good})
        out.append(Finding(metric="gpu.pcie_gen", labels={"which": "current"}, outcome=Outcome.PASS,
                           measured=float(min(gen for _, gen, _ in good)), reduce="min",
                           message=f"{len(good)} busy GPU(s) at their maximum PCIe link "
                           f"({', '.join(links)})", source=SOURCE))
    return tuple(out)


def intervals(series: Series, gpu: int, bits: int) -> list[tuple[float, float]]:
    """Time spans (s) in which any of `bits` was set in the GPU's clock-event reasons."""
    masks, t = series.column(gpu, "reasons"), series.t
    spans: list[tuple[float, float]] = []
    start: float | None = None
    for i, m in enumerate(masks[: len(t)]):
        on = m is not None and bool(int(m) & bits)
        end = t[i + 1] if i + 1 < len(t) else t[i] + series.period_s
        if on and start is None:
            start = t[i]
        if start is not None and (not on or i == len(t) - 1):
            spans.append((start, end if on else t[i]))
            start = None
    return spans
