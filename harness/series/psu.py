"""Node power against PSU capacity, and PSU state, judged. Pure: no I/O, no clock.

Usable capacity counts only the PSUs that carry the load when the redundant ones fail:
`N+N` -> half of them, `N+k` -> all but k, `A+B` (DGX H100: `4+2`) -> A, `none` -> all.
`power.headroom_pct` = 100 x (1 - peak / usable capacity). Where no BMC reports node power,
it is estimated as the GPUs' power plus a stated allowance for everything else, and marked so.
PSU judgements: a PSU not OK or redundancy lost before or during the load, and fewer healthy
PSUs than the policy needs, each fail with the PSU's name and when it happened. Only a PSU known
to be OK counts as healthy: one whose state is unknown (no Status, or OK with no input power or
line voltage: unplugged or a dead feed) counts toward neither capacity nor redundancy, and every
verdict that counts PSUs names it with the BMC's words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, cast

from harness.model import BmcReading, Finding, Outcome
from harness.sections import Psu
from harness.units import COUNT

PHASES = ("before", "load", "cooldown")
_SPLIT = re.compile(r"^(\d+)\+(\d+)$")
_N_PLUS = re.compile(r"^N\+(\d+)$")


def usable_psus(count: int, redundancy: str) -> int:
    """How many of `count` PSUs carry the load under `redundancy`; ValueError when they do not fit."""
    if count < 1:
        raise ValueError(f"PSU count must be at least 1, got {count}")
    if redundancy == "none":
        return count
    if redundancy == "N+N":
        if count % 2:
            raise ValueError(f"N+N redundancy needs an even PSU count, got {count}")
        return count // 2
    m = _N_PLUS.match(redundancy)
    if m:
        spare = int(m.group(1))
        if spare >= count:
            raise ValueError(f"{redundancy} redundancy needs more than {spare} PSUs, got {count}")
        return count - spare
    m = _SPLIT.match(redundancy)
    if m:
        carry, spare = int(m.group(1)), int(m.group(2))
        if carry < 1 or carry + spare != count:
            raise ValueError(f"{redundancy} redundancy does not fit {count} PSUs")
        return carry
    raise ValueError(f"unknown PSU redundancy {redundancy!r}; use N+N, N+1, 4+2 or none")


@dataclass(frozen=True)
class PsuPolicy:
    """The profile's PSUs: how many, their rating, and which of them may fail without loss."""

    count: int
    rating_w: float
    redundancy: str
    max_system_power_w: Optional[float] = None

    def __post_init__(self) -> None:
        usable_psus(self.count, self.redundancy)  # raises on a policy that cannot hold
        if not (self.rating_w > 0 and math.isfinite(self.rating_w)):
            raise ValueError(f"PSU rating must be a positive number of W, got {self.rating_w}")

    @property
    def usable(self) -> int:
        return usable_psus(self.count, self.redundancy)

    @property
    def capacity_w(self) -> float:
        """Power the node may draw with every redundant PSU failed."""
        return self.usable * self.rating_w

    def describe(self) -> str:
        return (f"{self.count} x {self.rating_w:,.0f} W PSUs, {self.redundancy}: {self.usable} carry the "
                f"load = {self.capacity_w:,.0f} W usable")


def policy_from_hardware(hardware: Mapping[str, Any]) -> Optional[PsuPolicy]:
    """The PSU policy of a profile's hardware block (as a dict), or None when it names no PSUs."""
    psu = hardware.get("psu")
    if not isinstance(psu, Mapping):
        return None
    return PsuPolicy(int(psu["count"]), float(psu["rating_w"]), str(psu.get("redundancy", "N+1")),
                     None if psu.get("max_system_power_w") is None else float(psu["max_system_power_w"]))


def allowance_from_hardware(hardware: Mapping[str, Any]) -> Optional[float]:
    """Non-GPU power for an estimate: the profile's max system power minus GPUs x TDP, if stated."""
    psu, gpu = hardware.get("psu"), hardware.get("gpu")
    tdp = hardware.get("gpu_tdp_w")
    top = psu.get("max_system_power_w") if isinstance(psu, Mapping) else None
    n = gpu.get("count") if isinstance(gpu, Mapping) else None
    if top is None or tdp is None or not n:
        return None
    rest = float(top) - int(n) * float(tdp)
    return rest if rest > 0 else None


def headroom_pct(peak_w: float, capacity_w: float) -> float:
    """100 x (1 - peak / capacity): 20 means the peak used 80% of the usable capacity."""
    if capacity_w <= 0:
        raise ValueError(f"capacity must be positive, got {capacity_w}")
    return 100.0 * (1.0 - peak_w / capacity_w)


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between ranks; ValueError when empty."""
    v = sorted(values)
    if not v:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    pos = (len(v) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def node_power(reading: BmcReading) -> Optional[float]:
    """Node input power of one reading: the BMC's figure, else the sum of every PSU's input power."""
    if reading.node_power_w is not None:
        return reading.node_power_w
    ins = [p.power_in_w for p in reading.psus]
    if ins and all(x is not None for x in ins):
        return float(sum(x for x in ins if x is not None))
    return None


def estimate(gpu_w: Sequence[Optional[float]], allowance_w: float) -> Optional[float]:
    """Estimated node power: every GPU's power plus the allowance; None when a GPU did not answer."""
    if not gpu_w or any(w is None for w in gpu_w):
        return None
    return float(sum(w for w in gpu_w if w is not None)) + allowance_w


# ---------------------------------------------------------------- PSU state

@dataclass(frozen=True)
class BmcTick:
    """One BMC reading with its place in the check: seconds from the load's start and the phase."""

    t: float
    phase: str  # before | load | cooldown
    reading: BmcReading


def _ev(metric: str, labels: Mapping[str, Any], outcome: Outcome, measured: Optional[float],
        message: str, low: Optional[float] = None) -> Finding:
    return Finding(metric=metric, labels=labels, outcome=outcome, measured=measured, unit=COUNT, low=low,
                   message=message)


def when(tick: BmcTick) -> str:
    """'before the load', '41.0 s into the load' or 'in the cool-down (...)'."""
    if tick.phase == "before":
        return "before the load"
    if tick.phase == "load":
        return f"{tick.t:.1f} s into the load"
    return f"in the cool-down ({tick.t:.1f} s after the load started)"


def healthy_count(reading: BmcReading) -> int:
    return sum(1 for p in reading.psus if p.ok is True)


def not_counted(reading: BmcReading) -> str:
    """'; not counted: PSU2 (State Enabled, Health OK; reports OK but no input ...)' or ''."""
    unknown = [f"{p.name} ({p.status})" if p.status else p.name for p in reading.psus if p.ok is None]
    return f"; not counted: {', '.join(unknown)}" if unknown else ""


def judge_psus(ticks: Sequence[BmcTick], policy: Optional[PsuPolicy]) -> tuple[Finding, ...]:
    """PSU verdicts: each PSU not OK (first time, with when and why), redundancy lost, too few PSUs."""
    ticks = [k for k in ticks if k.reading.psus or k.reading.redundant is not None]
    if not ticks:
        return ()
    out: list[Finding] = []
    failed: set[str] = set()
    for k in ticks:
        for p in k.reading.psus:
            if p.ok is False and p.name not in failed:
                failed.add(p.name)
                why = f": {p.status}" if p.status else ""
                verb = "not OK" if k.phase == "before" else "failed"
                out.append(_ev("psu.ok", {"psu": p.name, "phase": k.phase}, Outcome.FAIL, 0.0,
                               f"{p.name} {verb} {when(k)}{why}", 1.0))
    lost = next((k for k in ticks if k.reading.redundant is False), None)
    if lost is not None:
        out.append(_ev("psu.redundant", {"phase": lost.phase}, Outcome.FAIL, 0.0,
                       f"the BMC reports PSU redundancy lost {when(lost)}", 1.0))
    seen = {p.name for k in ticks for p in k.reading.psus}
    worst = min(ticks, key=lambda k: healthy_count(k.reading)) if seen else None
    if policy is not None and worst is not None:
        n = healthy_count(worst.reading)
        if len(seen) < policy.count:
            out.append(_ev("power.psus_ok", {}, Outcome.FAIL, float(n),
                           f"the BMC lists {len(seen)} PSUs ({', '.join(sorted(seen))}); the profile has "
                           f"{policy.count}", float(policy.count)))
        elif n < policy.usable:
            out.append(_ev("power.psus_ok", {}, Outcome.FAIL, float(n),
                           f"{n} of {policy.count} PSUs healthy {when(worst)}: fewer than the "
                           f"{policy.usable} that carry the load ({policy.redundancy})"
                           f"{not_counted(worst.reading)}", float(policy.count)))
        elif n < policy.count:
            out.append(_ev("power.psus_ok", {}, Outcome.FAIL, float(n),
                           f"{n} of {policy.count} PSUs healthy {when(worst)}: {policy.redundancy} "
                           f"redundancy not intact{not_counted(worst.reading)}", float(policy.count)))
    if not out and seen:
        phases = sorted({k.phase for k in ticks}, key=PHASES.index)
        unknown = sorted({f"{p.name} ({p.status})" if p.status else p.name
                          for k in ticks for p in k.reading.psus if p.ok is None})
        msg = (f"{len(seen) - len(unknown)} of {len(seen)} PSUs OK in every reading "
               f"({', '.join(phases)})")
        if any(k.reading.redundant is True for k in ticks):
            msg += "; redundancy kept"
        if unknown:
            msg += f"; state unknown: {', '.join(unknown)}"
        n = min(healthy_count(k.reading) for k in ticks)
        out.append(_ev("power.psus_ok", {}, Outcome.PASS, float(n), msg,
                       float(policy.count) if policy else None))
    return tuple(out)


def psu_table(ticks: Sequence[BmcTick]) -> list[Psu]:
    """Per PSU: state before and worst during/after the load, peak input and output power, status."""
    rows: dict[str, dict[str, Any]] = {}
    for k in ticks:
        for p in k.reading.psus:
            r = rows.setdefault(p.name, {"psu": p.name, "before": None, "during": None, "peak_in_w": None,
                                         "peak_out_w": None, "capacity_w": p.capacity_w, "status": ""})
            field = "before" if k.phase == "before" else "during"
            if p.ok is not None:
                r[field] = p.ok if r[field] is None else (r[field] and p.ok)
            for key, v in (("peak_in_w", p.power_in_w), ("peak_out_w", p.power_out_w)):
                if v is not None and k.phase != "before":
                    r[key] = v if r[key] is None else max(r[key], v)
            if p.status and (p.ok is False or not r["status"]):
                r["status"] = p.status
    return [cast(Psu, r) for r in rows.values()]
