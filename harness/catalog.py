"""The vocabulary of metric names: unit and which direction is better, in one place.

Check kinds take their specs from here; profile validation checks names and units against it.
Names are dotted families (`fio.bw`); structure goes in labels, never in the name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from harness.checks.base import MetricSpec
from harness.units import (
    BYTES,
    CELSIUS,
    COUNT,
    GBPS,
    IOPS,
    JOULE,
    MHZ,
    PERCENT,
    SECONDS,
    TFLOPS,
    US,
    WATT,
)

H, L, N = "higher", "lower", "none"

METRICS: Mapping[str, MetricSpec] = {
    # inventory
    "host.cpu_cores": MetricSpec(COUNT, N, "logical CPUs online"),
    "host.cpu_sockets": MetricSpec(COUNT, N, "CPU sockets"),
    "host.numa_nodes": MetricSpec(COUNT, N, "NUMA nodes"),
    "host.memory": MetricSpec(BYTES, H, "physical memory"),
    "host.block_devices": MetricSpec(COUNT, N, "whole block devices (disks), label transport"),
    "host.nvme_count": MetricSpec(COUNT, N, "NVMe namespaces seen"),
    "host.nics_up": MetricSpec(COUNT, N, "network interfaces with link up"),
    "gpu.count": MetricSpec(COUNT, N, "GPUs visible through NVML"),
    # fio
    "fio.iops": MetricSpec(IOPS, H, "I/O operations per second, per job and direction"),
    "fio.bw": MetricSpec(GBPS, H, "bandwidth per job and direction"),
    "fio.clat_mean": MetricSpec(US, L, "mean completion latency"),
    "fio.clat_p50": MetricSpec(US, L, "median completion latency"),
    "fio.clat_p99": MetricSpec(US, L, "99th percentile completion latency"),
    "fio.clat_p999": MetricSpec(US, L, "99.9th percentile completion latency"),
    # GPU telemetry and burn
    "gpu.temp_max": MetricSpec(CELSIUS, L, "hottest GPU temperature during the check"),
    "gpu.mem_temp_max": MetricSpec(CELSIUS, L, "hottest HBM temperature during the check"),
    "gpu.power_mean": MetricSpec(WATT, N, "mean GPU power draw"),
    "gpu.power_max": MetricSpec(WATT, N, "peak GPU power draw"),
    "gpu.sm_clock_mean": MetricSpec(MHZ, H, "mean SM clock"),
    "gpu.throttle_pct": MetricSpec(PERCENT, L, "share of samples with a clock-event reason"),
    "gpu.energy": MetricSpec(JOULE, N, "energy used during the check"),
    "gpu.tflops": MetricSpec(TFLOPS, H, "achieved compute rate"),
    "gpu.errors": MetricSpec(COUNT, L, "computation errors found by the burn"),
    "gpu.ecc_uncorrected": MetricSpec(COUNT, L, "uncorrected ECC errors (volatile)"),
    "gpu.ecc_corrected": MetricSpec(COUNT, L, "corrected ECC errors (volatile)"),
    "gpu.retired_pages": MetricSpec(COUNT, L, "retired or remapped memory rows"),
    "gpu.xid": MetricSpec(COUNT, L, "XID events seen"),
    "gpu.pcie_gen": MetricSpec(COUNT, H, "current PCIe link generation"),
    "gpu.pcie_width": MetricSpec(COUNT, H, "current PCIe link width"),
    "gpu.pcie_replays": MetricSpec(COUNT, L, "PCIe replay counter growth"),
    # interconnect
    "nccl.busbw": MetricSpec(GBPS, H, "NCCL bus bandwidth"),
    "nccl.algbw": MetricSpec(GBPS, H, "NCCL algorithm bandwidth"),
    "nccl.time": MetricSpec(US, L, "NCCL operation time"),
    "nccl.wrong": MetricSpec(COUNT, L, "NCCL result errors"),
    "nccl.avg_busbw": MetricSpec(GBPS, H, "NCCL average bus bandwidth (summary line)"),
    "nccl.ranks": MetricSpec(COUNT, N, "NCCL ranks"),
    "rdma.bw": MetricSpec(GBPS, H, "RDMA bandwidth (perftest)"),
    "rdma.lat": MetricSpec(US, L, "RDMA latency (perftest)"),
    "nvbandwidth.bw": MetricSpec(GBPS, H, "copy bandwidth (nvbandwidth)"),
    "net.bw": MetricSpec(GBPS, H, "TCP/UDP bandwidth (iperf3)"),
    # power
    "bmc.power": MetricSpec(WATT, N, "node input power from the BMC"),
    "psu.power_in": MetricSpec(WATT, N, "PSU input power"),
    "psu.power_out": MetricSpec(WATT, N, "PSU output power"),
    "psu.ok": MetricSpec(COUNT, H, "1 when the PSU is present and healthy"),
    "power.headroom_pct": MetricSpec(PERCENT, H, "PSU headroom at peak load"),
    "power.peak": MetricSpec(WATT, L, "peak node power under load"),
    # storage health
    "nvme.percentage_used": MetricSpec(PERCENT, L, "NVMe endurance used"),
    "nvme.media_errors": MetricSpec(COUNT, L, "NVMe media errors"),
    "nvme.available_spare": MetricSpec(PERCENT, H, "NVMe available spare"),
    "nvme.critical_warning": MetricSpec(COUNT, L, "NVMe critical warning bits"),
    "nvme.temperature": MetricSpec(CELSIUS, L, "NVMe composite temperature"),
    # generic
    "command.duration": MetricSpec(SECONDS, L, "wall time of a command check"),
}


def spec(name: str) -> MetricSpec | None:
    """The spec of a known metric, else None."""
    return METRICS.get(name)


def subset(names: Iterable[str]) -> dict[str, MetricSpec]:
    """The specs of the given names (each must be in the catalogue)."""
    return {n: METRICS[n] for n in names}
