"""The `observe` kind: run a real workload step (or watch pids, or the node) under the stall doctor.

Metrics: `observe.share{resource}` (share of the window each resource held the work back, every
resource judged, so a rule on one always has its metric),
`observe.primary{resource}` (1 for the primary bottleneck), `observe.gpu_busy` where GPUs are
seen, `observe.duration`. A suite can bound them (`observe.share{resource=storage} max 0.2`).
The window is saved as raw/<check>/observe-series.json for the report's charts; the verdict and
findings go into the check's details. With `command`, the window is the command's run: a
`duration` is then its timeout (running past it is an error, as for any tool), and a non-zero
exit makes the run invalid (the observed work did not complete).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from pydantic import Field, field_validator, model_validator

from harness.checks import needs
from harness.checks.base import (
    CheckContext,
    CheckKind,
    CheckOutput,
    KindHooks,
    MetricSpec,
    Need,
    Params,
    PlannedCommand,
)
from harness.checks.observer import Observer, watch
from harness.config.models import Seconds
from harness.errors import HarnessError
from harness.fsutil import atomic_write_json
from harness.model import Metric
from harness.platform import proc
from harness.platform.nvml import NvmlSession, NvmlUnavailable
from harness.platform.procfs import ProcFs
from harness.series.observed import Window
from harness.series.stall import RESOURCES, THRESHOLDS, Diagnosis, diagnose
from harness.units import COUNT, RATIO, SECONDS

SERIES_FILE = "observe-series.json"
DEFAULT_DURATION_S = 60.0

METRICS = {
    "observe.share": MetricSpec(RATIO, "lower", "share of the window a resource held the work back"),
    "observe.primary": MetricSpec(COUNT, "none", "1 for the primary bottleneck (label resource)"),
    "observe.gpu_busy": MetricSpec(RATIO, "higher", "GPU utilisation averaged over GPUs and window"),
    "observe.duration": MetricSpec(SECONDS, "none", "length of the observed window"),
}


class ObserveParams(Params):
    command: Optional[list[str]] = Field(None, min_length=1, description="program and arguments to run "
                                         "and watch; never a shell")
    pids: list[int] = Field(default_factory=list, description="processes (and their children) to watch")
    duration: Optional[Seconds] = Field(None, description="window; with a command, its timeout "
                                        f"(default {DEFAULT_DURATION_S:.0f} s without one)")
    interval: Seconds = Field(1.0, description="sampling interval")
    thresholds: dict[str, float] = Field(default_factory=dict, description="attribution thresholds to "
                                         "override by name (harness.series.stall.Thresholds)")

    @field_validator("thresholds")
    @classmethod
    def _known(cls, v: dict[str, float]) -> dict[str, float]:
        THRESHOLDS.with_overrides(v)  # ValueError names an unknown one
        return v

    @model_validator(mode="after")
    def _one_target(self) -> ObserveParams:
        if self.command and self.pids:
            raise ValueError("give command or pids, not both")
        if self.interval < 0.05:
            raise ValueError("interval must be at least 0.05 s")
        return self


def _nvml() -> Optional[NvmlSession]:
    try:
        return NvmlSession()
    except NvmlUnavailable:
        return None


def _watch_command(params: ObserveParams, ctx: CheckContext, nvml: Optional[NvmlSession]) -> Window:
    """Run the command through ctx.run_tool (raw output, timeout, group kill) and watch it meanwhile."""
    argv = tuple(str(a) for a in params.command or ())
    started = threading.Event()
    done = threading.Event()
    box: dict[str, Any] = {}

    def on_tool(pid: int, ran: tuple[str, ...], starting: bool) -> None:
        if starting and ran == argv and "pid" not in box:
            box["pid"] = pid
            started.set()

    def observe() -> None:
        while not started.wait(0.05):
            if done.is_set():
                return
        try:
            obs = Observer((box["pid"],), scope="command", nvml=nvml)
            watch(obs, duration=None, interval=params.interval, finished=done.wait)
            box["observer"] = obs
        except Exception as e:  # handed to the check's thread, re-raised there
            box["error"] = e

    thread = threading.Thread(target=observe, name="observe", daemon=True)
    proc.watch(on_tool)
    thread.start()
    try:
        res = ctx.run_tool(argv, timeout_s=params.duration, check_rc=False)
    finally:
        done.set()
        proc.unwatch(on_tool)
        thread.join()
    if "error" in box:
        raise box["error"]
    if "observer" not in box:
        raise HarnessError(f"{' '.join(argv)}: could not be observed (it was not seen starting)")
    return box["observer"].window(params.interval, {"argv": list(argv), "rc": res.rc, "stopped": False})


def run(params: ObserveParams, ctx: CheckContext) -> CheckOutput:
    try:
        th = THRESHOLDS.with_overrides(params.thresholds)
    except ValueError as e:  # a profile's hardware.observe names an unknown threshold
        raise HarnessError(f"profile hardware.observe: {e}") from e
    nvml = _nvml()
    try:
        if params.command:
            window = _watch_command(params, ctx, nvml)
        else:
            for pid in params.pids:
                if pid <= 0 or ProcFs().task(pid) is None:
                    raise HarnessError(f"pid {pid}: no such process to observe")
            obs = Observer(tuple(params.pids), nvml=nvml)
            duration = params.duration or DEFAULT_DURATION_S
            what = "pids " + ", ".join(map(str, params.pids)) if params.pids else "the node"
            ctx.progress(f"observing {what} for {duration:g} s")
            watch(obs, duration=duration, interval=params.interval, finished=_sleep)
            window = obs.window(params.interval)
    finally:
        if nvml is not None:
            nvml.close()
    if not window.ticks:
        raise HarnessError("could not observe: no two readings were taken (the workload ended at once)")
    diag = diagnose(window, th)
    ctx.raw_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(ctx.raw_dir / SERIES_FILE, window.to_dict(), durable=False)
    problems: tuple[str, ...] = ()
    rc = window.command.get("rc")
    if params.command and rc != 0:
        problems = (f"{' '.join(params.command)}: exit {rc}: the observed work did not complete",)
    series = str((ctx.raw_dir / SERIES_FILE).relative_to(ctx.run_dir))
    return CheckOutput(metrics=tuple(metrics_of(window, diag)), problems=problems,
                       details=details_of(window, diag, series), summary=diag.verdict)


def _sleep(timeout: float) -> bool:
    """Sleep out one interval: a node or pids have no end of their own (watch stops at `duration`
    or when the pids are gone)."""
    time.sleep(timeout)
    return False


def metrics_of(window: Window, diag: Diagnosis) -> list[Metric]:
    """The diagnosis as metrics: a share per finding, the primary, GPU busy share, the window."""
    out = [Metric("observe.share", share, RATIO, {"resource": r}) for r, share in diag.shares.items()]
    out.append(Metric("observe.primary", 1.0, COUNT, {"resource": diag.primary}))
    if diag.gpu_busy is not None:
        out.append(Metric("observe.gpu_busy", round(diag.gpu_busy, 4), RATIO))
    out.append(Metric("observe.duration", round(window.duration_s, 3), SECONDS))
    return out


def details_of(window: Window, diag: Diagnosis, series_file: str) -> dict[str, Any]:
    """The observe window's sections (primary, findings as sections.ObserveFinding, series) and
    its own notes (verdict, scope, ...)."""
    return {"primary": diag.primary, "verdict": diag.verdict,
            "findings": [f.to_dict() for f in diag.findings], "scope": window.scope,
            "samples": len(window.ticks), "interval_s": window.interval_s, "cgroup": window.cgroup,
            "sources": dict(window.sources), "series": {"file": series_file}}


def profile_defaults(params: ObserveParams, hardware: Mapping[str, Any]) -> ObserveParams:
    """The profile's hardware.observe thresholds under the suite's own (the suite's win by name)."""
    site = dict(hardware.get("observe") or {})
    if not site:
        return params
    return params.model_copy(update={"thresholds": {**site, **params.thresholds}})


def plan(params: ObserveParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    if params.command:
        note = f"observed every {params.interval:g} s until it exits"
        return (PlannedCommand(tuple(params.command), note),)
    argv = ("harness", "observe", "--duration", f"{params.duration or DEFAULT_DURATION_S:g}",
            "--interval", f"{params.interval:g}", *(a for p in params.pids for a in ("--pid", str(p))))
    return (PlannedCommand(argv, "the equivalent stall-doctor command line"),)


def estimate(params: ObserveParams) -> float:
    return float(params.duration or (0 if params.command else DEFAULT_DURATION_S))


KIND = CheckKind(
    name="observe",
    description="stall doctor: what holds a workload back (" + ", ".join(RESOURCES[1:]) + ")",
    params=ObserveParams,
    metrics=METRICS,
    run=run,
    plan=plan,
    hooks=KindHooks(
        estimate_s=estimate,
        profile_defaults=profile_defaults,
        loads_node=lambda params: bool(getattr(params, "command", None)),
        sections=frozenset({"primary", "findings", "series"}),
        requires=(Need("pynvml", needs.NVML.hint, python=True, use="GPU signals (none without)"),),
    ),
)
