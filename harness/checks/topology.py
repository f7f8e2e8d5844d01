"""Check kind `topology`: judge the GPU/NIC shape of `nvidia-smi topo -m` against the SKU's.

The expected shape comes from the check's params or, field by field where the params leave
it out, from the profile's `hardware.topology` block:

* `gpu_pairs: {nvlinks: 18}`: every GPU pair has at least 18 bonded NVLinks (NV18);
  `gpu_pairs: {path: [NV18]}`: every GPU pair's connection is one of these (NV# is any NVLink);
* `gpu_nic: {max_path: PXB}`: every GPU has a NIC at PXB or closer (PIX, PXB);
* `gpu_numa: {gpu0: 0, gpu4: 1}`: the NUMA node nvidia-smi reports for each GPU.

Every GPU pair, GPU or NUMA node that differs fails on its own evaluation, which names it;
a shape that holds gives one passing evaluation per rule. `file:` judges a captured output
instead of running nvidia-smi (for an operator with a matrix from another node). Without a
GPU (and no file) the check is skipped, or an error when the profile expects GPUs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from pydantic import Field

from harness import catalog
from harness.checks import needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, Params, PlannedCommand
from harness.config.models import GpuNicShape, GpuPairShape, TopologyHardware
from harness.errors import HarnessError, SkipCheck, ToolError
from harness.model import Finding, LabelValue, Metric, Outcome
from harness.parsers import topo
from harness.parsers.base import ParseResult
from harness.units import COUNT

FIELDS = ("gpu_pairs", "gpu_nic", "gpu_numa")
PARAMS_SOURCE = "check params"
PROFILE_SOURCE = "profile hardware.topology"
_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")


class TopologyParams(Params):
    """Where the matrix comes from and, optionally, the shape it must have."""

    binary: str = Field("nvidia-smi", description="path or name of nvidia-smi")
    file: Optional[str] = Field(None, description="judge this captured `nvidia-smi topo -m` output "
                                "instead of running nvidia-smi")
    gpu_pairs: Optional[GpuPairShape] = Field(None, description="overrides the profile's")
    gpu_nic: Optional[GpuNicShape] = Field(None, description="overrides the profile's")
    gpu_numa: Optional[dict[str, int]] = Field(None, description="overrides the profile's")


def expected_shape(params: TopologyParams,
                   hardware: Mapping[str, Any]) -> tuple[TopologyHardware, dict[str, str]]:
    """The shape to judge and where each part came from (params first, then the profile)."""
    profile = hardware.get("topology") or {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in FIELDS:
        mine = getattr(params, name)
        if mine is not None:
            values[name], sources[name] = mine, PARAMS_SOURCE
        elif profile.get(name) is not None:
            values[name], sources[name] = profile[name], PROFILE_SOURCE
    return TopologyHardware.model_validate(values), sources


def build_argv(params: TopologyParams) -> list[str]:
    return [params.binary, "topo", "-m"]


def plan(params: TopologyParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    if params.file is not None:
        return [PlannedCommand(("cat", params.file), "a captured nvidia-smi topo -m output, judged against "
                               "the params' shape, else the profile's hardware.topology")]
    return [PlannedCommand(tuple(build_argv(params)), "GPU/NIC connection matrix, judged against the "
                           "params' shape, else the profile's hardware.topology")]


def _need_gpus(ctx: CheckContext) -> None:
    """Skip without GPUs, unless the profile expects some (then it is an error)."""
    if ctx.inventory.get("gpus"):
        return
    reason = (ctx.inventory.get("nvml") or {}).get("reason") or "no NVIDIA GPU found"
    gpu = ctx.hardware.get("gpu") or {}
    if gpu.get("count"):  # worded as the runner words it for kinds that need a GPU
        models = gpu.get("models") or ["GPU"]
        raise HarnessError(f"profile expects {gpu['count']} x {models[0]}, found 0 ({reason})")
    raise SkipCheck(f"no NVIDIA GPU: {reason}")


def _read(params: TopologyParams, ctx: CheckContext) -> tuple[str, str]:
    """(matrix text, where it came from)."""
    if params.file is not None:
        try:
            return Path(params.file).read_text(errors="replace"), params.file
        except OSError as e:
            raise HarnessError(f"topology file {params.file}: cannot read: {e.strerror or e}") from e
    _need_gpus(ctx)
    res = ctx.run_tool(build_argv(params), name="nvidia-smi-topo")
    return res.stdout(), " ".join(build_argv(params))


def run(params: TopologyParams, ctx: CheckContext) -> CheckOutput:
    """Parse the matrix, add topo.numa_node per GPU, judge the expected shape."""
    text, origin = _read(params, ctx)
    parsed = topo.parse(text)
    if not parsed.metrics:
        raise ToolError(f"{origin}: {'; '.join(parsed.problems) or 'no matrix'}")
    shape, sources = expected_shape(params, ctx.hardware)
    metrics = (*parsed.metrics, *numa_metrics(parsed))
    found = findings(shape, sources, parsed, metrics)
    details = {"source": origin, "expected": shape.model_dump(exclude_none=True), **parsed.details}
    return CheckOutput(metrics, parsed.problems, details, summary(parsed, shape), findings=found)


def numa_metrics(parsed: ParseResult) -> list[Metric]:
    """topo.numa_node {gpu} where the NUMA Affinity cell is a single node number."""
    out = []
    for gpu, cells in parsed.details.get("affinity", {}).items():
        node = str(cells.get("NUMA Affinity", "")).strip()
        if node.isdigit():
            out.append(Metric("topo.numa_node", float(node), COUNT, {"gpu": gpu}))
    return out


def _index(name: str) -> int:
    m = re.search(r"\d+$", name)
    return int(m.group()) if m else 0


def _gpus(parsed: ParseResult) -> list[str]:
    return sorted((d for d in parsed.details.get("devices", []) if re.fullmatch(r"gpu\d+", d)), key=_index)


def _eval(metric: str, labels: Mapping[str, LabelValue], ok: bool, measured: Optional[float], source: str,
          message: str, *, low: Optional[float] = None, high: Optional[float] = None,
          reduce: str = "each") -> Finding:
    ref = low if low is not None else high
    return Finding(metric=metric, labels=labels, outcome=Outcome.PASS if ok else Outcome.FAIL,
                   measured=measured, unit=COUNT, reference=ref, low=low, high=high, reduce=reduce,
                   message=message, source=source)


def findings(shape: TopologyHardware, sources: Mapping[str, str], parsed: ParseResult,
             metrics: Sequence[Metric]) -> tuple[Finding, ...]:
    """One failing finding per GPU pair, GPU or NUMA node that differs; one pass per rule that held."""
    out: list[Finding] = []
    if shape.gpu_pairs is not None:
        out += _judge_pairs(shape.gpu_pairs, sources["gpu_pairs"], parsed, metrics)
    if shape.gpu_nic is not None:
        out += _judge_nics(shape.gpu_nic, sources["gpu_nic"], parsed, metrics)
    if shape.gpu_numa is not None:
        out += _judge_numa(shape.gpu_numa, sources["gpu_numa"], parsed, metrics)
    return tuple(out)


def _allowed(path: str, allowed: Sequence[str]) -> bool:
    return path in allowed or (path.startswith("NV") and "NV#" in allowed)


def _judge_pairs(want: GpuPairShape, source: str, parsed: ParseResult,
                 metrics: Sequence[Metric]) -> list[Finding]:
    links = {(m.labels["src"], m.labels["dst"]): m.value for m in metrics if m.name == "topo.nvlinks"}
    paths = {(m.labels["src"], m.labels["dst"]): str(m.labels["path"]) for m in metrics
             if m.name == "topo.path" and (m.labels["src"], m.labels["dst"]) in links}
    gpus = _gpus(parsed)
    pairs = [(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1:] if (a, b) in links or (b, a) in links]
    if not pairs:
        return [_eval("topo.nvlinks", {}, False, None, source, f"the matrix shows {len(gpus)} GPU(s): "
                      "no GPU pair to judge", low=want.nvlinks)]
    out: list[Finding] = []
    lowest = min(min(links.get((a, b), 0.0), links.get((b, a), 0.0)) for a, b in pairs)
    for a, b in pairs:
        # an asymmetric matrix is judged by its worse direction
        (s, d) = min(((a, b), (b, a)), key=lambda k: (links.get(k, -1.0), k != (a, b)))
        n, path = links.get((s, d), 0.0), paths.get((s, d), "?")
        if want.nvlinks is not None and n < want.nvlinks:
            out.append(_eval("topo.nvlinks", {"src": s, "dst": d}, False, n, source,
                             f"{s}-{d}: {path} ({n:.0f} NVLinks), expected NV{want.nvlinks} or more",
                             low=want.nvlinks))
        if want.path is not None and not _allowed(path, want.path):
            out.append(_eval("topo.path", {"src": s, "dst": d, "path": path}, False, None, source,
                             f"{s}-{d}: {path}, expected {' or '.join(want.path)}"))
    if not out:
        rules = ([f">= {want.nvlinks} NVLinks"] if want.nvlinks is not None else []) + \
                ([f"path {' or '.join(want.path)}"] if want.path is not None else [])
        out.append(_eval("topo.nvlinks", {}, True, lowest, source, f"all {len(pairs)} GPU pairs: "
                         f"{', '.join(rules)} (lowest NV{lowest:.0f})", low=want.nvlinks, reduce="min"))
    return out


def _judge_nics(want: GpuNicShape, source: str, parsed: ParseResult,
                metrics: Sequence[Metric]) -> list[Finding]:
    limit = topo.RANK[want.max_path]
    names = parsed.details.get("nic_names", {})
    ok_paths = " or ".join(_PATHS[:limit])
    nearest = {str(m.labels["gpu"]): (m.value, str(m.labels["nic"])) for m in metrics
               if m.name == "topo.nic_rank"}
    gpus = _gpus(parsed)
    out: list[Finding] = []
    for g in gpus:
        if g not in nearest:
            out.append(_eval("topo.nic_rank", {"gpu": g}, False, None, source,
                             f"{g}: no NIC in the matrix, expected one at {ok_paths}", high=limit))
            continue
        rank, nic = nearest[g]
        if rank > limit:
            label = f"{nic} ({names[nic]})" if nic in names else nic
            out.append(_eval("topo.nic_rank", {"gpu": g, "nic": nic}, False, rank, source,
                             f"{g}: nearest NIC {label} is at {_PATHS[int(rank) - 1]}, expected {ok_paths}",
                             high=limit))
    if not out and gpus:
        worst = max(r for r, _ in nearest.values())
        out.append(_eval("topo.nic_rank", {}, True, worst, source, f"each of the {len(gpus)} GPUs has a NIC "
                         f"at {ok_paths} (farthest {_PATHS[int(worst) - 1]})", high=limit, reduce="max"))
    return out


def _judge_numa(want: Mapping[str, int], source: str, parsed: ParseResult,
                metrics: Sequence[Metric]) -> list[Finding]:
    have = {str(m.labels["gpu"]): m.value for m in metrics if m.name == "topo.numa_node"}
    affinity = parsed.details.get("affinity", {})
    out: list[Finding] = []
    for gpu, node in sorted(want.items(), key=lambda kv: _index(kv[0])):
        got = have.get(gpu)
        if got == node:
            continue
        shown = (f"NUMA node {got:.0f}" if got is not None else "not in the matrix" if gpu not in affinity
                 else f"NUMA affinity {affinity[gpu].get('NUMA Affinity') or 'not shown'}")
        out.append(_eval("topo.numa_node", {"gpu": gpu}, False, got, source,
                         f"{gpu}: {shown}, expected NUMA node {node}", low=node, high=node))
    if not out and want:
        out.append(_eval("topo.numa_node", {}, True, None, source,
                         f"all {len(want)} GPUs on their expected NUMA nodes"))
    return out


def summary(parsed: ParseResult, shape: TopologyHardware) -> str:
    gpus = _gpus(parsed)
    nics = [d for d in parsed.details.get("devices", []) if d not in gpus]
    pair_paths: dict[str, int] = {}
    for m in parsed.metrics:
        if m.name == "topo.path" and str(m.labels["dst"]) in gpus and _index(str(m.labels["src"])) < \
                _index(str(m.labels["dst"])):
            pair_paths[str(m.labels["path"])] = pair_paths.get(str(m.labels["path"]), 0) + 1
    ranks = [int(m.value) for m in parsed.metrics if m.name == "topo.nic_rank"]
    text = f"{len(gpus)} GPUs, {len(nics)} NICs"
    if pair_paths:
        text += "; GPU pairs " + ", ".join(f"{p} x{n}" for p, n in sorted(pair_paths.items()))
    if ranks:
        text += f"; farthest nearest-NIC {_PATHS[max(ranks) - 1]}"
    if shape == TopologyHardware():
        text += "; no expected shape stated (params or profile hardware.topology)"
    return text


KIND = CheckKind(
    name="topology",
    description="GPU/NIC topology (nvidia-smi topo -m) against the expected NVLink, NIC and NUMA shape",
    params=TopologyParams,
    metrics=catalog.subset(["topo.nvlinks", "topo.path", "topo.nic_rank", "topo.numa_node"]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        loads_node=False,
        requires=(needs.nvidia_smi(),),
    ),
)
