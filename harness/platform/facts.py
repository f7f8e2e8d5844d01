"""Read the configuration facts of this machine: /proc, /sys, rlimits, cgroups, NICs.

Every reader is best-effort: a fact that cannot be known is a Fact with value None and the
reason. Tools run through the `tool` callable the caller gives (the check records their output).
GPU, library and RDMA facts are read by platform/stackfacts.py.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.facts import FACTS, UNLIMITED, UNSET, Fact
from harness.parsers import hostfacts as hp
from harness.parsers.sysinfo import parse_os_release
from harness.platform import stackfacts
from harness.platform.stackfacts import Tool
from harness.platform.sysfs import PROC, SYS, read

CMDLINE_KEYS = ("iommu", "intel_iommu", "amd_iommu", "hugepages", "default_hugepagesz", "pci")
TIME_ERROR = 5  # adjtimex(2): clock not synchronised


def comms() -> list[str]:
    """The command names of every process (/proc/<pid>/comm)."""
    out = []
    for p in PROC.glob("[0-9]*/comm"):
        text = read(p)
        if text is not None:
            out.append(text.strip())
    return out


def collect(tool: Tool, *, inventory: Mapping[str, Any] | None = None,
            env: Mapping[str, str] | None = None) -> tuple[Fact, ...]:
    """Every fact of the catalogue, in catalogue order of families: host, GPU, libraries, network."""
    environ = dict(os.environ if env is None else env)
    names = comms()
    facts = [*host_facts(environ, names), *container_facts(environ)]
    facts += stackfacts.gpu_facts(tool, inventory or {}, names)
    entries = stackfacts.ld_entries(tool)
    facts += stackfacts.lib_facts(tool, entries, environ)
    facts += stackfacts.rdma_facts(tool, entries)
    facts += nic_facts()
    order = {name: i for i, name in enumerate(FACTS)}
    return tuple(sorted(facts, key=lambda f: order.get(f.name, len(order))))


# ---------------------------------------------------------------- host

def host_facts(env: Mapping[str, str], names: Sequence[str]) -> Iterator[Fact]:
    yield Fact("host.kernel", platform.release(), "uname -r")
    osr = parse_os_release(read("/etc/os-release") or "")
    yield _maybe("host.os", osr.get("PRETTY_NAME"), "/etc/os-release", "no PRETTY_NAME in /etc/os-release")
    yield from _cmdline()
    yield from _cpu()
    nb = read(PROC / "sys/kernel/numa_balancing")
    yield _maybe("host.numa_balancing", nb.strip() != "0" if nb else None,
                 "/proc/sys/kernel/numa_balancing", "kernel without automatic NUMA balancing")
    thp = read(SYS / "kernel/mm/transparent_hugepage/enabled")
    yield _maybe("host.thp", hp.parse_thp(thp) if thp else None,
                 "/sys/kernel/mm/transparent_hugepage/enabled", "kernel without transparent hugepages")
    swaps = read(PROC / "swaps")
    yield _maybe("host.swap_bytes", hp.parse_swaps(swaps) if swaps is not None else None, "/proc/swaps",
                 "/proc/swaps not readable")
    try:
        st = os.statvfs("/dev/shm")
        yield Fact("host.shm_bytes", st.f_blocks * st.f_frsize, "statvfs(/dev/shm)")
    except OSError as e:
        yield Fact("host.shm_bytes", None, "statvfs(/dev/shm)", reason=f"/dev/shm: {e.strerror}")
    for name, res in (("memlock", resource.RLIMIT_MEMLOCK), ("nofile", resource.RLIMIT_NOFILE),
                      ("nproc", resource.RLIMIT_NPROC)):
        soft = resource.getrlimit(res)[0]
        yield Fact(f"host.{name}", UNLIMITED if soft == resource.RLIM_INFINITY else soft,
                   f"getrlimit(RLIMIT_{name.upper()}), soft limit")
    yield _clock()
    yield Fact("host.time_sync_daemon", hp.time_daemon(names), "/proc/*/comm")
    yield Fact("host.irqbalance", hp.running(names, "irqbalance"), "/proc/*/comm")
    for var in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        yield Fact(f"host.{var.lower()}", env.get(var, UNSET), f"environment variable {var}")


def _maybe(name: str, value: Any, source: str, reason: str,
           labels: Mapping[str, str] | None = None) -> Fact:
    return Fact(name, value, source, dict(labels or {}), reason="" if value is not None else reason)


def _cmdline() -> Iterator[Fact]:
    text = read(PROC / "cmdline")
    if text is None:
        for key in ("", *CMDLINE_KEYS):
            yield Fact("host.kernel_cmdline" + (f".{key}" if key else ""), None, "/proc/cmdline",
                       reason="/proc/cmdline not readable")
        return
    params = hp.parse_cmdline(text)
    yield Fact("host.kernel_cmdline", text.strip(), "/proc/cmdline")
    for key in CMDLINE_KEYS:
        yield Fact(f"host.kernel_cmdline.{key}", params.get(key, UNSET), "/proc/cmdline")


def _cpu() -> Iterator[Fact]:
    cpu = SYS / "devices/system/cpu"
    govs = [g.strip() for p in sorted(cpu.glob("cpu[0-9]*/cpufreq/scaling_governor"))
            if (g := read(p)) is not None]
    yield _maybe("host.cpu_governor", hp.summarize_governors(govs),
                 "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
                 "no cpufreq in /sys (usual in a VM, or no cpufreq driver)")
    boost = read(cpu / "cpufreq/boost")
    if boost is not None:
        yield Fact("host.cpu_boost", boost.strip() == "1", "/sys/devices/system/cpu/cpufreq/boost")
        return
    no_turbo = read(cpu / "intel_pstate/no_turbo")
    if no_turbo is not None:
        yield Fact("host.cpu_boost", no_turbo.strip() == "0",
                   "/sys/devices/system/cpu/intel_pstate/no_turbo")
        return
    yield Fact("host.cpu_boost", None, "/sys/devices/system/cpu/cpufreq/boost",
               reason="no boost control in /sys (usual in a VM)")


def _clock() -> Fact:
    src = "adjtimex(2) clock state"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        buf = ctypes.create_string_buffer(1024)  # struct timex (~208 bytes), modes=0: read only
        state = libc.adjtimex(buf)
    except (OSError, AttributeError) as e:
        return Fact("host.clock_synced", None, src, reason=f"adjtimex not available: {e}")
    if state < 0:
        return Fact("host.clock_synced", None, src,
                    reason=f"adjtimex failed: {os.strerror(ctypes.get_errno())}")
    return Fact("host.clock_synced", state != TIME_ERROR, f"{src} = {state}")


# ---------------------------------------------------------------- container and cgroups

def container_facts(env: Mapping[str, str]) -> Iterator[Fact]:
    cgroup_text = read(PROC / "self/cgroup") or ""
    kind, why = hp.detect_container(dockerenv=Path("/.dockerenv").exists(),
                                    containerenv=Path("/run/.containerenv").exists(),
                                    cgroup_text=cgroup_text, env_names=env.keys())
    yield Fact("host.container", kind, why)
    mounts = hp.parse_cgroup_mounts(read(PROC / "self/mountinfo") or "")
    groups = hp.parse_proc_cgroup(cgroup_text)
    mem = hp.cgroup_dir(mounts, groups, "memory")
    cpu = hp.cgroup_dir(mounts, groups, "cpu")
    version = mem or cpu
    yield _maybe("host.cgroup_version", f"v{version[1]}" if version else None, "/proc/self/mountinfo",
                 "no cgroup file system mounted")
    yield _cgroup_value("host.cgroup_memory_limit", mem,
                        {2: ("memory.max",), 1: ("memory.limit_in_bytes",)},
                        lambda t: hp.parse_memory_limit(t[0]))
    yield _cgroup_value("host.cgroup_cpu_quota", cpu,
                        {2: ("cpu.max",), 1: ("cpu.cfs_quota_us", "cpu.cfs_period_us")},
                        lambda t: hp.parse_cpu_max(t[0]) if len(t) == 1 else hp.parse_cfs(t[0], t[1]))


def _cgroup_value(name: str, where: tuple[str, int] | None, files: Mapping[int, tuple[str, ...]],
                  parse: Callable[[list[str]], Any]) -> Fact:
    if where is None:
        return Fact(name, None, "/proc/self/cgroup", reason="no cgroup controller for it is mounted")
    base, version = where
    # Our cgroup's own file, else the nearest ancestor's (a namespace or a path the mount hides).
    first = files[version][0]
    d = next((c for c in (Path(base), *Path(base).parents) if (c / first).exists()), Path(base))
    texts = [read(d / f) for f in files[version]]
    src = ", ".join(str(d / f) for f in files[version])
    if any(t is None for t in texts):
        return Fact(name, None, src, reason="cgroup files not readable")
    try:
        return Fact(name, parse([t for t in texts if t is not None]), src)
    except ValueError as e:
        return Fact(name, None, src, reason=f"unreadable: {e}")


# ---------------------------------------------------------------- network interfaces

def physical_nics() -> list[Path]:
    """/sys/class/net entries that sit on a device (no lo, bridges, veths, ifbs)."""
    return [p for p in sorted((SYS / "class/net").glob("*")) if (p / "device").exists()]


def nic_facts() -> Iterator[Fact]:
    nics = physical_nics()
    if not nics:
        for name in ("net.mtu", "net.queues", "net.irq_spread"):
            yield Fact(name, None, "/sys/class/net", reason="no physical network interface")
        return
    interrupts = hp.parse_interrupts(read(PROC / "interrupts") or "")
    for nic in nics:
        labels = {"nic": nic.name}
        mtu = (read(nic / "mtu") or "").strip()
        yield _maybe("net.mtu", int(mtu) if mtu.isdigit() else None, f"{nic}/mtu", "mtu not readable",
                     labels)
        rx = list((nic / "queues").glob("rx-*"))
        yield Fact("net.queues", len(rx), f"{nic}/queues/rx-*", labels)
        yield _irq_spread(nic, labels, interrupts)


def _pci_device(nic: Path) -> Path | None:
    """The PCI function under a NIC (virtio NICs sit one level below theirs)."""
    dev = (nic / "device").resolve()
    for cand in (dev, dev.parent):
        if (cand / "msi_irqs").is_dir():
            return cand
    return next((c for c in (dev, dev.parent) if c.name.count(":") == 2), None)


def _irq_spread(nic: Path, labels: Mapping[str, str], interrupts: list[hp.IrqLine]) -> Fact:
    pci = _pci_device(nic)
    msi = pci / "msi_irqs" if pci is not None else None
    if msi is not None and msi.is_dir():
        irqs = sorted(int(p.name) for p in msi.iterdir() if p.name.isdigit())
        src = f"{msi} and /proc/irq/*/effective_affinity_list"
    else:
        irqs = hp.irqs_for(interrupts, pci.name if pci else None, nic.name)
        src = "/proc/interrupts and /proc/irq/*/effective_affinity_list"
    cpus: set[int] = set()
    for irq in irqs:
        irq_dir = PROC / f"irq/{irq}"
        text = read(irq_dir / "effective_affinity_list") or read(irq_dir / "smp_affinity_list")
        if text and text.strip():
            cpus |= hp.parse_cpulist(text)
    if not cpus:
        return Fact("net.irq_spread", None, src, dict(labels), reason=f"no interrupts found for {nic.name}")
    return Fact("net.irq_spread", len(cpus), f"{len(irqs)} IRQs via {src}", dict(labels))
