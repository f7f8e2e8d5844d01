"""The `inventory` kind: who this node is (serials matter: history keys on them) and its counts.

A count the inventory could not read (NVML not loadable, lsblk failed) is unknown: no metric,
its reason recorded, and a profile rule on it errors naming that reason; it never reads as 0.
With NVML missing, gpu.count is the number of NVIDIA GPUs on the PCI bus where that is known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness import catalog
from harness.checks import needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, Params, PlannedCommand
from harness.model import Finding, Metric, Outcome
from harness.numfmt import fmt_bytes, plural
from harness.units import BYTES, COUNT


class InventoryParams(Params):
    """No parameters: the inventory reads what the node has."""


def gpu_count(inv: Mapping[str, Any]) -> tuple[int | None, str]:
    """(GPUs, how counted): NVML's list; without NVML the PCI bus's count; (None, why) unknown."""
    gpus = inv.get("gpus") or []
    unknown = inv.get("unknown") or {}
    if gpus or "gpus" not in unknown:
        return len(gpus), "NVML"
    if "pci_gpus" not in unknown and "pci_gpus" in inv:
        return len(inv["pci_gpus"]), f"PCI bus ({unknown['gpus']})"
    return None, str(unknown["gpus"])


def unknown_counts(inv: Mapping[str, Any]) -> dict[str, str]:
    """metric -> why it is not measured, for the counts the inventory could not read."""
    unknown = inv.get("unknown") or {}
    out = {}
    if gpu_count(inv)[0] is None:
        out["gpu.count"] = f"not measured: {unknown.get('gpus')}"
    if "block_devices" in unknown:
        why = f"not measured: {unknown['block_devices']}"
        out.update({"host.nvme_count": why, "host.block_devices": why})
    return out


def metrics_from(inv: Mapping[str, Any]) -> tuple[Metric, ...]:
    """Counts and sizes from an inventory dict (pure); an unknown count has no metric."""
    cpu = inv.get("cpu", {})
    disks = inv.get("block_devices", [])
    unknown = unknown_counts(inv)
    out = []
    cores = cpu.get("online") or cpu.get("threads")
    for name, value in (("host.cpu_cores", cores), ("host.cpu_sockets", cpu.get("sockets")),
                        ("host.numa_nodes", cpu.get("numa_nodes"))):
        if value:  # a host has at least one: 0 or None means /proc could not tell
            out.append(Metric(name, float(value), COUNT))
    gpus, _how = gpu_count(inv)
    if gpus is not None:
        out.append(Metric("gpu.count", float(gpus), COUNT))
    if "host.nvme_count" not in unknown:
        out.append(Metric("host.nvme_count", float(sum(1 for d in disks if d.get("transport") == "nvme")),
                          COUNT))
    out.append(Metric("host.nics_up", float(sum(1 for n in inv.get("nics", []) if n.get("state") == "up")),
                      COUNT))
    mem = inv.get("memory", {}).get("total_bytes")
    if mem:
        out.append(Metric("host.memory", float(mem), BYTES))
    by_transport: dict[str, int] = {}
    for d in disks:
        t = d.get("transport") or "other"
        by_transport[t] = by_transport.get(t, 0) + 1
    out += [Metric("host.block_devices", float(n), COUNT, {"transport": t})
            for t, n in sorted(by_transport.items())]
    return tuple(out)


def unknown_findings(inv: Mapping[str, Any], hardware: Mapping[str, Any]) -> tuple[Finding, ...]:
    """An error naming the reason for each count the profile's hardware block expects but the
    inventory could not read (compare adds its own "no metric" error; this one says why)."""
    unknown = unknown_counts(inv)
    gpus = (hardware.get("gpu") or {}).get("count")
    nvme = hardware.get("nvme_count")
    wanted = {"gpu.count": (gpus, gpus), "host.nvme_count": (nvme, None)}
    return tuple(Finding(metric=metric, outcome=Outcome.ERROR, message=unknown[metric], unit=COUNT,
                         low=float(low), high=None if high is None else float(high), source="inventory")
                 for metric, (low, high) in wanted.items() if low and metric in unknown)


def run(params: InventoryParams, ctx: CheckContext) -> CheckOutput:
    inv = ctx.inventory
    gpus = inv.get("gpus", [])
    n, how = gpu_count(inv)
    if gpus:
        gpu_text = f"{len(gpus)} x {gpus[0]['name']}"
    elif n:
        gpu_text = f"{plural(n, 'GPU')} on the {how}"
    else:
        gpu_text = "GPUs unknown" if n is None else "no GPU"
    unknown = unknown_counts(inv)
    disks = ("disks unknown" if "host.nvme_count" in unknown
             else plural(len(inv.get("block_devices", [])), "disk"))
    mem = inv.get("memory", {}).get("total_bytes") or 0
    summary = (f"{inv.get('host', {}).get('hostname')}: {inv.get('cpu', {}).get('online')} CPUs, "
               f"{fmt_bytes(mem)} RAM, {disks}, {gpu_text}")
    details: dict[str, Any] = {"inventory": dict(inv)}
    if unknown:
        details["unknown"] = unknown
    return CheckOutput(metrics=metrics_from(inv), details=details, summary=summary,
                       findings=unknown_findings(inv, ctx.hardware))


def plan(params: InventoryParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    return (PlannedCommand(("lsblk", "-J", "-b", "-d", "-o", "NAME,PATH,MODEL,SERIAL,SIZE,TRAN,ROTA,TYPE"),
                           "plus /proc, /sys and NVML reads"),)


KIND = CheckKind(
    name="inventory",
    description="host, OS, CPU, memory, disks, NICs and GPUs with serial numbers",
    params=InventoryParams,
    metrics=catalog.subset(["host.cpu_cores", "host.cpu_sockets", "host.numa_nodes", "host.memory",
                            "host.block_devices", "host.nvme_count", "host.nics_up", "gpu.count"]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        loads_node=False,
        requires=(needs.tool("lsblk"), needs.NVML),
    ),
)
