"""Check kind `gpu_burn`: load every GPU for a set time and prove each one did the work correctly.

Engines (param `engine`):

* `builtin`: harness/engines/burn.py in a subprocess: matrix multiplies in `dtype` on every GPU
  through PyTorch or CuPy (whichever is importable; NumPy on the CPU when `backend: numpy`),
  every product compared with the first; parsed by parsers/burnlog.
* `gpu-burn`: wilicc/gpu-burn's `gpu_burn` binary (path configurable), parsed by
  parsers/gpuburn. Its "OK" is not trusted: a GPU that did no work makes the run invalid, a run
  without the final verdict is invalid; FAULTY (computation errors) fails, and so does a GPU whose
  process died while the others worked (also in a run that is not whole).
* `dcgm`: `dcgmi diag -r LEVEL -j`, parsed by parsers/dcgm. A failed test fails with DCGM's
  message; a level-2+ run in which DCGM skipped every hardware and stress test is invalid.
* `auto`: `builtin` when its backend for `dtype` is installed (PyTorch; CuPy for fp16/fp32/fp64),
  else `gpu-burn` when the binary is found, else an error naming both. Chosen at plan and run
  time without importing anything; the engine that ran is in the results (details.engine).

Telemetry (temperature, power, clocks, throttling) is sampled alongside by the runner's hook
(harness.run.sampler); `telemetry_period` sets its rate. Every GPU NVML sees must be reported
by the engine. The sibling rule flags a GPU whose TFLOPS is far below the others'.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import Field, field_validator

from harness import catalog, siblings
from harness.checks import gpu_identity, needs
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
from harness.config.numbers import WholeSeconds
from harness.engines import burn as burn_engine
from harness.errors import ToolError, ToolMissing, ToolTimeout
from harness.model import Finding, Metric, Outcome
from harness.numfmt import fmt_num, fmt_value
from harness.parsers import burnlog, dcgm, gpuburn
from harness.parsers.base import ParseResult
from harness.series.telemetry import TelemetryParams
from harness.units import COUNT, TFLOPS

SOURCE = "gpu_burn"
# Healthy GPUs of one SKU differ ~8% on average, up to 22%, in a power-capped compute load (Sinha et al.,
# "Not All GPUs Are Created Equal", SC22, arXiv 2208.11035): a burn that hits its power limit is judged
# at 15% below the median so that one GPU far slower than its siblings fails, not every node.
SIBLING_TFLOPS_TOLERANCE = 0.15
SLACK_S = 60.0  # start-up, memory allocation and gpu_burn's SIGTERM grace period
DCGM_LEVEL_S = {1: 60.0, 2: 300.0, 3: 1800.0, 4: 7200.0}  # generous budgets per dcgmi diag level
TELEMETRY = ("gpu.temp_max", "gpu.mem_temp_max", "gpu.power_mean", "gpu.power_max", "gpu.power_avg_max",
             "gpu.sm_clock_mean", "gpu.util_mean", "gpu.throttle_pct", "gpu.hw_slowdown_episodes",
             "gpu.energy", "gpu.pcie_gen", "gpu.pcie_width", "gpu.pcie_replays", "gpu.ecc_corrected",
             "gpu.ecc_uncorrected", "gpu.lost")
BURN = ("gpu_burn.ok", "gpu_burn.tflops", "gpu_burn.errors", "gpu_burn.temp_max", "gpu_burn.iterations",
        "gpu_burn.mem_errors")


class GpuBurnParams(TelemetryParams, Params):
    """Which engine burns the GPUs, for how long, and how hard."""

    engine: Literal["auto", "gpu-burn", "builtin", "dcgm"] = "gpu-burn"
    duration: WholeSeconds = Field(60, ge=1, le=7 * 24 * 3600,
                                   description="seconds of load (gpu-burn, builtin)")
    dtype: Literal["bf16", "fp16", "tf32", "fp32", "fp64"] = Field("bf16", description="builtin engine")
    backend: Literal["auto", "torch", "cupy", "numpy"] = Field(
        "auto", description="builtin engine: auto = PyTorch, else CuPy; numpy burns the CPU (tests)")
    size: Optional[int] = Field(None, ge=16, le=65536, description="builtin engine: matrix side")
    hang_grace: WholeSeconds = Field(
        int(burn_engine.GRACE_S), ge=1, le=3600, description="builtin engine: seconds a GPU may overrun "
        "its burn time (counted from its own readiness) before it is reported hung")
    binary: str = Field("gpu_burn", description="path or name of wilicc/gpu-burn's gpu_burn")
    compare_kernel: Optional[str] = Field(
        None, description="compare kernel for gpu_burn -c; default: compare.fatbin (builds since "
        "wilicc/gpu-burn dfc3042), else compare.ptx (older builds), next to the binary, if any")
    doubles: bool = Field(False, description="gpu_burn -d: FP64 instead of FP32")
    tensor_cores: bool = Field(False, description="gpu_burn -tc: use tensor cores")
    memory: Optional[str] = Field(None, description="gpu_burn -m: '90%' of free memory or megabytes")
    dcgm_level: int = Field(3, ge=1, le=4, description="dcgmi diag -r level (dcgm engine)")
    sibling_tolerance: Optional[float] = Field(
        SIBLING_TFLOPS_TOLERANCE, gt=0, lt=1, description="a GPU more than this fraction below the median "
        "gpu_burn.tflops of its siblings (3 or more) fails; null to turn off")

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not (v.rstrip("%").isdigit() and int(v.rstrip("%")) > 0):
            raise ValueError(f"memory must be a percentage such as '90%' or megabytes, got {v!r}")
        return v


def _backend_installed(dtype: str) -> bool:
    """Whether the builtin engine can burn `dtype` here (found, not imported: importing takes seconds)."""
    return find_spec("torch") is not None or (dtype not in ("bf16", "tf32") and find_spec("cupy") is not None)


def resolved(params: GpuBurnParams) -> GpuBurnParams:
    """`auto` made concrete (see the module docstring); other engines as they are."""
    if params.engine != "auto":
        return params
    if _backend_installed(params.dtype):
        return params.model_copy(update={"engine": "builtin"})
    if shutil.which(params.binary):
        return params.model_copy(update={"engine": "gpu-burn"})
    raise ToolMissing(f"no burn engine here: the builtin {params.dtype} burn needs PyTorch (pip install "
                      f"torch), else wilicc/gpu-burn's {params.binary} on PATH", argv=(params.binary,))


COMPARE_KERNELS = ("compare.fatbin", "compare.ptx")  # gpu-burn's build output since dfc3042 (#148), before


def _kernel(params: GpuBurnParams) -> Optional[str]:
    """The compare kernel: as given, else compare.fatbin or compare.ptx next to the binary (found on
    PATH when given by name). gpu_burn loads either with cuModuleLoad."""
    if params.compare_kernel is not None:
        return params.compare_kernel
    folder = Path(shutil.which(params.binary) or params.binary).parent
    return next((str(folder / k) for k in COMPARE_KERNELS if (folder / k).is_file()), None)


GPU_BURN_SWITCHES = ("-h", "-l", "-d", "-tc")  # gpu_burn looks for these anywhere in every argument


def _switch_in(arg: str) -> Optional[str]:
    return next((s for s in GPU_BURN_SWITCHES if s in arg), None)


def safe_kernel(path: str) -> tuple[str, Optional[str]]:
    """(path to give gpu_burn -c, directory to remove afterwards). gpu_burn tests each argument for
    '-h', '-l', '-d', '-tc' as substrings, so a kernel path holding one would print help, list
    GPUs or switch to doubles: such a file is reached through a symlink in a fresh private directory."""
    if _switch_in(path) is None:
        return path, None
    tmp = tempfile.mkdtemp(prefix="harness_ptx_", dir="/tmp")
    name = os.path.basename(path) if _switch_in(os.path.basename(path)) is None else "compare.fatbin"
    link = os.path.join(tmp, name)
    if _switch_in(link) is not None:  # pragma: no cover - mkdtemp's names hold no '-'
        raise ToolError(f"no safe path for gpu_burn's compare kernel {path!r}", argv=(path,))
    os.symlink(os.path.abspath(path), link)
    return link, tmp


def build_argv(params: GpuBurnParams, kernel: Optional[str] = None) -> list[str]:
    """The command line of the chosen engine (`kernel`: the compare kernel path to pass, if not found)."""
    if params.engine == "dcgm":
        return ["dcgmi", "diag", "-r", str(params.dcgm_level), "-j"]
    if params.engine == "builtin":
        argv = [sys.executable, "-m", "harness.engines.burn", "--seconds", str(params.duration),
                "--dtype", params.dtype, "--backend", params.backend, "--grace", str(params.hang_grace)]
        return argv + (["--size", str(params.size)] if params.size else [])
    argv = [params.binary]
    if params.doubles:
        argv.append("-d")
    if params.tensor_cores:
        argv.append("-tc")
    if params.memory is not None:
        argv.append(f"-m{params.memory}")
    kernel = kernel or _kernel(params)
    if kernel is not None:
        argv += ["-c", kernel]
    return [*argv, str(params.duration)]


def estimate_s(params: GpuBurnParams) -> float:
    if params.engine == "dcgm":
        return DCGM_LEVEL_S[params.dcgm_level] / 3
    return params.duration + (3.0 if params.engine == "builtin" else 15.0)


def budget_s(params: GpuBurnParams) -> float:
    """The outer bound on the engine. The builtin burn bounds each GPU itself (burn.SETUP_S to get
    ready, then the burn and burn.GRACE_S) and names the one that hangs: its bound comes first."""
    if params.engine == "dcgm":
        return DCGM_LEVEL_S[params.dcgm_level]
    if params.engine == "builtin":
        return params.duration + burn_engine.SETUP_S + params.hang_grace + SLACK_S
    return params.duration + SLACK_S


def plan(params: GpuBurnParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    n = len(inventory.get("gpus", []))
    try:
        params = resolved(params)
    except ToolMissing as e:  # show the first choice, and why it cannot run
        first = params.model_copy(update={"engine": "builtin"})
        return [PlannedCommand(tuple(build_argv(first)), f"engine auto: {e}")]
    note = (f"{params.engine} on {n or 'all'} GPU(s), about {estimate_s(params):.0f} s; "
            f"telemetry every {params.telemetry_period:g} s")
    return [PlannedCommand(tuple(build_argv(params)), note)]


def run(params: GpuBurnParams, ctx: CheckContext) -> CheckOutput:
    """Run the engine, prove it did the work on every GPU, return per-GPU metrics and verdicts."""
    params = resolved(params)
    kernel, tmp = (None, None)
    if params.engine == "gpu-burn" and _kernel(params) is not None:
        kernel, tmp = safe_kernel(str(_kernel(params)))
    argv = build_argv(params, kernel)
    ctx.progress(f"{params.engine}: about {estimate_s(params):.0f} s")
    # CUDA ordinal i = NVML's GPU ordinals[i] (the inventory's numbering): bus order, every GPU by UUID
    cuda, ordinals = gpu_identity.cuda_visible(ctx.inventory.get("gpus", []))
    env: dict[str, str] | None = cuda
    if params.engine == "dcgm":
        env, ordinals = None, tuple(range(len(ctx.inventory.get("gpus", []))))
    extra: list[str] = []
    try:
        res = ctx.run_tool(argv, name=params.engine, timeout_s=budget_s(params), env=env, check_rc=False)
    except ToolTimeout as e:
        if params.engine != "builtin":
            raise
        parsed = gpu_identity.renumber(_cut_off(ctx, e), ordinals)  # the engine's own bounds did not end it
        extra.append(str(e))
    else:
        if res.interrupted:
            raise ToolError(f"{params.engine}: interrupted; its process group was killed", argv=res.argv)
        text = res.stdout() + "\n" + res.stderr()
        parser = {"dcgm": dcgm.parse, "builtin": burnlog.parse}.get(params.engine, gpuburn.parse)
        parsed = gpu_identity.renumber(parser(text if params.engine != "builtin" else res.stdout()), ordinals)
        if not parsed.metrics and res.rc != 0:  # nothing to judge: the tool itself failed
            why = "; ".join(parsed.problems[:2]) or res.tail(300) or "no output"
            raise ToolError(f"{params.engine}: exit {res.rc}: {why}", argv=res.argv, rc=res.rc,
                            output_tail=res.tail())
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    problems = [*extra, *parsed.problems, *_coverage(parsed, ctx, params)]
    problems += gpu_identity.cuda_order_problems(parsed.details.get("pci_bus_ids") or [],
                                                 ctx.inventory.get("gpus", []), ordinals)
    if params.engine == "dcgm":
        problems += _dcgm_exercised(parsed, params)
        found = _dcgm_verdicts(parsed)
    else:
        found = _burn_verdicts(parsed, params.engine, parsed.details.get("faults") or {},
                               gpu_identity.names(ctx.inventory.get("gpus", [])))
    details = {"engine": params.engine, **{k: v for k, v in parsed.details.items() if v not in ({}, [])}}
    return CheckOutput(parsed.metrics, tuple(problems), details, _summary(parsed.metrics, params),
                       findings=found)


def _cut_off(ctx: CheckContext, e: ToolTimeout) -> ParseResult:
    """The builtin burn's output up to its outer timeout: the GPUs that reported keep their results,
    the ones that did not are named hung (the engine bounds each GPU itself, so only a GPU or driver
    that hangs the engine's own process gets here). ToolTimeout again when it never started."""
    run = ctx.tool_runs[-1]
    try:
        text = (ctx.run_dir / run.stdout_file).read_text(encoding="utf-8", errors="replace")
    except OSError:
        raise e from None
    first = burnlog.parse(text)
    devices = first.details.get("devices") or []
    if not devices:
        raise e
    said = burnlog.reported(text)
    why = (f"hung: no result when the burn's outer bound of {run.duration_s:.0f} s ran out; the engine "
           "was killed")
    late = "".join(json.dumps({"event": "error", "gpu": d, "message": why}) + "\n"
                   for d in devices if d not in said)
    return burnlog.parse(text + "\n" + late)


def verdicts(params: GpuBurnParams, hardware: Mapping[str, Any]) -> list[str]:
    """The built-in verdicts as --dry-run lines."""
    try:
        params = resolved(params)
    except ToolMissing:
        pass  # auto with no engine here: described for either
    if params.engine == "dcgm":
        return [f"every dcgmi diag -r {params.dcgm_level} test must pass (a warning fails too); a run "
                "that skipped every hardware test is invalid",
                "DCGM's own internal errors and deployment warnings about the setup (persistence mode, a "
                "service or library) are errors of the environment, not the GPU's"]
    fault = {"gpu-burn": "FAULTY (computation errors)", "builtin": "a product that differs from the first"}
    what = fault.get(params.engine, "FAULTY, or a product that differs from the first,")
    return [f"{what} fails its GPU, and so does a GPU that hung or died while the others worked; a GPU "
            "that did no work, or a missing final verdict, makes the run invalid; every GPU NVML sees "
            "must be reported"]


def own_rules(params: GpuBurnParams) -> list[siblings.SiblingRule]:
    """gpu_burn and builtin: the sibling rule on TFLOPS across GPUs (judged by compare.judge, listed
    by --dry-run)."""
    if params.engine == "dcgm" or params.sibling_tolerance is None:
        return []
    return [siblings.SiblingRule("gpu_burn.tflops", ("gpu",), params.sibling_tolerance, "higher")]


def _gpus_seen(parsed: ParseResult) -> set[int]:
    return {int(m.labels["gpu"]) for m in parsed.metrics if isinstance(m.labels.get("gpu"), int)}


def _coverage(parsed: ParseResult, ctx: CheckContext, params: GpuBurnParams) -> list[str]:
    """Every GPU NVML sees must be reported by the engine."""
    expected = len(ctx.inventory.get("gpus", []))
    seen = _gpus_seen(parsed)
    if not expected or not parsed.metrics:
        return []
    if params.engine == "dcgm" and not seen:
        return []  # a table with "All" results names no GPU; the per-test verdicts still apply
    missing = sorted(set(range(expected)) - seen)
    if missing:
        return [f"{params.engine} reported {len(seen)} of the {expected} GPUs NVML sees; missing "
                f"GPU {', '.join(map(str, missing))}"]
    return []


def _burn_verdicts(parsed: ParseResult, engine: str, faults: Mapping[str, str] | None = None,
                   names: Mapping[int, str] | None = None) -> tuple[Finding, ...]:
    """GPUs with computation errors (or the builtin burn's `faults`: memory pattern, reference,
    cross-GPU disagreement) fail, and so do GPUs that hung or died during the burn (details.dead),
    also when the run is not whole: the others' errors are still judged. One pass row when all
    were OK and the run was whole."""
    errors = {m.labels["gpu"]: m.value for m in parsed.metrics if m.name == "gpu_burn.errors"}
    dead = parsed.details.get("dead") or {}
    out = []
    oks = [m for m in parsed.metrics if m.name == "gpu_burn.ok"]
    for m in oks:
        if m.value >= 1:
            continue
        g = m.labels["gpu"]
        who = (names or {}).get(int(g), f"GPU {g}") if isinstance(g, int) else f"GPU {g}"
        n = errors.get(g)
        if str(g) in dead:
            why = f"did not finish the burn: {dead[str(g)]}"
        elif n:
            word = "FAULTY" if engine == "gpu-burn" else "products differ from the first"
            why = f"{word} ({n:,.0f} computation errors)"
        elif (faults or {}).get(str(g)):
            why = f"wrong results ({(faults or {})[str(g)]})"
        elif parsed.valid:
            word = "FAULTY" if engine == "gpu-burn" else "products differ from the first"
            why = f"{word} (computation errors, not in the output kept)"
        else:
            continue  # not OK because the run was not whole: the problems say why (ERRORED)
        out.append(Finding(metric="gpu_burn.ok", labels=m.labels, outcome=Outcome.FAIL,
                           measured=m.value, unit=COUNT, reference=1.0, low=1.0,
                           message=f"{who}: {why}", source=SOURCE))
    if oks and not out and parsed.valid:
        out.append(Finding(metric="gpu_burn.ok", outcome=Outcome.PASS, measured=1.0, unit=COUNT,
                           reference=1.0, low=1.0, reduce="min",
                           message=f"all {len(oks)} GPUs OK, no computation errors", source=SOURCE))
    return tuple(out)


def _dcgm_verdicts(parsed: ParseResult) -> tuple[Finding, ...]:
    """Each failed or warned DCGM test fails with DCGM's own message; an environment problem DCGM
    reported (internal error, setup) is an error."""
    messages = {f.split(":", 1)[0]: f for f in parsed.details.get("failures", [])}
    out = []
    results = [m for m in parsed.metrics if m.name == "dcgm.result"]
    for m in results:
        if m.value >= 1:
            continue
        where = str(m.labels["test"]) + (f" GPU {m.labels['gpu']}" if "gpu" in m.labels else "")
        out.append(Finding(metric="dcgm.result", labels=m.labels, outcome=Outcome.FAIL, measured=m.value,
                           unit=COUNT, reference=1.0, low=1.0,
                           message=messages.get(where, f"{where}: not passed"), source="dcgmi diag"))
    out += [Finding(metric="dcgm.result", outcome=Outcome.ERROR, unit=COUNT, reference=1.0, low=1.0,
                    message=f"not a hardware verdict: {msg}", source="dcgmi diag")
            for msg in parsed.details.get("environment", [])]
    if results and not out:
        out.append(Finding(metric="dcgm.result", outcome=Outcome.PASS, measured=1.0, unit=COUNT,
                           reference=1.0, low=1.0, reduce="min",
                           message=f"all {len(results)} DCGM test results passed", source="dcgmi diag"))
    return tuple(out)


def _dcgm_exercised(parsed: ParseResult, params: GpuBurnParams) -> list[str]:
    """At level 2 and above DCGM must have run more than the deployment checks."""
    ran = parsed.details.get("ran_by_category", {})
    if params.dcgm_level >= 2 and parsed.metrics and not (set(ran) - {"deployment"}):
        return [f"dcgmi diag -r {params.dcgm_level} skipped every hardware, integration and stress "
                "test: no GPU was exercised"]
    return []


def _summary(metrics: Sequence[Metric], params: GpuBurnParams) -> str:
    if params.engine == "dcgm":
        res = [m.value for m in metrics if m.name == "dcgm.result"]
        return f"dcgmi diag -r {params.dcgm_level}: {sum(1 for v in res if v >= 1)} of {len(res)} passed"
    tf = [m.value for m in metrics if m.name == "gpu_burn.tflops"]
    ok = [m.value for m in metrics if m.name == "gpu_burn.ok"]
    what = "gpu_burn" if params.engine == "gpu-burn" else f"builtin {params.dtype} burn"
    text = f"{what} {params.duration} s: {sum(1 for v in ok if v >= 1)} of {len(ok)} GPUs OK"
    if tf:
        text += f"; {fmt_num(min(tf))}-{fmt_value(max(tf), TFLOPS)} (median {fmt_num(statistics.median(tf))})"
    return text


def declared(params: GpuBurnParams) -> Mapping[str, MetricSpec]:
    """The engine's own metrics."""
    return catalog.subset(["dcgm.result"] if params.engine == "dcgm" else list(BURN))


KIND = CheckKind(
    name="gpu_burn",
    description="load every GPU (builtin matmuls, gpu_burn or dcgmi diag) with telemetry; errors, TFLOPS, "
                "throttling",
    params=GpuBurnParams,
    metrics=catalog.subset(list(TELEMETRY)),
    run=run,
    plan=plan,
    hooks=KindHooks(
        needs=frozenset({"gpu"}),
        declared_metrics=declared,
        estimate_s=estimate_s,
        own_rules=own_rules,
        verdicts=verdicts,
        loads_node=True,
        settle=True,  # measures: starts on idle, cooled GPUs (run/settle)
        requires=(Need("gpu_burn", "build github.com/wilicc/gpu-burn and put gpu_burn (and compare.fatbin, "
                       "or compare.ptx from builds before 2026-05) on PATH",
                       use="engine: gpu-burn (default)", group="engine", version_args=()),
                  needs.torch("engine: builtin", "engine"), needs.cupy("engine: builtin", "engine"),
                  Need("dcgmi", needs.DCGM_HINT, use="engine: dcgm",
                       group="engine")),
    ),
)
