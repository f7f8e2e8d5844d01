"""Check kind `gpu_bandwidth`: host-GPU and GPU-GPU copy bandwidth, with one of three engines.

* `nvbandwidth` (default): one `nvbandwidth -t TEST` per test, so each test's output is kept
  on its own and a crash in one test does not hide the others' numbers (parsers/nvbandwidth).
* `bandwidthtest`: the CUDA samples' `bandwidthTest --device=N` for every GPU
  (parsers/cudasamples); its rows are labelled test=bandwidthTest and size, so a profile's
  nvbandwidth-named references do not select them: state the suite's own `expect:`.
* `builtin`: harness/engines/copy.py in a subprocess (PyTorch or CuPy, whichever imports;
  `backend: numpy` copies host memory, for tests), parsed by parsers/copylog. Its tests carry
  the names of their nvbandwidth equivalents, so the profile's references apply.

Metrics: gpu.h2d_bw and gpu.d2h_bw {test, gpu}, gpu.p2p_bw {test, src, dst} (GB/s), and per
engine gpu.bw_sum, gpu.p2p_lat, gpu.host_lat, gpu.d2d_bw. Every GPU NVML sees must have its
host copies measured. The sibling rule flags a GPU or GPU pair far below its test's median.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Optional

from pydantic import Field, field_validator, model_validator

from harness import catalog, siblings
from harness.checks import gpu_identity, needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, Need, Params, PlannedCommand
from harness.errors import ToolError
from harness.model import Metric
from harness.parsers import copylog, cudasamples
from harness.parsers import nvbandwidth as nvb_parser
from harness.parsers.base import last_line as _last

DEFAULT_TESTS = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
                 "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce")
BINARIES = {"nvbandwidth": "nvbandwidth", "bandwidthtest": "bandwidthTest"}
# engine -> params only that engine reads
OWN = {"nvbandwidth": {"tests"}, "bandwidthtest": {"memory"}, "builtin": {"backend", "p2p"}}
SIBLINGS = (("gpu.h2d_bw", ("gpu",)), ("gpu.d2h_bw", ("gpu",)), ("gpu.d2d_bw", ("gpu",)),
            ("gpu.p2p_bw", ("src", "dst")))


class GpuBandwidthParams(Params):
    """Which engine, which tests, how big and how often."""

    engine: Literal["nvbandwidth", "bandwidthtest", "builtin"] = "nvbandwidth"
    binary: Optional[str] = Field(None, description="nvbandwidth or bandwidthTest: path or name on PATH")
    tests: list[str] = Field(default_factory=lambda: list(DEFAULT_TESTS), min_length=1,
                             description="nvbandwidth test names (nvbandwidth -l lists them)")
    buffer_mib: Optional[int] = Field(None, ge=1, le=65536, description="nvbandwidth -b / builtin "
                                      "copy size, MiB (default 512)")
    samples: Optional[int] = Field(None, ge=1, le=1000, description="trials per test, the median "
                                   "reported: nvbandwidth -i (its default 3) / builtin --trials (default 3)")
    memory: Literal["pinned", "pageable"] = Field("pinned", description="bandwidthtest --memory")
    backend: Literal["auto", "torch", "cupy", "numpy"] = Field(
        "auto", description="builtin: auto = PyTorch, else CuPy; numpy copies host memory (tests)")
    p2p: bool = Field(True, description="builtin: also every ordered GPU pair")
    sibling_tolerance: Optional[float] = Field(
        0.10, gt=0, lt=1, description="fail a GPU or pair this fraction below its test's median")

    @field_validator("tests")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for t in v:
            if not re.match(r"^[a-z0-9_]{3,80}$", t):
                raise ValueError(f"not an nvbandwidth test name: {t!r}")
        if len(set(v)) != len(v):
            raise ValueError("a test is listed twice")
        return v

    @model_validator(mode="after")
    def _engine_params(self) -> GpuBandwidthParams:
        for engine, names in OWN.items():
            stray = sorted(names & self.model_fields_set)
            if engine != self.engine and stray:
                raise ValueError(f"{', '.join(stray)} applies to engine {engine}, not {self.engine}")
        if self.engine == "builtin" and self.binary is not None:
            raise ValueError("binary applies to engines nvbandwidth and bandwidthtest, not builtin")
        return self


def _binary(params: GpuBandwidthParams) -> str:
    return params.binary or BINARIES[params.engine]


def nvbandwidth_argv(params: GpuBandwidthParams, test: str) -> list[str]:
    """nvbandwidth's command line for one test."""
    argv = [_binary(params), "-t", test]
    if params.buffer_mib is not None:
        argv += ["-b", str(params.buffer_mib)]
    if params.samples is not None:
        argv += ["-i", str(params.samples)]
    return argv


def bandwidthtest_argv(params: GpuBandwidthParams, gpu: int) -> list[str]:
    return [_binary(params), f"--device={gpu}", f"--memory={params.memory}", "--mode=quick"]


def builtin_argv(params: GpuBandwidthParams) -> list[str]:
    argv = [sys.executable, "-m", "harness.engines.copy", "--backend", params.backend]
    if params.buffer_mib is not None:
        argv += ["--size", str(params.buffer_mib * 2**20)]
    if params.samples is not None:  # trials, as nvbandwidth's -i: not the copies timed per trial
        argv += ["--trials", str(params.samples)]
    return argv + ([] if params.p2p else ["--no-p2p"])


def _gpu_indices(inventory: Mapping[str, Any]) -> list[int]:
    gpus = inventory.get("gpus") or []
    return [int(g.get("index", i)) for i, g in enumerate(gpus)]


def plan(params: GpuBandwidthParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    if params.engine == "nvbandwidth":
        return [PlannedCommand(tuple(nvbandwidth_argv(params, t))) for t in params.tests]
    if params.engine == "bandwidthtest":
        gpus = _gpu_indices(inventory) or [0]
        return [PlannedCommand(tuple(bandwidthtest_argv(params, g)), "one run per GPU") for g in gpus]
    return [PlannedCommand(tuple(builtin_argv(params)), f"builtin copy test ({params.backend})")]




def _one(ctx: CheckContext, argv: list[str], name: str, parse: Any,
         what: str) -> tuple[list[Metric], list[str], dict[str, Any]]:
    """Run one tool (CUDA ordinal i = NVML's GPU ordinals[i], results relabelled to NVML's), parse
    stdout+stderr; no metric is a tool error."""
    env, ordinals = gpu_identity.cuda_visible(ctx.inventory.get("gpus", []))
    res = ctx.run_tool(argv, name=name, check_rc=False, env=env)
    if res.interrupted:
        raise ToolError(f"{what}: interrupted; its process group was killed", argv=res.argv)
    parsed = gpu_identity.renumber(parse(res.stdout() + "\n" + res.stderr()), ordinals)
    if not parsed.metrics:
        why = "; ".join(parsed.problems) or "no output"
        raise ToolError(f"{what} (exit {res.rc}): {why}", argv=res.argv, rc=res.rc, output_tail=res.tail())
    problems = list(parsed.problems)
    if res.rc != 0:
        problems.append(f"{what} exited with status {res.rc}: {_last(res.tail(600))}")
    return list(parsed.metrics), problems, dict(parsed.details)


def run(params: GpuBandwidthParams, ctx: CheckContext) -> CheckOutput:
    """The engine's runs; bandwidth metrics per GPU and GPU pair, the sibling rule, coverage."""
    metrics: list[Metric] = []
    problems: list[str] = []
    details: dict[str, Any] = {"engine": params.engine}
    if params.engine == "nvbandwidth":
        details["tests"] = {}
        for test in params.tests:
            ctx.progress(f"nvbandwidth {test}")
            m, p, d = _one(ctx, nvbandwidth_argv(params, test), f"nvbandwidth-{test}", nvb_parser.parse,
                           f"nvbandwidth -t {test}")
            metrics, problems = metrics + m, problems + p
            details["tests"][test] = {k: d.get(k) for k in ("cov", "not_measured")}
            for key in ("version", "driver"):
                details.setdefault(key, d.get(key))
    elif params.engine == "bandwidthtest":
        ordinals = gpu_identity.cuda_visible(ctx.inventory.get("gpus", []))[1]
        for gpu in _gpu_indices(ctx.inventory) or [0]:
            if ordinals and gpu not in ordinals:  # no UUID: not given to CUDA (coverage names it)
                continue
            cuda = ordinals.index(gpu) if gpu in ordinals else gpu  # CUDA's number for NVML's GPU
            ctx.progress(f"bandwidthTest GPU {gpu}")
            m, p, _ = _one(ctx, bandwidthtest_argv(params, cuda), f"bandwidthTest-gpu{gpu}",
                           cudasamples.parse_bandwidthtest, f"bandwidthTest --device={cuda}")
            metrics += [Metric(x.name, x.value, x.unit, {**x.labels, "gpu": gpu}) for x in m]
            problems += [f"GPU {gpu}: {x}" for x in p]
    else:
        ctx.progress(f"builtin copy test ({params.backend})")
        metrics, problems, d = _one(ctx, builtin_argv(params), "copy-engine", copylog.parse,
                                    "builtin copy test")
        details.update(d)
        gpus = ctx.inventory.get("gpus", [])
        problems += gpu_identity.cuda_order_problems(d.get("pci_bus_ids") or [], gpus,
                                                     gpu_identity.cuda_visible(gpus)[1])
    problems += coverage(metrics, ctx.inventory)
    return CheckOutput(tuple(metrics), tuple(problems), details, summary(metrics))


def own_rules(params: GpuBandwidthParams) -> list[siblings.SiblingRule]:
    """The sibling rule on each bandwidth the engine measures, per GPU or GPU pair (judged by compare.judge,
    listed by --dry-run)."""
    if params.sibling_tolerance is None:
        return []
    measured = {"gpu.h2d_bw", "gpu.d2h_bw", "gpu.p2p_bw", *declared(params)}
    return [siblings.SiblingRule(name, vary, params.sibling_tolerance) for name, vary in SIBLINGS
            if name in measured]


def coverage(metrics: Sequence[Metric], inventory: Mapping[str, Any]) -> list[str]:
    """Each host-copy test must have measured every GPU NVML sees."""
    want = set(_gpu_indices(inventory))
    if not want:
        return []
    seen: dict[tuple[str, str], set[int]] = {}
    for m in metrics:
        if m.name in ("gpu.h2d_bw", "gpu.d2h_bw") and isinstance(m.labels.get("gpu"), int):
            seen.setdefault((m.name, str(m.labels.get("test"))), set()).add(int(m.labels["gpu"]))
    return [f"{name} ({test}): no result for GPU {', '.join(map(str, sorted(want - got)))} of the "
            f"{len(want)} NVML sees" for (name, test), got in seen.items() if want - got]


def _who(m: Metric) -> str:
    if "gpu" in m.labels:
        return f"gpu{m.labels['gpu']}"
    return f"{m.labels.get('src', '?')}->{m.labels.get('dst', '?')}"


def summary(metrics: Sequence[Metric]) -> str:
    lows: dict[tuple[str, str], Metric] = {}
    for m in metrics:
        if m.name.endswith("_bw") and m.labels.get("part") in (None, "total"):
            key = (m.name, str(m.labels.get("test")))
            if key not in lows or m.value < lows[key].value:
                lows[key] = m
    parts = [f"{test} min {m.value:.1f} GB/s ({_who(m)})" for (_, test), m in lows.items()]
    return "; ".join(parts) or "no bandwidth measured"


def declared(params: GpuBandwidthParams) -> Mapping[str, Any]:
    """Each engine's own extra metrics."""
    extra = {"nvbandwidth": ["gpu.bw_sum", "gpu.p2p_lat", "gpu.host_lat"], "bandwidthtest": ["gpu.d2d_bw"],
             "builtin": []}[params.engine]
    return catalog.subset(extra)


KIND = CheckKind(
    name="gpu_bandwidth",
    description="host-GPU and GPU-GPU copy bandwidth (nvbandwidth, CUDA bandwidthTest or builtin copies)",
    params=GpuBandwidthParams,
    metrics=catalog.subset(["gpu.h2d_bw", "gpu.d2h_bw", "gpu.p2p_bw"]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        needs=frozenset({"gpu"}),
        declared_metrics=declared,
        own_rules=own_rules,
        loads_node=True,
        settle=True,  # measures: starts on idle, cooled GPUs (run/settle)
        judges_pcie_link=True,  # H2D/D2H ride on each GPU's PCIe link
        requires=(Need("nvbandwidth", "build github.com/NVIDIA/nvbandwidth and put it on PATH",
                       use="engine: nvbandwidth (default)", group="engine", version_args=("--help",)),
                  Need("bandwidthTest", "build github.com/NVIDIA/cuda-samples and put bandwidthTest on PATH",
                       use="engine: bandwidthtest", group="engine", version_args=()),
                  needs.torch("engine: builtin", "engine"), needs.cupy("engine: builtin", "engine")),
    ),
)
