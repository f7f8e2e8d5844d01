"""Check kind `nccl`: collective bandwidth with the nccl-tests binaries (all_reduce_perf, ...).

Each op runs its `<op>_perf` binary once, over the size range. Without a launcher it is one
process driving `ngpus` GPUs (-g, default every GPU found). With a launcher template, an argv
list such as ["mpirun", "-np", "{nranks}", "--allow-run-as-root"] or
["srun", "--ntasks={nranks}", "--gpus-per-task=1"], it runs one process per GPU (-g 1 unless
`ngpus` says otherwise): the only placeholders are {nranks} and {gpus_per_rank}, replaced as
whole text, never given to a shell. NCCL_* variables from `env` are set for the run; the
effective NCCL_* environment is recorded in the details.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import Field, field_validator

from harness import catalog
from harness.checks import gpu_identity, needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, Need, Params, PlannedCommand
from harness.errors import ToolError
from harness.model import Finding, Metric, Outcome
from harness.parsers import nccl as nccl_parser
from harness.parsers.base import last_line as _last
from harness.units import COUNT, check_size, parse_size

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv", "broadcast",
             "reduce", "gather", "scatter", "hypercube"]
DEFAULT_OPS: tuple[Op, ...] = ("all_reduce",)
PLACEHOLDERS = ("{nranks}", "{gpus_per_rank}")
_BRACES = re.compile(r"\{[^{}]*\}|[{}]")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


class NcclParams(Params):
    """Which collectives, over which sizes, on how many GPUs and processes."""

    ops: list[Op] = Field(default_factory=lambda: list(DEFAULT_OPS), min_length=1)
    bin_dir: Optional[str] = Field(None, description="directory of the *_perf binaries; default PATH")
    minbytes: Union[int, str] = Field(8, description="-b; k/M/G are binary (16G = 17179869184)")
    maxbytes: Union[int, str] = Field("16G", description="-e")
    stepfactor: int = Field(2, ge=2, le=1024, description="-f")
    ngpus: Optional[int] = Field(None, ge=1, le=64, description="-g, GPUs per process")
    nranks: Optional[int] = Field(None, ge=1, le=100_000, description="processes (with a launcher)")
    iters: int = Field(20, ge=1, le=100_000, description="-n")
    warmup: int = Field(5, ge=0, le=100_000, description="-w")
    check: bool = Field(True, description="-c 1: verify results (#wrong)")
    datatype: Optional[str] = Field(None, pattern=r"^[a-z0-9_]{2,16}$", description="-d")
    redop: Optional[str] = Field(None, pattern=r"^[a-z]{2,8}$", description="-o")
    env: dict[str, str] = Field(default_factory=dict, description="NCCL_* and other variables")
    launcher: Optional[list[str]] = Field(None, min_length=1,
                                          description="argv template, e.g. [mpirun, -np, '{nranks}']")

    @field_validator("minbytes", "maxbytes")
    @classmethod
    def _valid_size(cls, v: Union[int, str]) -> Union[int, str]:
        return check_size(v)

    @field_validator("ops")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("an op is listed twice")
        return v

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [k for k in v if not _ENV_NAME.match(k)]
        if bad:
            raise ValueError(f"not environment variable names: {', '.join(bad)}")
        return v

    @field_validator("launcher")
    @classmethod
    def _placeholders(cls, v: Optional[list[str]]) -> Optional[list[str]]:
        for arg in v or []:
            for brace in _BRACES.findall(arg):
                if brace not in PLACEHOLDERS:
                    raise ValueError(f"unknown placeholder {brace!r} in launcher argument {arg!r}; "
                                     f"allowed: {', '.join(PLACEHOLDERS)}")
        return v


def _gpus_found(inventory: Mapping[str, Any]) -> int:
    """The GPUs one process can drive: those cuda_env makes visible (a GPU without a UUID is not)."""
    gpus = inventory.get("gpus")
    return len(gpu_identity.cuda_visible(gpus)[1]) if isinstance(gpus, list) else 0


def run_env(params: NcclParams, inventory: Mapping[str, Any]) -> dict[str, str] | None:
    """Without a launcher, the GPUs NVML sees by UUID (an inherited CUDA_VISIBLE_DEVICES from a
    partial Slurm or Kubernetes allocation would not have `-g` of them); the check's `env` wins. A
    launcher sets each rank's own."""
    if params.launcher is not None:
        return params.env or None
    gpus = inventory.get("gpus")
    return {**gpu_identity.cuda_env(gpus if isinstance(gpus, list) else []), **params.env}


def layout(params: NcclParams, inventory: Mapping[str, Any]) -> tuple[int, int]:
    """(processes, GPUs per process) for this machine."""
    found = _gpus_found(inventory) or 1
    if params.launcher is None:
        return 1, params.ngpus or found
    per = params.ngpus or 1
    return params.nranks or max(1, found // per), per


def build_argv(params: NcclParams, op: str, nranks: int, gpus_per_rank: int) -> list[str]:
    """The command line for one op: the launcher (if any) then the nccl-tests binary."""
    binary = f"{op}_perf"
    argv = [str(Path(params.bin_dir) / binary) if params.bin_dir else binary,
            "-b", str(parse_size(params.minbytes)), "-e", str(parse_size(params.maxbytes)),
            "-f", str(params.stepfactor), "-g", str(gpus_per_rank), "-n", str(params.iters),
            "-w", str(params.warmup), "-c", "1" if params.check else "0"]
    if params.datatype:
        argv += ["-d", params.datatype]
    if params.redop:
        argv += ["-o", params.redop]
    if params.launcher is None:
        return argv
    values = {"{nranks}": str(nranks), "{gpus_per_rank}": str(gpus_per_rank)}
    launch = []
    for arg in params.launcher:
        for key, value in values.items():
            arg = arg.replace(key, value)
        launch.append(arg)
    return [*launch, *argv]


def plan(params: NcclParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    """One command line per op."""
    nranks, per = layout(params, inventory)
    note = f"{nranks} process(es) x {per} GPU(s)"
    if params.env:
        note += "; env " + " ".join(f"{k}={v}" for k, v in sorted(params.env.items()))
    return [PlannedCommand(tuple(build_argv(params, op, nranks, per)), note) for op in params.ops]


def effective_env(params: NcclParams) -> dict[str, str]:
    """NCCL_* variables from the harness's environment, overridden by the check's `env`."""
    inherited = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "CUDA_VISIBLE"))}
    return dict(sorted({**inherited, **params.env}.items()))




def run(params: NcclParams, ctx: CheckContext) -> CheckOutput:
    """Every op in turn; metrics labelled op, size, placement (and dtype, redop)."""
    nranks, per = layout(params, ctx.inventory)
    metrics: list[Metric] = []
    problems: list[str] = []
    tests: list[Any] = []
    version = None
    for op in params.ops:
        ctx.progress(f"nccl-tests {op}_perf: {nranks} x {per} GPU(s)")
        argv = build_argv(params, op, nranks, per)
        res = ctx.run_tool(argv, name=f"{op}_perf", env=run_env(params, ctx.inventory), check_rc=False)
        if res.interrupted:
            raise ToolError(f"{op}_perf: interrupted; its process group was killed", argv=res.argv)
        parsed = nccl_parser.parse(res.stdout() + "\n" + res.stderr(), op=op)
        if not any(m.name == "nccl.busbw" for m in parsed.metrics):
            why = "; ".join(parsed.problems) or "no output"
            how = f"exit {res.rc}" if res.rc else "exit 0"
            raise ToolError(f"{op}_perf ({how}): {why}" + (f"; {_last(res.tail(600))}" if res.rc else ""),
                            argv=res.argv, rc=res.rc, output_tail=res.tail())
        problems += list(parsed.problems)
        if res.rc != 0:
            problems.append(f"{op}_perf exited with status {res.rc}: {_last(res.tail(600))}")
        metrics += parsed.metrics
        tests += parsed.details.get("tests", [])
        version = version or parsed.details.get("nccl_version")
    details = {"nccl_version": version, "processes": nranks, "gpus_per_process": per,
               "env": {**effective_env(params), **(run_env(params, ctx.inventory) or {})}, "tests": tests}
    return CheckOutput(tuple(metrics), tuple(problems), details, _summary(metrics),
                       findings=wrong_findings(metrics))


def wrong_findings(metrics: Sequence[Metric]) -> tuple[Finding, ...]:
    """nccl-tests' own check (-c 1) found wrong results: the data came back corrupted, a failure
    of the GPUs or the fabric, never of the harness. One failing finding per op, at its first bad size."""
    out = []
    for op in dict.fromkeys(str(m.labels.get("op")) for m in metrics):
        bad = [m for m in metrics
               if m.name == "nccl.wrong" and m.value > 0 and str(m.labels.get("op")) == op]
        if not bad:
            continue
        first = min(bad, key=lambda m: int(m.labels.get("size", 0)))
        out.append(Finding(metric="nccl.wrong", labels=first.labels, outcome=Outcome.FAIL,
                           measured=first.value, unit=COUNT, high=0.0, source="nccl-tests",
                           message=f"{op}: wrong results in {len(bad)} of the table's rows (first: "
                           f"{_human(int(first.labels.get('size', 0)))} {first.labels.get('placement')}, "
                           f"{first.value:,.0f} wrong elements): data corrupted between the GPUs"))
    return tuple(out)


def _human(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def _summary(metrics: Sequence[Metric]) -> str:
    parts = []
    for op in dict.fromkeys(str(m.labels.get("op")) for m in metrics):
        rows = [m for m in metrics if m.name == "nccl.busbw" and m.labels.get("op") == op
                and m.labels.get("placement") == "out-of-place"]
        if rows:
            top = max(rows, key=lambda m: int(m.labels.get("size", 0)))
            parts.append(f"{op} {top.value:.1f} GB/s busbw at {_human(int(top.labels.get('size', 0)))}")
    return "; ".join(parts) or "no measurement"


KIND = CheckKind(
    name="nccl",
    description="NCCL collective bandwidth with nccl-tests (single process or through a launcher)",
    params=NcclParams,
    metrics=catalog.subset(["nccl.busbw", "nccl.algbw", "nccl.time", "nccl.wrong",
                            "nccl.avg_busbw", "nccl.ranks"]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        needs=frozenset({"gpu"}),
        loads_node=True,
        settle=True,  # measures: starts on idle, cooled GPUs (run/settle)
        judges_pcie_link=True,  # collectives leave the node (and cross NUMA) over each GPU's PCIe link
        requires=(Need("all_reduce_perf", needs.NCCL_TESTS_HINT, version_args=()),
                  needs.tool("mpirun", use="launcher: mpirun")),
    ),
)
