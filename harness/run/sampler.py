"""GPU telemetry alongside a check: the sampler thread and the runner's hook. The series, what it
says and its rules are pure and live in harness.series.telemetry.

`observe(kind, params, ctx)` runs one check with the sampler going (when the node has GPUs),
saves the series to raw/<check>/telemetry.json, and adds the derived per-GPU metrics and the
telemetry's findings (a GPU that stopped answering, a PCIe link below its maximum under load)
to the check's output. It judges nothing: the runner's compare.judge does, with the telemetry's
sibling rule on peak temperature among the check's own rules (PlannedCheck.own_rules).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness import sections
from harness.checks.base import CheckContext, CheckKind, CheckOutput
from harness.platform import nvml
from harness.series import telemetry as telemetry_metrics
from harness.series.telemetry import DEFAULT_PERIOD_S, FIELDS, Series, TelemetryParams, Value


class Sampler:
    """Reads all GPUs every `period_s` in a thread. Late ticks are skipped, never bunched up."""

    def __init__(self, read: Callable[[], Sequence[nvml.GpuSample]], period_s: float = DEFAULT_PERIOD_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.read, self.period_s, self.clock = read, period_s, clock
        self._t: list[float] = []
        self._cols: dict[int, dict[str, list[Value]]] = {}
        self._lost: dict[int, tuple[float, str]] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._cost = 0.0
        self._overruns = 0
        self.error: str | None = None  # why sampling stopped early, if it did

    def start(self) -> Sampler:
        self._t0 = self.clock()
        self._thread = threading.Thread(target=self._loop, name="harness-telemetry", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        due = self._t0
        while True:
            self._take()
            due += self.period_s
            now = self.clock()
            if now > due:  # the sample overran its slot: skip the missed ticks
                missed = int((now - due) / self.period_s) + 1
                self._overruns += missed
                due += missed * self.period_s
            if self._stop.wait(max(0.0, due - now)):
                return

    def _take(self) -> None:
        start = self.clock()
        try:
            samples = self.read()
        except Exception as e:  # NVML itself broke: keep what we have, say why
            self.error = f"{type(e).__name__}: {e}"
            self._stop.set()
            return
        now = self.clock()
        with self._lock:
            self._cost += now - start
            t = start - self._t0
            n = len(self._t)
            self._t.append(t)
            for s in samples:
                cols = self._cols.setdefault(s.gpu, {k: [None] * n for k in FIELDS})
                for k in FIELDS:
                    v = getattr(s, k)
                    cols[k].append(int(v) if isinstance(v, bool) else v)  # flags as 1/0: columns are numbers
                if s.error and s.gpu not in self._lost:
                    self._lost[s.gpu] = (t, s.error)
            for cols in self._cols.values():  # a GPU missing from this reading gets a gap
                for k in FIELDS:
                    if len(cols[k]) < n + 1:
                        cols[k].append(None)

    def stop(self) -> Series:
        """Stop the thread, take one last sample, and return the series."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.error is None:
            self._take()
        with self._lock:
            n = len(self._t)
            gpus = {g: {k: tuple(v) for k, v in cols.items()} for g, cols in sorted(self._cols.items())}
            return Series(self.period_s, tuple(self._t), gpus, dict(self._lost), self._overruns,
                          self._cost / n if n else 0.0)


def save(series: Series, raw_dir: Path) -> Path:
    """Write the series as raw_dir/telemetry.json (telemetry-2.json, ... when one exists)."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    path, n = raw_dir / "telemetry.json", 1
    while path.exists():
        n += 1
        path = raw_dir / f"telemetry-{n}.json"
    path.write_text(json.dumps(series.to_dict(), separators=(",", ":")), encoding="utf-8")
    return path


def observe(kind: CheckKind, params: Any, ctx: CheckContext,
            session: Callable[[], nvml.NvmlSession] = nvml.NvmlSession) -> CheckOutput:
    """Run `kind` with telemetry sampled alongside when the node has GPUs; add what it shows."""
    if not ctx.inventory.get("gpus"):
        return kind.run(params, ctx)
    tp = params if isinstance(params, TelemetryParams) else None
    period = tp.telemetry_period if tp else DEFAULT_PERIOD_S
    try:
        nv = session()
    except nvml.NvmlUnavailable as e:
        ctx.log.warning("telemetry off for %s: %s", ctx.check_id, e)
        out = kind.run(params, ctx)
        return replace(out, details={**out.details, "telemetry": {"error": str(e)}})
    sampler = Sampler(nv.sample, period).start()
    saved: Path | None = None
    try:
        out = kind.run(params, ctx)
    finally:
        series = sampler.stop()
        nv.close()
        try:
            saved = save(series, ctx.raw_dir)
        except OSError as e:
            ctx.log.warning("could not save telemetry of %s: %s", ctx.check_id, e)
    metrics = telemetry_metrics.derive(series)
    summary: sections.Telemetry = {
        "file": str(saved.relative_to(ctx.run_dir)) if saved else None, "period_s": period,
        "samples": len(series.t), "gpus": len(series.gpus), "overruns": series.overruns,
        "sample_cost_ms": round(series.sample_cost_s * 1000, 3)}
    if sampler.error:
        summary["error"] = sampler.error
    return replace(out, metrics=(*out.metrics, *metrics),
                   findings=(*out.findings, *telemetry_metrics.findings(series)),
                   details={**out.details, "telemetry": summary})
