"""The `inventory` kind: who this node is (serials matter: history keys on them) and its counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness import catalog
from harness.checks.base import CheckContext, CheckKind, CheckOutput, Params, PlannedCommand
from harness.model import Metric
from harness.units import BYTES, COUNT


class InventoryParams(Params):
    """No parameters: the inventory reads what the node has."""


def metrics_from(inv: Mapping[str, Any]) -> tuple[Metric, ...]:
    """Counts and sizes from an inventory dict (pure)."""
    cpu = inv.get("cpu", {})
    disks = inv.get("block_devices", [])
    out = [
        Metric("host.cpu_cores", float(cpu.get("online") or cpu.get("threads") or 0), COUNT),
        Metric("host.cpu_sockets", float(cpu.get("sockets") or 0), COUNT),
        Metric("host.numa_nodes", float(cpu.get("numa_nodes") or 0), COUNT),
        Metric("gpu.count", float(len(inv.get("gpus", []))), COUNT),
        Metric("host.nvme_count", float(sum(1 for d in disks if d.get("transport") == "nvme")), COUNT),
        Metric("host.nics_up", float(sum(1 for n in inv.get("nics", []) if n.get("state") == "up")),
               COUNT),
    ]
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


def run(params: InventoryParams, ctx: CheckContext) -> CheckOutput:
    inv = ctx.inventory
    gpus = inv.get("gpus", [])
    gpu_text = f"{len(gpus)} x {gpus[0]['name']}" if gpus else "no GPU"
    mem = inv.get("memory", {}).get("total_bytes") or 0
    summary = (f"{inv.get('host', {}).get('hostname')}: {inv.get('cpu', {}).get('online')} CPUs, "
               f"{mem / 1e9:.1f} GB RAM, {len(inv.get('block_devices', []))} disks, {gpu_text}")
    return CheckOutput(metrics=metrics_from(inv), details={"inventory": dict(inv)}, summary=summary)


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
    loads_node=False,
)
