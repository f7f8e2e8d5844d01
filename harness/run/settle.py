"""The settle gate: before a check that measures, wait (bounded) until every GPU is idle and near
its idle temperature, so bandwidth tests do not start on GPUs still hot and clocking down from a
burn (a known complaint of DCGM users: nvbandwidth failing right after the burn).

A GPU is settled when its utilisation is at most `max_util` and its temperature is within
`temp_margin` C of its idle temperature: the coolest it was read while idle in this run (the
gate reads the GPUs once at the run's first check, usually before any load). A GPU whose
temperature has stopped falling (less than PLATEAU_DROP_C over PLATEAU_S) counts as settled too:
it has cooled as far as this room lets it. Past `timeout` the check runs anyway; either way the
wait is recorded in the check's details under `settle`. A node without GPUs is not waited for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness import sections
from harness.config.models import Settle
from harness.platform import nvml

if TYPE_CHECKING:
    from harness.config.loader import ResolvedCheck

POLL_S = 1.0
PLATEAU_S = 30.0
PLATEAU_DROP_C = 1.0


@dataclass(frozen=True)
class GpuState:
    """One GPU at one reading of the gate."""

    gpu: int
    temp: float | None
    util: float | None
    idle_temp: float | None
    settled: bool
    why: str  # what the GPU waits for, or why it counts as settled

    def to_dict(self) -> sections.SettleGpu:
        return {"gpu": self.gpu, "temp": self.temp, "util": self.util, "idle_temp": self.idle_temp,
                "settled": self.settled, "why": self.why}


def judge(readings: Sequence[nvml.GpuSample], idle: Mapping[int, float],
          temps: Mapping[int, Sequence[tuple[float, float]]], now: float, s: Settle) -> list[GpuState]:
    """Each GPU's state: `idle` holds idle temperatures, `temps` each GPU's (time, C) readings so far."""
    out = []
    for r in readings:
        if r.error:  # a lost GPU cannot settle; the check's own telemetry reports it
            out.append(GpuState(r.gpu, None, None, idle.get(r.gpu), True, f"not answering: {r.error}"))
            continue
        base = idle.get(r.gpu)
        if r.util is not None and r.util > s.max_util:
            out.append(GpuState(r.gpu, r.temp, r.util, base, False, f"busy ({r.util:g}%)"))
        elif r.temp is None:
            out.append(GpuState(r.gpu, None, r.util, base, True, "idle, no temperature reading"))
        elif base is None or r.temp <= base + s.temp_margin:
            out.append(GpuState(r.gpu, r.temp, r.util, base, True, "idle and near its idle temperature"))
        elif _plateau(temps.get(r.gpu, ()), now):
            out.append(GpuState(r.gpu, r.temp, r.util, base, True,
                                f"stopped cooling ({PLATEAU_DROP_C:g} C in {PLATEAU_S:g} s)"))
        else:
            out.append(GpuState(r.gpu, r.temp, r.util, base, False,
                                f"cooling: {r.temp:g} C, idle {base:g} C + {s.temp_margin:g}"))
    return out


def _plateau(series: Sequence[tuple[float, float]], now: float) -> bool:
    """True when the readings span PLATEAU_S and the temperature fell less than PLATEAU_DROP_C over it."""
    if not series or now - series[0][0] < PLATEAU_S:
        return False
    window = [c for t, c in series if t >= now - PLATEAU_S]
    return bool(window) and max(window) - window[-1] < PLATEAU_DROP_C


def wants(check: ResolvedCheck) -> bool:
    """Whether the gate runs before this check: the suite decides, else the kind (settle=True)."""
    return check.settle.enabled if check.settle.enabled is not None else check.kind.settle


class Gate:
    """The settle gate of one run; remembers each GPU's idle temperature across checks."""

    def __init__(self, session: Callable[[], nvml.NvmlSession] = nvml.NvmlSession,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 poll_s: float = POLL_S) -> None:
        self.session, self.clock, self.sleep, self.poll_s = session, clock, sleep, poll_s
        self.idle: dict[int, float] = {}
        self.baseline_taken = False

    def _learn(self, readings: Sequence[nvml.GpuSample], s: Settle) -> None:
        for r in readings:
            if r.temp is not None and not r.error and (r.util is None or r.util <= s.max_util):
                self.idle[r.gpu] = min(r.temp, self.idle.get(r.gpu, r.temp))

    def before(self, check: ResolvedCheck, inventory: Mapping[str, Any], stop: Callable[[], bool],
               note: Callable[[str], None]) -> sections.Details:
        """Wait before `check` when it settles; returns the details to record ({} when it does not)."""
        if not inventory.get("gpus"):
            return {"settle": {"skipped": "no GPUs on this node"}} if wants(check) else {}
        if not wants(check) and self.baseline_taken:
            return {}
        try:
            nv = self.session()
        except nvml.NvmlUnavailable as e:
            self.baseline_taken = True
            return {"settle": {"skipped": f"cannot read the GPUs: {e}"}} if wants(check) else {}
        try:
            if not wants(check):  # the run's first check: learn the idle temperatures, wait for nothing
                self._learn(nv.sample(), check.settle)
                self.baseline_taken = True
                return {}
            self.baseline_taken = True
            return {"settle": self._wait(nv, check.settle, stop, note)}
        finally:
            nv.close()

    def _wait(self, nv: nvml.NvmlSession, s: Settle, stop: Callable[[], bool],
              note: Callable[[str], None]) -> sections.Settle:
        t0 = self.clock()
        temps: dict[int, list[tuple[float, float]]] = {}
        noted = False
        while True:
            now = self.clock() - t0
            readings = nv.sample()
            self._learn(readings, s)
            for r in readings:
                if r.temp is not None and not r.error:
                    temps.setdefault(r.gpu, []).append((now, r.temp))
            states = judge(readings, self.idle, temps, now, s)
            waiting = [g for g in states if not g.settled]
            done: sections.Settle = {"waited_s": round(now, 1), "timeout_s": s.timeout,
                                     "temp_margin_c": s.temp_margin, "max_util_pct": s.max_util,
                                     "gpus": [g.to_dict() for g in states]}
            if not waiting:
                return {"settled": True, **done}
            if stop():
                return {"settled": False, "reason": "interrupted", **done}
            if now >= s.timeout:
                text = "; ".join(f"GPU {g.gpu} {g.why}" for g in waiting)
                note(f"GPUs did not settle in {s.timeout:g} s ({text}): measuring anyway")
                return {"settled": False, "reason": f"timed out after {s.timeout:g} s", **done}
            if not noted:
                note(f"waiting up to {s.timeout:g} s for the GPUs to settle: "
                     + "; ".join(f"GPU {g.gpu} {g.why}" for g in waiting[:4]))
                noted = True
            self.sleep(max(0.0, min(self.poll_s, s.timeout - now)))
