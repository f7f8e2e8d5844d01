"""GPU telemetry alongside a check: the sampler thread and the runner's hook. The series, what it
says and its rules are pure and live in harness.series.telemetry.

`observe(kind, params, ctx)` runs one check with the sampler going (when the node has GPUs),
saves the series to raw/<check>/telemetry.json, and adds the derived per-GPU metrics and the
telemetry's findings (a GPU that stopped answering, a PCIe link below its maximum under load)
to the check's output. Around a check that loads the node it also reads the GPUs' health (NVML's
counters and states, the kernel log's XIDs) just before and just after, and adds what the load did
(harness.checks.afterload). When the tool itself failed (ToolError) but a GPU was lost or damaged
meanwhile, that is returned as the check's output with the tool's failure as its problem: the
runner judges it FAILED, naming the GPU, instead of ERRORED. It judges nothing: the runner's
compare.judge does, with the telemetry's sibling rule on peak temperature among the check's own
rules (PlannedCheck.own_rules).
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
from harness.checks import afterload, gpu_health, gpu_identity
from harness.checks.base import CheckContext, CheckKind, CheckOutput
from harness.errors import ToolError
from harness.model import Outcome
from harness.parsers import xid as xid_parser
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
        if self._thread is not None:  # bounded: each GPU's reading is (platform/nvml), so is this wait
            self._thread.join(timeout=self.period_s + 2 * nvml.CALL_TIMEOUT_S)
            if self._thread.is_alive() and self.error is None:
                self.error = f"a telemetry reading did not return within {2 * nvml.CALL_TIMEOUT_S:g} s"
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


def _xids(ctx: CheckContext, critical: list[int], when: str, notes: list[str]) -> dict[int, int] | None:
    """Critical XIDs per GPU in the kernel log so far; None (and a note) when it cannot be read."""
    try:
        res = ctx.run_tool(["dmesg"], name=f"dmesg-{when}", timeout_s=30)
    except ToolError as e:
        notes.append(f"kernel log not read {when} the load ({e}): XIDs during it not judged")
        return None
    parsed = xid_parser.parse(res.stdout())
    return gpu_health.xid_metrics(parsed.metrics, ctx.inventory.get("gpus", []), critical)[1]


def _reading(nv: nvml.NvmlSession, ctx: CheckContext, critical: list[int], when: str,
             notes: list[str]) -> afterload.Reading:
    return afterload.Reading(nv.health(), _xids(ctx, critical, when, notes))


def observe(kind: CheckKind, params: Any, ctx: CheckContext,
            session: Callable[[], nvml.NvmlSession] = nvml.NvmlSession) -> CheckOutput:
    """Run `kind` with telemetry sampled alongside when the node has GPUs; add what it shows, and
    (a kind that loads the node) what the load did to the GPUs' health."""
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
    critical = list((ctx.hardware.get("gpu") or {}).get("xid_critical") or gpu_health.DEFAULT_CRITICAL_XIDS)
    notes: list[str] = []
    before = _reading(nv, ctx, critical, "before", notes) if kind.loads(params) else None
    t0 = time.monotonic()
    sampler = Sampler(nv.sample, period).start()
    saved: Path | None = None
    after: afterload.Reading | None = None
    failed: ToolError | None = None
    try:
        out = kind.run(params, ctx)
    except ToolError as e:  # the tool failed; what the GPUs showed meanwhile may still be a verdict
        failed, out = e, CheckOutput((), (), {}, "")
    finally:
        series = sampler.stop()
        try:
            if before is not None:
                after = _reading(nv, ctx, critical, "after", notes)
        finally:
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
    named = {f.labels.get("gpu") for f in out.findings if f.metric == "gpu.lost"}  # the kind said it
    names = gpu_identity.names(ctx.inventory.get("gpus", []))
    found = (*out.findings, *(f for f in telemetry_metrics.findings(
        series, names, links=tp is not None or kind.judges_pcie_link)
                              if not (f.metric == "gpu.lost" and f.labels.get("gpu") in named)))
    details = {**out.details, "telemetry": summary}
    if before is not None and after is not None:
        grown, judged = afterload.judge(before, after, time.monotonic() - t0, critical, tuple(series.lost),
                                        names)
        metrics = (*metrics, *grown)
        found = (*found, *judged)
        details["after_load"] = {"gpus": len(after.health), "findings": len(judged),
                                 **({"notes": notes} if notes else {})}
    result = replace(out, metrics=(*out.metrics, *metrics), findings=found, details=details)
    if failed is None:
        return result
    if not any(f.outcome is Outcome.FAIL for f in found):
        raise failed  # nothing the hardware showed: the tool's failure is the check's (ERRORED)
    tail = {"output_tail": failed.output_tail[-2000:]} if failed.output_tail else {}
    return replace(result, problems=(str(failed),), details={**result.details, **tail})
