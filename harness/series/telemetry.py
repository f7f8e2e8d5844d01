"""What a telemetry series says: per-GPU metrics and the judgements telemetry makes itself. Pure.

Metrics per GPU (label `gpu`): peak GPU and HBM temperature, mean and peak power, mean SM clock,
mean utilisation, energy (from the driver's energy counter, or power integrated over time when
the GPU has none), the share of busy samples (utilisation >= LOADED_UTIL; all samples when the
GPU was never busy) spent in each throttling clock-event reason (`gpu.throttle_pct`, label
`reason`, see harness.parsers.clockreasons), HW Slowdown counted only where it persists for
PERSIST_S (NVML reports it also during a P-state or clock change), the best PCIe link seen
(`which` current/max), and how much the PCIe replay and ECC counters grew during the check.

Judgements: a GPU that stopped answering NVML fails (`gpu.lost`); a GPU whose PCIe link stayed
below its maximum while busy (utilisation >= LOADED_UTIL) fails as "trained down". A GPU that
was never busy is not judged on its link: idle GPUs downshift on purpose.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import groupby, pairwise
from typing import TYPE_CHECKING

from harness.model import Evaluation, Metric, Outcome
from harness.parsers import clockreasons
from harness.units import CELSIUS, COUNT, JOULE, MHZ, PERCENT, WATT

if TYPE_CHECKING:
    from harness.run.sampler import Series, Value

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
        add("gpu.sm_clock_mean", sum(sm) / len(sm) if sm else None, MHZ)
        add("gpu.util_mean", sum(util) / len(util) if util else None, PERCENT)
        add("gpu.energy", energy_j(series.t, col("energy_mj"), col("power")), JOULE)
        runs = max(2, math.ceil(PERSIST_S / series.period_s)) if series.period_s > 0 else 2
        for reason, pct in throttle_pct(col("reasons"), col("util"), runs).items():
            add("gpu.throttle_pct", pct, PERCENT, reason=reason)
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


def judge(series: Series) -> tuple[Evaluation, ...]:
    """Telemetry's own verdicts: lost GPUs, and PCIe links below their maximum while busy."""
    out: list[Evaluation] = []
    for g, (t, why) in sorted(series.lost.items()):
        out.append(Evaluation("gpu.lost", {"gpu": g}, Outcome.FAIL, "fail", 1.0, COUNT, None, None, 0.0,
                              "each", f"GPU {g} stopped answering NVML {t:.1f} s into the check: {why}",
                              None, SOURCE))
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
        out.append(Evaluation(metric, {"gpu": g, "which": "current"}, Outcome.FAIL, "fail", float(measured),
                              COUNT, float(want), float(want), None, "each",
                              f"PCIe link trained down: Gen{gen} x{width} of Gen{gmax} x{wmax} "
                              f"while busy ({busy} samples at >= {LOADED_UTIL:g}% utilisation)", None,
                              SOURCE))
    if good:
        links = sorted({f"Gen{gen} x{width}" for _, gen, width in good})
        out.append(Evaluation("gpu.pcie_gen", {"which": "current"}, Outcome.PASS, "fail",
                              float(min(gen for _, gen, _ in good)), COUNT, None, None, None, "min",
                              f"{len(good)} busy GPU(s) at their maximum PCIe link ({', '.join(links)})",
                              None, SOURCE))
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
