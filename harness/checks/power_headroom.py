"""Check kind `power_headroom`: node power at full-system load against usable PSU capacity.

Phases: `idle` seconds of samples before the load (the PSUs' state before it), then `duration`
seconds of load on everything at once: the builtin burn (harness/engines/burn.py) on every GPU
in `dtype` (bf16 by default, tensor cores: the engine's highest-power mode; an fp32 burn stays far
below TDP), CPU and memory stress with stress-ng, and optionally fio in fresh directories on
data drives; then `cooldown` seconds of samples. Every `period` seconds the BMC (node input
power, PSU state, inlet air, fans) and NVML (each GPU's power and temperatures) are read at the
same timestamp; the series is kept as raw/<check>/power.json and drawn in the report.

Without a BMC, node power is estimated as the GPUs' power plus `allowance_w` (default: the
profile's max system power minus GPUs x TDP) and marked estimated. Usable capacity and
headroom come from the profile's `hardware.psu` (harness/series/psu.py); the profile's
expectation on `power.headroom_pct` (>= 20%) judges it. The check's own verdicts: PSUs not OK or
redundancy lost before or during the load, a GPU capped below its default power limit, a GPU
at or near its own slowdown threshold, fan faults, hot inlet air. The runner's GPU telemetry
runs alongside, so the profile's `gpu.throttle_pct` limits (HW slowdown, power brake) apply too.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import Field

from harness import catalog, sections
from harness.checks import gpu_identity, needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, Params, PlannedCommand
from harness.checks.loadgroup import InterruptWatch, LoadGroup
from harness.config.bmc import BmcConfig
from harness.config.numbers import Duration, WholeSeconds
from harness.errors import ConfigError, HarnessError, SkipCheck, ToolError
from harness.model import BmcReading, BmcSource, Finding, Metric, Outcome
from harness.numfmt import fmt_value
from harness.parsers import burnlog
from harness.parsers.base import last_line
from harness.platform import nvml, proc, scratch
from harness.series import power as power_series
from harness.series import psu as power
from harness.series.telemetry import TelemetryParams
from harness.units import COUNT, WATT

SLACK_S = 60.0  # start-up of the load tools and their shutdown, on top of `duration`
NAME = "power_headroom"
BURN_NAME, STRESS_NAME = "burn", "stress-ng"
TELEMETRY = ("gpu.temp_max", "gpu.mem_temp_max", "gpu.power_mean", "gpu.power_max", "gpu.power_avg_max",
             "gpu.sm_clock_mean", "gpu.util_mean", "gpu.throttle_pct", "gpu.hw_slowdown_episodes",
             "gpu.energy", "gpu.lost")
OWN = ("power.node_peak", "power.node_p99", "power.gpu_peak", "power.gpu_share_pct", "power.headroom_pct",
       "power.usable_capacity", "power.estimated", "power.psus_ok", "psu.ok", "psu.power_in",
       "psu.redundant", "bmc.inlet_temp_max", "gpu.power_limit", "gpu.temp_margin", "gpu_burn.ok",
       "gpu_burn.tflops")


class PowerHeadroomParams(TelemetryParams, Params):
    """How long and how hard to load the node, how often to sample, where node power comes from."""

    duration: WholeSeconds = Field(300, ge=1, le=24 * 3600, description="seconds of full-system load")
    idle: Duration = Field(5.0, ge=0, le=600, description="seconds sampled before the load")
    cooldown: Duration = Field(30.0, ge=0, le=3600, description="seconds sampled after the load")
    period: Duration = Field(1.0, ge=0.1, le=60, description="seconds between BMC + GPU power samples")
    gpu_load: bool = Field(True, description="burn every GPU (builtin engine) during the load")
    dtype: Literal["bf16", "fp16", "tf32", "fp32", "fp64"] = Field(
        "bf16", description="burn dtype; bf16 runs on tensor cores (highest power of the engine)")
    backend: Literal["auto", "torch", "cupy", "numpy"] = Field(
        "auto", description="burn backend; numpy burns the CPU (tests)")
    size: Optional[int] = Field(None, ge=16, le=65536, description="burn matrix side")
    cpu_workers: Optional[int] = Field(
        None, ge=0, le=4096, description="stress-ng --cpu workers; null: one per CPU, less one for the "
        "burn's feeder; 0 with vm_workers 0: no stress-ng")
    cpu_method: str = Field("matrixprod", pattern=r"^[a-z0-9_-]{1,32}$", description="stress-ng --cpu-method")
    vm_workers: int = Field(2, ge=0, le=1024, description="stress-ng --vm workers (memory stress)")
    vm_bytes: str = Field("40%", pattern=r"^\d{1,15}([bkmgBKMG]|%)?$",
                          description="stress-ng --vm-bytes per vm worker: '40%' of available memory, '1g'")
    fio_dirs: list[str] = Field(default_factory=list, description="directories on data drives: fio "
                                "random read/write in a fresh subdirectory of each during the load")
    fio_size: str = Field("1g", pattern=r"^\d{1,15}[kmgKMG]?$", description="fio file size per directory")
    bmc: BmcConfig = Field(
        default_factory=BmcConfig, description="where node power and PSU state come from "
        "(harness/config/bmc.py); kind none: no BMC, node power is estimated from GPU power + allowance_w")
    allowance_w: Optional[float] = Field(
        None, gt=0, description="non-GPU power for the estimate without a BMC; default: the profile's "
        "hardware.psu.max_system_power_w - gpu.count x gpu_tdp_w")
    temp_margin_c: float = Field(5.0, ge=0, le=50, description="a GPU peak within this of its own "
                                 "slowdown (or HBM) threshold warns; at or above it fails")
    inlet_max_c: Optional[float] = Field(35.0, description="inlet air above this warns (ASHRAE A2 "
                                         "allows 35 C; null to turn off)")


def open_bmc(cfg: BmcConfig) -> Optional[BmcSource]:
    """The BMC source the `bmc:` params name (harness/platform/bmc.py): None for kind none, and for
    auto without a local BMC. ipmitool's output is not kept per sample (see _keep_raw)."""
    from harness.platform import bmc  # start-up: ssl and urllib load only when a BMC is opened

    return bmc.open_source(cfg)


def cpu_workers(params: PowerHeadroomParams, burning: bool) -> int:
    if params.cpu_workers is not None:
        return params.cpu_workers
    n = os.cpu_count() or 1
    return max(1, n - 1) if burning else n


def stress_argv(params: PowerHeadroomParams, burning: bool, temp_path: str) -> Optional[list[str]]:
    """stress-ng on CPUs and memory for `duration` s, or None when both worker counts are 0."""
    cpus = cpu_workers(params, burning)
    if cpus == 0 and params.vm_workers == 0:
        return None
    argv = ["stress-ng"]
    if cpus:
        argv += ["--cpu", str(cpus), "--cpu-method", params.cpu_method]
    if params.vm_workers:
        argv += ["--vm", str(params.vm_workers), "--vm-bytes", params.vm_bytes]
    return [*argv, "--timeout", f"{params.duration}s", "--metrics-brief", "--temp-path", temp_path]


def burn_argv(params: PowerHeadroomParams) -> list[str]:
    argv = [sys.executable, "-m", "harness.engines.burn", "--seconds", str(params.duration),
            "--dtype", params.dtype, "--backend", params.backend]
    return argv + (["--size", str(params.size)] if params.size else [])


def fio_argv(params: PowerHeadroomParams, directory: str) -> list[str]:
    return ["fio", "--name=power", f"--directory={directory}", "--rw=randrw", "--bs=128k",
            f"--size={params.fio_size}", "--iodepth=16", "--ioengine=libaio", "--direct=1", "--time_based",
            f"--runtime={params.duration}", "--output-format=json"]


def estimate_s(params: PowerHeadroomParams) -> float:
    return params.idle + params.duration + params.cooldown + 3.0


def plan(params: PowerHeadroomParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    gpus = len(inventory.get("gpus", []))
    out = []
    if params.gpu_load and (gpus or params.backend == "numpy"):
        out.append(PlannedCommand(tuple(burn_argv(params)), f"{params.dtype} burn on {gpus or 'no'} GPU(s)"))
    stress = stress_argv(params, bool(gpus) and params.gpu_load, "<scratch>")
    if stress:
        out.append(PlannedCommand(tuple(stress), "CPU and memory stress, at the same time"))
    out += [PlannedCommand(tuple(fio_argv(params, f"{d}/harness-power-*")), "data drive load")
            for d in params.fio_dirs]
    where = ("GPU power + allowance (estimated)" if params.bmc.kind == "none"
             else f"the BMC ({params.bmc.kind}), else GPU power + allowance (estimated)")
    note = (f"{params.idle:g} s idle, {params.duration} s load, {params.cooldown:g} s cool-down; node power "
            f"from {where} every {params.period:g} s")
    if not out:
        return [PlannedCommand(("true",), "no load configured; " + note)]
    return [replace(out[0], note=f"{out[0].note}; {note}"), *out[1:]]


class _Sampler:
    """Reads the BMC and every GPU at one timestamp per tick."""

    def __init__(self, bmc: Optional[BmcSource], nv: Optional[nvml.NvmlSession], t0: float) -> None:
        self.bmc, self.nv, self.t0 = bmc, nv, t0
        self.samples: list[power_series.Sample] = []
        self.nvml_error: Optional[str] = None
        self.series: Optional[power_series.PowerSeries] = None
        self.saved: Optional[Path] = None

    def tick(self, phase: str) -> None:
        t = time.monotonic() - self.t0
        reading: Optional[BmcReading] = None
        error: Optional[str] = None
        if self.bmc is not None:
            try:
                reading = self.bmc.read()
            except HarnessError as e:
                error = str(e)
        gpus: tuple[nvml.GpuSample, ...] = ()
        if self.nv is not None and self.nvml_error is None:
            try:
                gpus = tuple(self.nv.sample())
            except Exception as e:  # NVML itself broke: keep the BMC going, say why
                self.nvml_error = f"{type(e).__name__}: {e}"
        self.samples.append(power_series.Sample(t, phase, reading, error, gpus))

    def run_for(self, seconds: float, phase: str, period: float, group: Optional[LoadGroup] = None,
                stop: Optional[Callable[[], bool]] = None) -> None:
        """Tick every `period` s for `seconds` (or while `group` runs); late ticks are skipped."""
        start = time.monotonic()
        due = start
        while True:
            self.tick(phase)
            due += period
            now = time.monotonic()
            if now > due:
                due += (int((now - due) / period) + 1) * period
            if group is not None:
                if group.failed():  # a load that died makes the rest pointless: end it now
                    group.stop()
                if group.wait(max(0.0, due - now)) or group.interrupted.is_set():
                    return
            else:
                end = start + seconds
                if due >= end or (stop is not None and stop()):
                    return
                time.sleep(max(0.0, due - now))


def run(params: PowerHeadroomParams, ctx: CheckContext) -> CheckOutput:
    """Idle, full load, cool-down, all sampled; then node power against usable PSU capacity."""
    try:
        policy = power.policy_from_hardware(ctx.hardware)
    except ValueError as e:
        raise ConfigError(f"profile hardware.psu: {e}") from e
    bmc = open_bmc(params.bmc)
    has_gpus = bool(ctx.inventory.get("gpus"))
    allowance = params.allowance_w or power.allowance_from_hardware(ctx.hardware)
    if bmc is None and not has_gpus:
        raise SkipCheck("no node power to measure: no BMC configured and no GPU power to estimate from")
    if bmc is None and allowance is None:
        raise ConfigError("power_headroom: no BMC configured and no allowance for an estimate: set "
                          "params.allowance_w, or hardware.psu.max_system_power_w and gpu_tdp_w in the "
                          "profile")
    notes: list[str] = []
    burning = params.gpu_load and (has_gpus or params.backend == "numpy")
    if params.gpu_load and not burning:
        notes.append("GPU load skipped: no NVIDIA GPU")
    stress = stress_argv(params, burning, str(ctx.scratch_dir()))
    for argv in ([stress] if stress else []) + ([["fio"]] if params.fio_dirs else []):
        proc.which(argv[0])  # a missing tool is an error before any load starts
    for d in params.fio_dirs:
        if not Path(d).is_dir():
            raise ConfigError(f"power_headroom: params.fio_dirs: {d} is not a directory")
    nv = _open_nvml(has_gpus, notes)
    budget = params.duration + SLACK_S
    if ctx.timeout_s is not None:
        budget = min(budget, ctx.timeout_s)
    fio_tmp = ExitStack()  # the fio directories: scratch dirs, so the run's ledger records them
    sampler = _Sampler(bmc, nv, time.monotonic() + params.idle)
    group: Optional[LoadGroup] = None
    limits: tuple[nvml.GpuLimits, ...] = ()
    refused: Optional[str] = None
    try:
        with InterruptWatch() as watch, LoadGroup(ctx, watch.event) as group:
            sampler.run_for(params.idle, "before", params.period, stop=watch.event.is_set)
            if bmc is not None and not any(x.bmc for x in sampler.samples):
                why = sampler.samples[-1].bmc_error
                raise ToolError(f"BMC ({bmc.describe()}) did not answer before the load: {why}")
            limits = tuple(nv.limits()) if nv is not None else ()
            _keep_raw(bmc, ctx.raw_dir, "before")
            refused = _unsafe(sampler.samples, policy)
            if refused:
                notes.append(refused)
                ctx.progress(refused)
            else:
                _load(params, ctx, group, sampler, [a for a in (stress,) if a], burning, budget, fio_tmp)
    finally:
        _keep_raw(bmc, ctx.raw_dir, "last")
        if bmc is not None:
            bmc.close()
        if nv is not None:
            nv.close()
        fio_tmp.close()
        sampler.series = power_series.build(sampler.samples, params.period, allowance_w=allowance,
                                            capacity_w=policy.capacity_w if policy else None,
                                            source=bmc.describe() if bmc else "estimated")
        try:  # kept even when the check was cut short
            sampler.saved = power_series.save(sampler.series, ctx.raw_dir)
        except OSError as e:
            ctx.log.warning("could not save the power series of %s: %s", ctx.check_id, e)
    assert group is not None
    notes += [str(n) for n in getattr(bmc, "notes", [])]
    return _judge(params, ctx, group, sampler, limits, policy, notes, loaded=not refused)


def _load(params: PowerHeadroomParams, ctx: CheckContext, group: LoadGroup, sampler: _Sampler,
          stress: list[list[str]], burning: bool, budget: float, fio_tmp: ExitStack) -> None:
    """Every load tool at once for `duration` s, sampled; then the cool-down, sampled."""
    sampler.t0 = time.monotonic()
    ctx.progress(f"full-system load for {params.duration} s")
    if burning:
        group.start(BURN_NAME, burn_argv(params), budget, env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    for argv in stress:
        group.start(STRESS_NAME, argv, budget)
    for i, d in enumerate(params.fio_dirs):
        # recorded (device, inode) in the ledger: a SIGKILLed run's directory is removed by the next
        work = fio_tmp.enter_context(scratch.scratch_dir("power", Path(d), ctx.log))
        group.start(f"fio-{i}", fio_argv(params, str(work)), budget)
    sampler.run_for(params.duration, "load", params.period, group=group)
    group.close()
    if group.interrupted.is_set() or any(getattr(o, "interrupted", False) for o in group.outcomes.values()):
        raise ToolError("power_headroom: interrupted; the load's process groups were killed")
    ctx.progress(f"cool-down {params.cooldown:g} s")
    if params.cooldown > 0:
        sampler.run_for(params.cooldown, "cooldown", params.period, stop=group.interrupted.is_set)


def _unsafe(samples: Sequence[power_series.Sample], policy: Optional[power.PsuPolicy]) -> Optional[str]:
    """Why the load must not start: fewer healthy PSUs than carry it (the node could go down)."""
    last = next((s.bmc for s in reversed(samples) if s.bmc is not None and s.bmc.psus), None)
    if policy is None or last is None or power.healthy_count(last) >= policy.usable:
        return None
    return (f"load not started: {power.healthy_count(last)} healthy PSUs, fewer than the {policy.usable} "
            f"that carry it ({policy.redundancy}){power.not_counted(last)}")


def _keep_raw(bmc: Optional[BmcSource], raw_dir: Path, when: str) -> None:
    """The BMC's own output of its latest reading, as evidence (not every sample's: too many)."""
    raw = getattr(bmc, "last_raw", None)
    if not isinstance(raw, Mapping):
        return
    try:
        raw_dir.mkdir(parents=True, exist_ok=True)
        for name, text in raw.items():
            (raw_dir / f"bmc-{when}-{_safe_name(str(name))}.txt").write_text(str(text), encoding="utf-8")
    except OSError:
        pass


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:60] or "bmc"


def _open_nvml(has_gpus: bool, notes: list[str]) -> Optional[nvml.NvmlSession]:
    if not has_gpus:
        return None
    try:
        return nvml.NvmlSession()
    except nvml.NvmlUnavailable as e:
        notes.append(f"GPU power not sampled: {e}")
        return None


def _load_problems(params: PowerHeadroomParams, ctx: CheckContext, group: LoadGroup
                   ) -> tuple[list[Metric], list[str], list[Finding]]:
    """Every load tool must have run its full time: a load that died makes the peak meaningless. A GPU
    that hung or died under the burn while the others worked is a failure of that GPU, named."""
    metrics: list[Metric] = []
    problems: list[str] = []
    dead: list[Finding] = []
    for name, o in group.outcomes.items():
        if isinstance(o, Exception):
            problems.append(f"{name}: {o}")
            continue
        if name == BURN_NAME:
            parsed = burnlog.parse(o.stdout())
            metrics += [m for m in parsed.metrics if m.name in ("gpu_burn.ok", "gpu_burn.tflops")]
            problems += [f"burn: {p}" for p in parsed.problems]
            names = gpu_identity.names(ctx.inventory.get("gpus", []))
            for g, why in sorted((parsed.details.get("dead") or {}).items()):
                who = names.get(int(g), f"GPU {g}")
                dead.append(Finding(metric="gpu_burn.ok", labels={"gpu": int(g)}, outcome=Outcome.FAIL,
                                    measured=0.0, unit=COUNT, reference=1.0, low=1.0,
                                    source=NAME, message=f"{who}: did not finish the burn "
                                    f"under the full-system load: {why}"))
            if params.backend != "numpy":
                seen = {m.labels.get("gpu") for m in parsed.metrics}
                missing = [g for g in range(len(ctx.inventory.get("gpus", []))) if g not in seen]
                if parsed.metrics and missing:
                    problems.append(f"burn: no result from GPU {', '.join(map(str, missing))}")
            if not parsed.metrics and o.rc != 0:
                problems.append(f"burn: exit {o.rc}: {o.tail(300) or 'no output'}")
        elif o.rc != 0:
            problems.append(f"{name}: exit {o.rc}: {_last(o.tail(600))}")
    return metrics, problems, dead


def _judge(params: PowerHeadroomParams, ctx: CheckContext, group: LoadGroup, sampler: _Sampler,
           limits: Sequence[nvml.GpuLimits], policy: Optional[power.PsuPolicy], notes: list[str],
           loaded: bool = True) -> CheckOutput:
    samples, series, saved = sampler.samples, sampler.series, sampler.saved
    assert series is not None
    metrics, problems, dead = _load_problems(params, ctx, group)
    metrics += list(power_series.derive(series, samples, policy, limits))
    load = [s for s in samples if s.phase == "load"]
    if sampler.bmc is not None:
        answered = sum(1 for s in load if s.bmc is not None)
        if load and answered * 2 < len(load):
            problems.append(f"the BMC answered {answered} of {len(load)} readings during the load")
    if loaded and not any(m.name == "power.node_peak" for m in metrics):
        problems.append("no node power during the load: neither the BMC nor the GPUs gave a reading")
    if sampler.nvml_error:
        notes.append(f"GPU power sampling stopped: {sampler.nvml_error}")
    ticks = [power.BmcTick(s.t, s.phase, s.bmc) for s in samples if s.bmc is not None]
    own = tuple(replace(f, source=NAME) for f in (  # the series judge; the kind signs its verdicts
        power.judge_psus(ticks, policy) + power_series.judge_gpus(samples, limits, params.temp_margin_c)
        + power_series.judge_airflow(samples, params.inlet_max_c))) + tuple(dead)
    details: sections.Details = {
        "power": {"file": str(saved.relative_to(ctx.run_dir)) if saved else None, "samples": len(samples),
                  "period_s": params.period, "source": series.source, "estimated": series.estimated,
                  "allowance_w": series.allowance_w, "gpu_power": gpu_power_source(samples),
                  "capacity": policy.describe() if policy else "no hardware.psu in the profile"},
        "psus": power.psu_table(ticks),
    }
    if notes:
        details["notes"] = notes
    return CheckOutput(tuple(metrics), tuple(problems), details, _summary(metrics, series), findings=own)


def gpu_power_source(samples: Sequence[power_series.Sample]) -> str:
    """Which NVML power reading the GPU peaks come from (instantaneous where the driver offers it)."""
    kinds = {g.power_instant for s in samples for g in s.gpus if g.power_instant is not None}
    if kinds == {True}:
        return "instantaneous (NVML_FI_DEV_POWER_INSTANT)"
    if kinds == {False}:
        return ("1-s average (nvmlDeviceGetPowerUsage; no instantaneous field on this driver): "
                "peaks understated")
    return "mixed: instantaneous where offered, else the 1-s average" if kinds else "none"


def _summary(metrics: Sequence[Metric], series: power_series.PowerSeries) -> str:
    v = {m.name: m.value for m in metrics if not m.labels}
    if "power.node_peak" not in v:
        return "no node power measured"
    text = f"peak {fmt_value(v['power.node_peak'], WATT)}" + (" (estimated)" if series.estimated else "")
    if "power.headroom_pct" in v:
        text += (f" of {fmt_value(v['power.usable_capacity'], WATT)} usable: "
                 f"{fmt_value(v['power.headroom_pct'], '%')} headroom")
    return text


def _last(text: str) -> str:
    return last_line(text) or "no output"


KIND = CheckKind(
    name=NAME,
    description="full-system load (GPU burn, stress-ng, fio): node power vs usable PSU capacity, PSU state",
    params=PowerHeadroomParams,
    metrics=catalog.subset([*OWN, *TELEMETRY]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        estimate_s=estimate_s,
        loads_node=True,
        sections=frozenset({"power", "psus", "notes"}),
        requires=(needs.tool("stress-ng"), needs.torch("GPU load", "gpu load"),
                  needs.cupy("GPU load", "gpu load"), needs.tool("fio", use="fio_dirs"),
                  needs.tool("ipmitool", use="bmc kind: ipmi", version_args=("-V",))),
    ),
)
