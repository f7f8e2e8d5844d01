"""The vocabulary of metric names: unit and which direction is better, in one place.

Check kinds take their specs from here; profile validation checks names and units against it.
Names are dotted families (`fio.bw`); structure goes in labels, never in the name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness.units import (
    BYTES,
    CELSIUS,
    COUNT,
    GBPS,
    IOPS,
    JOULE,
    MHZ,
    PERCENT,
    RATIO,
    SAMPLES_PER_S,
    SECONDS,
    TFLOPS,
    US,
    WATT,
)


@dataclass(frozen=True)
class MetricSpec:
    """What a metric name means: its unit and which way is better."""

    unit: str
    better: str  # "higher" | "lower" | "none"
    description: str = ""
    flag: bool = False  # 1 or 0: on/off, yes/no (persistence mode, a link up), read as words


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
    "gpu.memory": MetricSpec(BYTES, H, "a GPU's total memory as NVML reports it, label gpu"),
    "gpu.memory_used": MetricSpec(BYTES, N, "a GPU's memory in use at the time of reading, label gpu"),
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
    "gpu.power_max": MetricSpec(WATT, N, "peak GPU power draw (instantaneous where NVML has it)"),
    "gpu.power_avg_max": MetricSpec(WATT, N, "peak of NVML's 1-s averaged GPU power (power limits are "
                                    "enforced on it)"),
    "gpu.hw_slowdown_episodes": MetricSpec(COUNT, L, "separate HW Slowdown runs while busy, however short"),
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
    # GPU health, burn and telemetry (issue 3): labels gpu, which, scope, reason, test, xid
    "gpu.util_mean": MetricSpec(PERCENT, N, "mean GPU utilisation during the check"),
    "gpu.lost": MetricSpec(COUNT, L, "1 when the GPU stopped answering NVML during the check", flag=True),
    "gpu.temp": MetricSpec(CELSIUS, L, "GPU temperature at the time of reading"),
    "gpu.mem_temp": MetricSpec(CELSIUS, L, "HBM temperature at the time of reading"),
    "gpu.power": MetricSpec(WATT, N, "GPU power draw at the time of reading"),
    "gpu.power_limit": MetricSpec(WATT, N, "enforced GPU power limit"),
    "gpu.sm_clock": MetricSpec(MHZ, N, "SM clock at the time of reading, label which=current|max"),
    "gpu.util": MetricSpec(PERCENT, N, "GPU utilisation at the time of reading"),
    "gpu.clocks_event": MetricSpec(COUNT, N, "1 when a clock-event reason is active, label reason",
        flag=True),
    "gpu.persistence_mode": MetricSpec(COUNT, H, "1 when persistence mode is on", flag=True),
    "gpu.ecc_mode": MetricSpec(COUNT, H, "1 when ECC is on", flag=True),
    "gpu.retired_pending": MetricSpec(COUNT, L, "1 when a page retirement waits for a reset", flag=True),
    "gpu.remapped_rows": MetricSpec(COUNT, L, "memory rows remapped, label kind=correctable|uncorrectable"),
    "gpu.remap_pending": MetricSpec(COUNT, L, "1 when a row remap waits for a GPU reset", flag=True),
    "gpu.remap_failure": MetricSpec(COUNT, L, "1 when a row remap failed", flag=True),
    "gpu.nvlink_down": MetricSpec(COUNT, L, "NVLink links present but not up (a PCIe card without "
                                  "bridges has all of them down)"),
    "gpu.nvlink_up": MetricSpec(COUNT, H, "NVLink links up"),
    "gpu.fabric_healthy": MetricSpec(COUNT, H, "1 when the GPU's NVLink fabric registration completed "
                                     "with success and a healthy mask", flag=True),
    "gpu.xid_critical": MetricSpec(COUNT, L, "XID events of the critical set in the kernel log"),
    "gpu.recovery_action": MetricSpec(COUNT, L, "the recovery the driver last asked for in an Xid 154 "
                                      "(0 none, 1 GPU reset, 2 node reboot, 4 drain and reset)"),
    "gpu.driver_fault": MetricSpec(COUNT, L, "driver faults without an XID number in the kernel log, "
                                   "label fault"),
    "gpu_burn.ok": MetricSpec(COUNT, H, "1 when the burn's verdict is OK and the GPU did work", flag=True),
    "gpu_burn.tflops": MetricSpec(TFLOPS, H, "compute rate the burn reported last (gpu_burn Gflop/s / 1000)"),
    "gpu_burn.errors": MetricSpec(COUNT, L, "computation errors the burn found"),
    "gpu_burn.mem_errors": MetricSpec(COUNT, L, "words of the builtin burn's memory pattern that changed"),
    "gpu_burn.temp_max": MetricSpec(CELSIUS, L, "hottest temperature the burn tool printed"),
    "gpu_burn.iterations": MetricSpec(COUNT, N, "matrix multiplies the burn completed"),
    "dcgm.result": MetricSpec(COUNT, H, "1 when a dcgmi diag test passed, 0 failed or warned", flag=True),
    # interconnect
    "nccl.busbw": MetricSpec(GBPS, H, "NCCL bus bandwidth"),
    "nccl.algbw": MetricSpec(GBPS, H, "NCCL algorithm bandwidth"),
    "nccl.time": MetricSpec(US, L, "NCCL operation time"),
    "nccl.wrong": MetricSpec(COUNT, L, "NCCL result errors"),
    "nccl.avg_busbw": MetricSpec(GBPS, H, "NCCL average bus bandwidth (summary line)"),
    "nccl.ranks": MetricSpec(COUNT, N, "NCCL ranks"),
    "rdma.bw_avg": MetricSpec(GBPS, H, "RDMA bandwidth, perftest BW average"),
    "rdma.bw_peak": MetricSpec(GBPS, H, "RDMA peak bandwidth (perftest BW peak)"),
    "rdma.lat_min": MetricSpec(US, L, "RDMA latency, minimum (perftest t_min)"),
    "rdma.lat_max": MetricSpec(US, L, "RDMA latency, maximum (perftest t_max)"),
    "rdma.lat_typical": MetricSpec(US, L, "RDMA latency, typical (perftest t_typical)"),
    "rdma.lat_avg": MetricSpec(US, L, "RDMA latency, mean (perftest t_avg)"),
    "rdma.lat_p99": MetricSpec(US, L, "RDMA latency, 99th percentile"),
    "rdma.lat_p999": MetricSpec(US, L, "RDMA latency, 99.9th percentile"),
    "ib.port_active": MetricSpec(COUNT, H, "1 when the IB/RoCE port state is Active", flag=True),
    "ib.rate": MetricSpec(GBPS, H, "IB/RoCE port data rate (ibstat's Gb/s / 8)"),
    "ib.active_mtu": MetricSpec(BYTES, H, "IB/RoCE port active MTU"),
    "ib.port_errors": MetricSpec(COUNT, L, "IB port error counter value (label counter)"),
    "ib.error_delta": MetricSpec(COUNT, L, "IB port error counter growth during the check"),
    "ib.hca_count": MetricSpec(COUNT, N, "RDMA devices in /sys/class/infiniband"),
    "net.port_errors": MetricSpec(COUNT, L, "NIC error counter value, ethtool -S (labels iface, counter)"),
    "net.error_delta": MetricSpec(COUNT, L, "NIC error counter growth during the check (ethtool -S)"),
    "net.link_up": MetricSpec(COUNT, H, "1 when a NIC's link is up (sysfs operstate), labels iface, driver",
        flag=True),
    "net.link_speed": MetricSpec(GBPS, H, "NIC link speed (sysfs Mb/s / 8000: 400 Gb/s = 50); 0 when down"),
    # GPU copy bandwidth (gpu_bandwidth: nvbandwidth, bandwidthTest, builtin); label test names the test
    "gpu.h2d_bw": MetricSpec(GBPS, H, "host-to-GPU copy bandwidth, label gpu"),
    "gpu.d2h_bw": MetricSpec(GBPS, H, "GPU-to-host copy bandwidth, label gpu"),
    "gpu.d2d_bw": MetricSpec(GBPS, H, "copy bandwidth within one GPU (bandwidthTest), label gpu"),
    "gpu.p2p_bw": MetricSpec(GBPS, H, "GPU-to-GPU copy bandwidth, labels src, dst"),
    "gpu.bw_sum": MetricSpec(GBPS, H, "sum of an nvbandwidth test's matrix (its SUM line)"),
    "gpu.p2p_lat": MetricSpec(US, L, "GPU-to-GPU memory access latency, labels src, dst"),
    "gpu.host_lat": MetricSpec(US, L, "host-GPU memory access latency, label gpu"),
    "gpu.p2p_access": MetricSpec(COUNT, H, "1 when a GPU can access its peer directly", flag=True),
    "topo.nvlinks": MetricSpec(COUNT, H, "bonded NVLinks between two GPUs (nvidia-smi topo -m)"),
    "topo.path": MetricSpec(COUNT, N, "1 per GPU pair or GPU-NIC pair, label path (nvidia-smi topo -m)"),
    "topo.nic_rank": MetricSpec(COUNT, L, "nearest NIC of a GPU: 1 PIX, 2 PXB, 3 PHB, 4 NODE, 5 SYS"),
    "topo.numa_node": MetricSpec(COUNT, N, "NUMA node of a GPU (nvidia-smi topo -m NUMA Affinity)"),
    "net.tcp_bw": MetricSpec(GBPS, H, "TCP bandwidth (iperf3), label side=sender|receiver"),
    "net.tcp_retransmits": MetricSpec(COUNT, L, "TCP retransmits of the sender (iperf3)"),
    "net.udp_bw": MetricSpec(GBPS, H, "UDP bandwidth (iperf3 -u)"),
    "net.udp_loss": MetricSpec(PERCENT, L, "UDP datagrams lost (iperf3 -u)"),
    "net.udp_jitter": MetricSpec(US, L, "UDP jitter (iperf3 -u)"),
    # power
    "bmc.power": MetricSpec(WATT, N, "node input power from the BMC"),
    "psu.power_in": MetricSpec(WATT, N, "PSU input power"),
    "psu.power_out": MetricSpec(WATT, N, "PSU output power"),
    "psu.ok": MetricSpec(COUNT, H, "1 when the PSU is present and healthy", flag=True),
    "psu.redundant": MetricSpec(COUNT, H, "1 when the BMC's PSU redundancy sensor reports redundancy",
        flag=True),
    "psu.capacity": MetricSpec(WATT, N, "PSU rated output as the BMC reports it (Redfish)"),
    "bmc.inlet_temp": MetricSpec(CELSIUS, L, "inlet (ambient) air temperature from the BMC"),
    "bmc.fans_ok": MetricSpec(COUNT, H, "1 when no fan sensor on the BMC reports trouble", flag=True),
    "power.headroom_pct": MetricSpec(PERCENT, H, "PSU headroom at peak load"),
    # power_headroom (harness/series/psu.py): node power during a full-system load vs usable PSU capacity
    "power.node_peak": MetricSpec(WATT, N, "peak node input power during the load (BMC, or estimated)"),
    "power.node_p99": MetricSpec(WATT, N, "99th percentile of node input power during the load"),
    "power.gpu_peak": MetricSpec(WATT, N, "peak of all GPUs' power together during the load (NVML)"),
    "power.gpu_share_pct": MetricSpec(PERCENT, N, "GPU power / node power over the load, same timestamps"),
    "power.usable_capacity": MetricSpec(WATT, N, "PSU count x rating that carries the load (redundancy)"),
    "power.estimated": MetricSpec(COUNT, N, "1 when node power is GPU power + an allowance (no BMC)",
        flag=True),
    "power.psus_ok": MetricSpec(COUNT, H, "fewest PSUs present and healthy in any BMC reading"),
    "bmc.inlet_temp_max": MetricSpec(CELSIUS, L, "hottest inlet air the BMC reported"),
    "gpu.temp_margin": MetricSpec(CELSIUS, H, "GPU's own slowdown (or HBM) threshold minus peak temperature"),
    # storage health
    "nvme.percentage_used": MetricSpec(PERCENT, L, "NVMe endurance used"),
    "nvme.media_errors": MetricSpec(COUNT, L, "NVMe media errors"),
    "nvme.available_spare": MetricSpec(PERCENT, H, "NVMe available spare"),
    "nvme.critical_warning": MetricSpec(COUNT, L, "NVMe critical warning bits"),
    "nvme.temperature": MetricSpec(CELSIUS, L, "NVMe composite temperature"),
    "nvme.available_spare_threshold": MetricSpec(PERCENT, N, "NVMe spare level the drive warns at"),
    "nvme.spare_margin": MetricSpec(PERCENT, H, "NVMe available spare minus its threshold"),
    "nvme.num_err_log_entries": MetricSpec(COUNT, L, "NVMe error log entries (lifetime)"),
    "nvme.unsafe_shutdowns": MetricSpec(COUNT, L, "NVMe unsafe shutdowns (lifetime)"),
    "nvme.power_on_hours": MetricSpec(COUNT, N, "NVMe power-on hours"),
    "nvme.data_units_read": MetricSpec(BYTES, N, "NVMe bytes read, lifetime (1 unit = 512,000 B)"),
    "nvme.data_units_written": MetricSpec(BYTES, N, "NVMe bytes written, lifetime (1 unit = 512,000 B)"),
    "nvme.warning_temp_time": MetricSpec(SECONDS, L, "NVMe time above the warning temperature"),
    "nvme.critical_temp_time": MetricSpec(SECONDS, L, "NVMe time above the critical temperature"),
    "nvme.count": MetricSpec(COUNT, N, "NVMe controllers found in sysfs"),
    "nvme.namespaces": MetricSpec(COUNT, N, "namespaces of an NVMe controller"),
    "nvme.pcie_gen": MetricSpec(COUNT, H, "NVMe PCIe link generation, label which=current|max"),
    "nvme.pcie_width": MetricSpec(COUNT, H, "NVMe PCIe link width, label which=current|max"),
    "nvme.link_downgraded": MetricSpec(COUNT, L, "1 when an NVMe PCIe link runs below its max", flag=True),
    "disk.smart_passed": MetricSpec(COUNT, H, "1 when smartctl's overall health check passed", flag=True),
    "disk.temperature": MetricSpec(CELSIUS, L, "drive temperature (smartctl, non-NVMe)"),
    "disk.power_on_hours": MetricSpec(COUNT, N, "drive power-on hours (smartctl, non-NVMe)"),
    "disk.reallocated_sectors": MetricSpec(COUNT, L, "ATA reallocated sectors (attribute 5)"),
    "disk.reported_uncorrect": MetricSpec(COUNT, L, "ATA reported uncorrectable errors (187)"),
    "disk.pending_sectors": MetricSpec(COUNT, L, "ATA sectors pending reallocation (197)"),
    "disk.offline_uncorrectable": MetricSpec(COUNT, L, "ATA offline uncorrectable sectors (198)"),
    "disk.link_downgraded": MetricSpec(COUNT, L, "1 when a SATA link runs below its max rate", flag=True),
    "md.arrays": MetricSpec(COUNT, N, "md (software RAID) arrays in /proc/mdstat"),
    "md.active": MetricSpec(COUNT, H, "1 when the md array is active", flag=True),
    "md.degraded": MetricSpec(COUNT, L, "1 when the md array is missing a member", flag=True),
    "md.disks_missing": MetricSpec(COUNT, L, "md members missing ([n/m] difference)"),
    "md.disks_failed": MetricSpec(COUNT, L, "md members marked failed (F)"),
    "md.disks_spare": MetricSpec(COUNT, N, "md spare members (S)"),
    "md.sync_pct": MetricSpec(PERCENT, N, "progress of an md resync/recovery/reshape/check"),
    "fio.persist_time": MetricSpec(SECONDS, L, "time to write and fsync a checkpoint (fio)"),
    # data path (checks/data_path): can storage feed the GPUs?
    "data_path.read_bw": MetricSpec(GBPS, H, "dataset read rate into (GPU) memory, label workers"),
    "data_path.samples_per_s": MetricSpec(SAMPLES_PER_S, H, "samples (files) read per second, label workers"),
    "data_path.saturation_workers": MetricSpec(COUNT, N, "fewest workers within tolerance of the best rate"),
    "data_path.required_bw": MetricSpec(GBPS, N, "input rate the GPUs consume (params or profile)"),
    "data_path.feed_ratio": MetricSpec(RATIO, H, "deliverable input rate / required input rate"),
    # config audit: the numeric facts of harness/facts.py, so baselines and fleets can use them
    "host.swap_bytes": MetricSpec(BYTES, N, "total swap space"),
    "host.shm_bytes": MetricSpec(BYTES, H, "size of /dev/shm (the container's, inside one)"),
    "host.memlock": MetricSpec(BYTES, H, "locked-memory limit (ulimit -l); absent when unlimited"),
    "host.nofile": MetricSpec(COUNT, H, "open-files limit (ulimit -n); absent when unlimited"),
    "host.nproc": MetricSpec(COUNT, H, "process limit (ulimit -u); absent when unlimited"),
    "host.cgroup_memory_limit": MetricSpec(BYTES, H, "cgroup memory limit; absent when unlimited"),
    "gpu.nvswitch_count": MetricSpec(COUNT, N, "NVSwitch chips on PCI"),
    "net.mtu": MetricSpec(BYTES, N, "MTU of a physical interface, label nic"),
    "net.queues": MetricSpec(COUNT, N, "receive queues of a physical interface, label nic"),
    "net.irq_spread": MetricSpec(COUNT, H, "distinct CPUs serving a NIC's interrupts, label nic"),
    # generic
    "command.duration": MetricSpec(SECONDS, L, "wall time of a command check"),
}


def spec(name: str) -> MetricSpec | None:
    """The spec of a known metric, else None."""
    return METRICS.get(name)


def subset(names: Iterable[str]) -> dict[str, MetricSpec]:
    """The specs of the given names (each must be in the catalogue)."""
    return {n: METRICS[n] for n in names}


# Counts that only grow while the device (or its driver) stays up: Prometheus counters (`_total`).
# Everything else is a gauge: a reading, a flag, or a count of what the check found.
COUNTERS: frozenset[str] = frozenset({
    "gpu.ecc_corrected", "gpu.ecc_uncorrected", "ib.port_errors", "net.port_errors",
    "nvme.media_errors", "nvme.num_err_log_entries", "nvme.unsafe_shutdowns", "nvme.power_on_hours",
    "nvme.data_units_read", "nvme.data_units_written", "nvme.warning_temp_time",
    "nvme.critical_temp_time", "disk.power_on_hours", "disk.reported_uncorrect",
})
