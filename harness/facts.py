"""The catalogue of configuration facts the audit can collect, and the Fact record itself.

A fact is one typed value read from the machine (`host.shm_bytes`, `gpu.driver_version`...)
with where it was read. A value of None means "could not be known here", with the reason.
Profiles judge facts with `config:` rules; a name that is not in FACTS is a validation error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from harness import sections
from harness.numfmt import fmt_bytes, fmt_num

FactValue = Union[str, int, float, bool, None]

# Value types. version: dotted version text; size: bytes; count: a whole number;
# limit: a number or the text "unlimited"; str/bool as they say.
TYPES = ("str", "version", "bool", "size", "count", "limit")
NUMERIC = frozenset({"size", "count", "limit"})
UNLIMITED = "unlimited"
UNSET = "unset"  # an environment variable or kernel parameter that is not given
ABSENT = "absent"  # a library or package that is not installed
CONFIG_SOURCE = "(config)"  # suffix of Evaluation.source for fact rules: "<profile> (config)"


@dataclass(frozen=True)
class FactSpec:
    """What a fact means: its type, which device it is per (label key), what it needs."""

    name: str
    type: str
    description: str
    per: str | None = None  # label key of a per-device fact: gpu, nic, hca
    needs: str | None = None  # hardware without which the fact cannot be known: gpu, nvswitch, rdma
    unit: str | None = None  # also emitted as a metric in this unit (numeric facts only)
    capture: str = "equals"  # how `harness audit capture` pins it: equals, min, max, min_version, skip
    severity: str = "fail"  # severity `audit capture` gives its rule


@dataclass(frozen=True)
class Fact:
    """One collected fact. `reason` says why `value` is None."""

    name: str
    value: FactValue
    source: str
    labels: Mapping[str, str] = field(default_factory=dict)
    reason: str = ""

    def to_dict(self) -> sections.Fact:
        return {"name": self.name, "labels": dict(self.labels), "value": self.value,
                "source": self.source, "reason": self.reason}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Fact:
        return cls(d["name"], d.get("value"), d.get("source", ""), dict(d.get("labels", {})),
                   d.get("reason", ""))


def _specs(*items: FactSpec) -> dict[str, FactSpec]:
    return {s.name: s for s in items}


FACTS: Mapping[str, FactSpec] = _specs(
    # host
    # what `audit capture` pins, per fact: a site invariant exactly (driver, OS, modes); a version
    # that may move forward on a sibling (kernel, libraries) as a minimum; a value of the network
    # the node sits on (MTU) as a minimum; how the capturing shell was started (container, *_VISIBLE_
    # DEVICES) never: that is not the node. A library that is absent is never pinned as "absent".
    FactSpec("host.kernel", "version", "running kernel release (uname -r)", capture="min_version",
             severity="warn"),
    FactSpec("host.os", "str", "PRETTY_NAME of /etc/os-release"),
    FactSpec("host.kernel_cmdline", "str", "the whole kernel command line (/proc/cmdline)",
             capture="skip"),
    FactSpec("host.kernel_cmdline.iommu", "str", "iommu= on the kernel command line ('pt' for "
             "GPUDirect), or 'unset'"),
    FactSpec("host.kernel_cmdline.intel_iommu", "str", "intel_iommu= on the kernel command line, or 'unset'"),
    FactSpec("host.kernel_cmdline.amd_iommu", "str", "amd_iommu= on the kernel command line, or 'unset'"),
    FactSpec("host.kernel_cmdline.hugepages", "str", "hugepages= on the kernel command line, or 'unset'"),
    FactSpec("host.kernel_cmdline.default_hugepagesz", "str",
             "default_hugepagesz= on the kernel command line, or 'unset'"),
    FactSpec("host.kernel_cmdline.pci", "str", "pci= on the kernel command line (ACS, realloc), or 'unset'"),
    FactSpec("host.cpu_governor", "str", "cpufreq scaling governor of every CPU ('mixed: ...' when "
             "they differ); unknown in most VMs", severity="warn"),
    FactSpec("host.cpu_boost", "bool", "frequency boost / turbo enabled", severity="warn"),
    FactSpec("host.numa_balancing", "bool", "automatic NUMA balancing (/proc/sys/kernel/numa_balancing)",
             severity="warn"),
    FactSpec("host.thp", "str", "transparent hugepages mode: always, madvise or never", severity="warn"),
    FactSpec("host.swap_bytes", "size", "total swap space (/proc/swaps)", unit="B", capture="max",
             severity="warn"),
    FactSpec("host.shm_bytes", "size", "size of /dev/shm (inside a container: the container's)",
             unit="B", capture="min"),
    FactSpec("host.memlock", "limit", "locked-memory limit (ulimit -l, soft) in bytes", unit="B",
             capture="min"),
    FactSpec("host.nofile", "limit", "open-files limit (ulimit -n, soft)", unit="count", capture="min"),
    FactSpec("host.nproc", "limit", "process limit (ulimit -u, soft)", unit="count", capture="min"),
    FactSpec("host.clock_synced", "bool", "the kernel clock is synchronised (adjtimex: not TIME_ERROR)",
             severity="warn"),
    FactSpec("host.time_sync_daemon", "str", "time-sync daemon running: chronyd, ntpd, "
             "systemd-timesyncd, ptp4l, or none", severity="warn"),
    FactSpec("host.irqbalance", "bool", "irqbalance is running", severity="warn"),
    FactSpec("host.container", "str", "container runtime this runs in: none, docker, podman, "
             "kubernetes, enroot, apptainer or container (cgroup hint)", capture="skip"),
    FactSpec("host.cgroup_version", "str", "cgroup hierarchy in use: v1 or v2"),
    FactSpec("host.cgroup_memory_limit", "limit", "memory limit of this process's cgroup (bytes)",
             unit="B", capture="skip"),  # this process's: a shell's or a Slurm job's, not the node's
    FactSpec("host.cgroup_cpu_quota", "limit", "CPU quota of this process's cgroup (CPUs)", capture="skip"),
    FactSpec("host.cuda_visible_devices", "str", "CUDA_VISIBLE_DEVICES, or 'unset'", capture="skip"),
    FactSpec("host.nvidia_visible_devices", "str", "NVIDIA_VISIBLE_DEVICES, or 'unset'", capture="skip"),
    # GPU stack
    FactSpec("gpu.driver_version", "version", "NVIDIA driver version", needs="gpu"),
    FactSpec("gpu.cuda_driver_version", "version", "CUDA version the driver supports", needs="gpu"),
    FactSpec("gpu.persistence_mode", "bool", "persistence mode enabled", per="gpu", needs="gpu"),
    FactSpec("gpu.mig_mode", "str", "current MIG mode: enabled, disabled or n/a", per="gpu", needs="gpu"),
    FactSpec("gpu.ecc_mode", "str", "current ECC mode: enabled, disabled or n/a", per="gpu", needs="gpu"),
    FactSpec("gpu.vbios_version", "version", "VBIOS version", per="gpu", needs="gpu"),
    FactSpec("gpu.fabric_state", "str", "NVLink fabric state as the driver reports it (completed, "
             "in progress, n/a)", per="gpu", needs="gpu"),
    FactSpec("gpu.nvswitch_count", "count", "NVSwitch chips on PCI (vendor 10de, class 0680)",
             needs="gpu", unit="count"),
    FactSpec("gpu.fabricmanager_running", "bool", "nv-fabricmanager is running (needed where "
             "NVSwitches are)", needs="nvswitch"),
    FactSpec("gpu.peermem_loaded", "bool", "nvidia_peermem kernel module loaded (GPUDirect RDMA)",
             needs="gpu"),
    # libraries
    FactSpec("lib.cuda_runtime", "version", "CUDA runtime (libcudart) version, or 'absent'",
             capture="min_version"),
    FactSpec("lib.cudnn", "version", "cuDNN (libcudnn) version, or 'absent'", capture="min_version"),
    FactSpec("lib.nccl", "version", "NCCL (libnccl) version, or 'absent'", capture="min_version"),
    # network
    FactSpec("net.rdma_core_version", "version", "rdma-core version (from libibverbs), or 'absent'",
             capture="min_version"),
    FactSpec("net.ofed_version", "version", "MLNX_OFED / DOCA-OFED version (ofed_info -s), or 'absent'",
             capture="min_version"),
    FactSpec("net.hca_fw_version", "version", "HCA firmware version", per="hca", needs="rdma"),
    FactSpec("net.hca_netdevs", "str", "network interfaces bound to the RDMA device, or 'none'",
             per="hca", needs="rdma"),
    FactSpec("net.mtu", "count", "MTU of the physical interface", per="nic", unit="B", capture="min",
             severity="warn"),
    FactSpec("net.queues", "count", "receive queues of the physical interface", per="nic", unit="count"),
    FactSpec("net.irq_spread", "count", "distinct CPUs serving the interface's interrupts (1 = all "
             "piled on one core)", per="nic", unit="count", capture="min", severity="warn"),
)

# Which rule kinds fit which fact types (`same` fits per-device facts of any type).
RULES_FOR_TYPE: Mapping[str, frozenset[str]] = {
    "str": frozenset({"equals", "one_of", "contains", "min_version"}),
    "version": frozenset({"equals", "one_of", "contains", "min_version"}),
    "bool": frozenset({"equals", "one_of"}),
    "size": frozenset({"equals", "one_of", "min", "max"}),
    "count": frozenset({"equals", "one_of", "min", "max"}),
    "limit": frozenset({"equals", "one_of", "min", "max"}),
}


def spec(name: str) -> FactSpec | None:
    """The spec of a known fact, else None."""
    return FACTS.get(name)


_BINARY = (("PiB", 1024**5), ("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))


def display(fact: str, value: Any) -> str:
    """A fact or rule value as people read it: byte sizes in binary units, booleans as true/false."""
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    s = FACTS.get(fact)
    if s is not None and s.unit == "B" and s.per is None and isinstance(value, int):
        return _bytes(value)
    if isinstance(value, str) and value == "":
        return '""'
    if isinstance(value, float):
        return fmt_num(value, 6, trim=True)
    return fmt_num(value) if isinstance(value, int) else str(value)


def _bytes(n: int) -> str:
    """Exact when a binary unit divides it ('64 MiB'), else four digits of the nearest ('23.59 GiB')."""
    for name, size in _BINARY:
        if abs(n) >= size:
            return f"{fmt_num(n // size)} {name}" if n % size == 0 else fmt_bytes(n, digits=4)
    return f"{n} B"
