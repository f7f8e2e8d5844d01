"""gpu_health's identity rules (pure): the GPUs NVML sees against the profile's hardware.gpu.

Count, model and memory of each GPU, from the inventory (NVML name and total memory). A GPU of
another model or with less memory than the profile states fails on that GPU; fewer or more GPUs
than the profile's count fail the node (a lost GPU is hardware), naming the PCI addresses of GPUs
on the bus that NVML does not list. Nothing is judged where the profile states nothing.

CUDA and NVML number GPUs differently (NVML by PCI bus; CUDA fastest-first unless told, and an
inherited CUDA_VISIBLE_DEVICES renumbers): `cuda_env` makes CUDA ordinal i the GPU NVML calls i,
and `cuda_order_problems` proves it from the PCI bus ids an engine reports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from harness.model import Finding, Metric, Outcome
from harness.numfmt import fmt_bytes
from harness.parsers.base import ParseResult
from harness.platform import pci
from harness.units import BYTES, COUNT

SOURCE = "profile hardware.gpu"
_GPU_NAME = re.compile(r"^gpu(\d+)$")


def cuda_env(gpus: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Environment for a CUDA tool (see cuda_visible)."""
    return cuda_visible(gpus)[0]


def cuda_visible(gpus: Sequence[Mapping[str, Any]]) -> tuple[dict[str, str], tuple[int, ...]]:
    """(environment for a CUDA tool, NVML's index of each CUDA ordinal): PCI bus order, and every GPU
    NVML names by UUID made visible in NVML's order, overriding an inherited CUDA_VISIBLE_DEVICES. A
    GPU without a UUID (lost, or NVML cannot open it) is left out, and the ordinals say which NVML GPU
    each CUDA device is, so a result is never put on the wrong GPU. No UUID at all: bus order alone."""
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    named = [i for i, g in enumerate(gpus) if str(g.get("uuid") or "").startswith(("GPU-", "MIG-"))]
    if not named:
        return env, tuple(range(len(gpus)))
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(gpus[i]["uuid"]) for i in named)
    return env, tuple(named)


def renumber(parsed: ParseResult, ordinals: Sequence[int]) -> ParseResult:
    """An engine's result with each `gpu` label (a CUDA ordinal) made NVML's index (cuda_visible)."""
    if tuple(ordinals) == tuple(range(len(ordinals))):
        return parsed

    def nvml(gpu: Any) -> Any:
        if isinstance(gpu, int):
            return ordinals[gpu] if 0 <= gpu < len(ordinals) else gpu
        m = _GPU_NAME.match(str(gpu))  # nvbandwidth's src/dst "gpu3"
        return f"gpu{ordinals[int(m.group(1))]}" if m and int(m.group(1)) < len(ordinals) else gpu

    metrics = tuple(replace(m, labels={k: nvml(v) if k in ("gpu", "src", "dst") else v
                                       for k, v in m.labels.items()}) for m in parsed.metrics)
    details = dict(parsed.details)
    if isinstance(details.get("faults"), Mapping):
        details["faults"] = {str(nvml(int(k)) if str(k).isdigit() else k): v
                             for k, v in details["faults"].items()}
    return replace(parsed, metrics=metrics, details=details)


def cuda_order_problems(reported: Sequence[Any], gpus: Sequence[Mapping[str, Any]],
                        ordinals: Sequence[int] | None = None) -> list[str]:
    """CUDA ordinal i must be the GPU NVML calls ordinals[i] (i without them): compare the PCI bus ids
    an engine reports."""
    out = []
    for i, bus in enumerate(reported):
        n = ordinals[i] if ordinals is not None and i < len(ordinals) else i
        if not bus or n >= len(gpus) or not gpus[n].get("pci_bus_id"):
            continue
        want = pci.normalize(str(gpus[n]["pci_bus_id"]))
        if pci.normalize(str(bus)) != want:
            out.append(f"CUDA device {i} is the GPU at {bus}, but NVML's GPU {n} is at "
                       f"{gpus[n]['pci_bus_id']}: GPU numbering differs, results would land on the wrong GPU")
    return out


def _gb(n: float) -> str:
    """Binary as the report shows bytes, decimal as GPU memory is sold: '79.6 GiB (85.5 GB)'."""
    return f"{fmt_bytes(n)} ({fmt_bytes(n, si=True)})"


def memory_metrics(gpus: Sequence[Mapping[str, Any]]) -> list[Metric]:
    """gpu.memory per GPU (bytes, NVML's total), where the inventory has it."""
    return [Metric("gpu.memory", float(g["memory_bytes"]), BYTES, {"gpu": i})
            for i, g in enumerate(gpus) if isinstance(g.get("memory_bytes"), (int, float))]


def describe(expected: Mapping[str, Any]) -> list[str]:
    """What findings() will hold the GPUs to, as --dry-run lines."""
    out = []
    if expected.get("count"):
        out.append(f"NVML must see {expected['count']} GPUs [profile hardware.gpu.count]")
    if expected.get("models"):
        out.append(f"every GPU is {' or '.join(map(str, expected['models']))} [profile hardware.gpu.models]")
    if expected.get("memory_min_bytes"):
        out.append(f"every GPU has at least {_gb(expected['memory_min_bytes'])} "
                   "[profile hardware.gpu.memory_min_bytes]")
    return out


def findings(gpus: Sequence[Mapping[str, Any]], expected: Mapping[str, Any],
             on_bus: Sequence[Mapping[str, Any]] = ()) -> list[Finding]:
    """Findings on count, model and memory; one passing row per rule that found nothing wrong.
    `on_bus`: the inventory's NVIDIA GPUs on the PCI bus, to name those NVML does not list."""
    out: list[Finding] = []
    count = expected.get("count") or 0
    models = [str(m) for m in expected.get("models") or []]
    min_mem = expected.get("memory_min_bytes")
    shown = f"{count} x {models[0] if models else 'GPU'}"
    if count:
        n = len(gpus)
        ok = n == count
        msg = (f"NVML sees {n} GPUs, as the profile expects" if ok
               else f"the profile expects {count} GPUs ({shown}), found {n}{pci.missing_text(gpus, on_bus)}")
        out.append(Finding(metric="gpu.count", outcome=Outcome.PASS if ok else Outcome.FAIL,
                           measured=float(n), unit=COUNT, reference=float(count), low=float(count),
                           high=float(count), message=msg, source=SOURCE))
    if models:
        wanted = {m.lower() for m in models}
        names = [str(g.get("name") or "") for g in gpus]
        odd = [(i, name) for i, name in enumerate(names)  # a GPU NVML cannot open: gpu_health names it
               if name.lower() not in wanted and not gpus[i].get("error")]
        for i, name in odd:
            out.append(Finding(metric="gpu.model", labels={"gpu": i}, outcome=Outcome.FAIL, unit=COUNT,
                               message=f"GPU {i} is {name or 'unnamed'}; the profile expects "
                               f"{' or '.join(models)}", source=SOURCE))
        if gpus and not odd:
            msg = f"all {len(gpus)} GPUs are {' or '.join(sorted(set(names)))}"
            out.append(Finding(metric="gpu.model", outcome=Outcome.PASS, unit=COUNT, message=msg,
                               source=SOURCE))
    if min_mem:
        mem = memory_metrics(gpus)
        small = [m for m in mem if m.value < min_mem]
        for m in small:
            out.append(Finding(metric="gpu.memory", labels=m.labels, outcome=Outcome.FAIL, measured=m.value,
                               unit=BYTES, low=float(min_mem), message=f"GPU {m.labels['gpu']} has "
                               f"{_gb(m.value)}; the profile expects at least {_gb(min_mem)}", source=SOURCE))
        if mem and not small:
            least = min(mem, key=lambda m: m.value)
            out.append(Finding(metric="gpu.memory", outcome=Outcome.PASS, measured=least.value, unit=BYTES,
                               low=float(min_mem), reduce="min", message=f"every GPU has at least "
                               f"{_gb(least.value)}; profile: {_gb(min_mem)}", source=SOURCE))
    return out
