"""Pure parsers for the host facts of the configuration audit: /proc and /sys text, cgroup files.

Each takes the text a file holds and returns plain values; the reading lives in platform/facts.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

UNLIMITED = "unlimited"
# cgroup v1 prints "no limit" as the largest page-aligned signed 64-bit number.
_V1_NO_LIMIT = 1 << 62


def parse_cmdline(text: str) -> dict[str, str]:
    """Kernel parameters of /proc/cmdline as {key: value} ('' for a bare flag). Everything after
    '--' belongs to init and is left out; a later repeat of a key wins, as in the kernel."""
    out: dict[str, str] = {}
    for word in text.split():
        if word == "--":
            break
        key, _, value = word.partition("=")
        out[key] = value.strip('"')
    return out


def parse_thp(text: str) -> str | None:
    """The bracketed choice of /sys/kernel/mm/transparent_hugepage/enabled ('always [madvise] never')."""
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else None


def parse_swaps(text: str) -> int:
    """Total swap in bytes from /proc/swaps (sizes there are KiB; the first line is a header)."""
    total = 0
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3 and parts[2].isdecimal():
            total += int(parts[2]) * 1024
    return total


def parse_cpulist(text: str) -> frozenset[int]:
    """A kernel CPU list such as '0-3,8,10-11' as a set of CPU numbers."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(cpus)


@dataclass(frozen=True)
class IrqLine:
    """One numbered interrupt of /proc/interrupts."""

    irq: int
    counts: tuple[int, ...]
    chip: str
    name: str


def parse_interrupts(text: str) -> list[IrqLine]:
    """The numbered rows of /proc/interrupts (per-CPU counts, chip and hwirq, action names)."""
    lines = text.splitlines()
    if not lines:
        return []
    ncpu = len(lines[0].split())
    out = []
    for line in lines[1:]:
        head, sep, rest = line.partition(":")
        if not sep or not head.strip().isdecimal():
            continue
        fields = rest.split()
        counts = tuple(int(x) for x in fields[:ncpu] if x.isdecimal())
        tail = fields[len(counts):]
        out.append(IrqLine(int(head), counts, " ".join(tail[:-1]), tail[-1] if tail else ""))
    return out


def irqs_for(lines: Iterable[IrqLine], pci_address: str | None, ifname: str) -> list[int]:
    """IRQs of one interface: rows whose chip or name carries its PCI address (MSI-X chips,
    'mlx5_comp0@pci:0000:17:00.0'), or whose name starts with the interface name ('eth0-TxRx-0')."""
    out = []
    for ln in lines:
        text = f"{ln.chip} {ln.name}"
        if (pci_address and pci_address in text) or re.match(rf"{re.escape(ifname)}[-_@]", ln.name):
            out.append(ln.irq)
    return out


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """/proc/self/cgroup as {controller: path}; the cgroup v2 line ('0::/path') is under ''."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        for ctl in parts[1].split(",") if parts[1] else [""]:
            out[ctl.removeprefix("name=")] = parts[2]
    return out


@dataclass(frozen=True)
class CgroupMount:
    """One cgroup file system mount from /proc/self/mountinfo."""

    mount_point: str
    root: str
    version: int  # 1 or 2
    controllers: frozenset[str]


def parse_cgroup_mounts(text: str) -> list[CgroupMount]:
    """cgroup and cgroup2 mounts of /proc/self/mountinfo (v1 controllers from the super options)."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lf, rf = left.split(), right.split()
        if len(lf) < 5 or len(rf) < 3 or rf[0] not in ("cgroup", "cgroup2"):
            continue
        opts = {o.removeprefix("name=") for o in rf[2].split(",")}
        ctls = frozenset(opts - {"rw", "ro"}) if rf[0] == "cgroup" else frozenset()
        out.append(CgroupMount(lf[4], lf[3], 2 if rf[0] == "cgroup2" else 1, ctls))
    return out


def cgroup_dir(mounts: Iterable[CgroupMount], cgroups: Mapping[str, str],
               controller: str) -> tuple[str, int] | None:
    """The directory holding `controller`'s files for this process, and the cgroup version:
    the v1 mount of that controller if there is one, else the v2 mount."""
    ms = list(mounts)
    v1 = [m for m in ms if m.version == 1 and controller in m.controllers]
    if v1 and controller in cgroups:
        m, path = v1[0], cgroups[controller]
    else:
        v2 = [m for m in ms if m.version == 2]
        if not v2 or "" not in cgroups:
            return None
        m, path = v2[0], cgroups[""]
    rel = path[len(m.root):] if m.root != "/" and path.startswith(m.root) else path
    return "/".join(p for p in (m.mount_point.rstrip("/"), rel.strip("/")) if p), m.version


def parse_memory_limit(text: str) -> int | str:
    """memory.max ('max' or bytes) or v1 memory.limit_in_bytes (huge number = no limit)."""
    t = text.strip()
    if t == "max":
        return UNLIMITED
    n = int(t)
    return UNLIMITED if n >= _V1_NO_LIMIT else n


def parse_cpu_max(text: str) -> float | str:
    """cgroup v2 cpu.max ('max 100000' or '200000 100000') as CPUs."""
    quota, _, period = text.strip().partition(" ")
    if quota == "max":
        return UNLIMITED
    return int(quota) / int(period or 100000)


def parse_cfs(quota: str, period: str) -> float | str:
    """cgroup v1 cpu.cfs_quota_us and cpu.cfs_period_us as CPUs (-1: no quota)."""
    q = int(quota.strip())
    return UNLIMITED if q < 0 else q / int(period.strip())


def summarize_governors(governors: Iterable[str]) -> str | None:
    """One governor when every CPU has it, else 'mixed: performance x 30, powersave x 2'."""
    counts: dict[str, int] = {}
    for g in governors:
        counts[g] = counts.get(g, 0) + 1
    if not counts:
        return None
    if len(counts) == 1:
        return next(iter(counts))
    return "mixed: " + ", ".join(f"{g} x {n}" for g, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def running(comms: Iterable[str], program: str) -> bool:
    """Whether a process of that program runs, given /proc/*/comm names (cut to 15 characters)."""
    want = program[:15]
    return any(c.strip() == want for c in comms)


TIME_DAEMONS = ("chronyd", "ntpd", "systemd-timesyncd", "ptp4l", "phc2sys", "openntpd", "timemaster")


def time_daemon(comms: Iterable[str]) -> str:
    """The time-sync daemons running, comma-separated, or 'none'."""
    names = list(comms)
    found = [d for d in TIME_DAEMONS if running(names, d)]
    return ",".join(found) or "none"


def detect_container(*, dockerenv: bool, containerenv: bool, cgroup_text: str,
                     env_names: Iterable[str]) -> tuple[str, str]:
    """(runtime, evidence) from marker files, /proc/self/cgroup and the *names* of environment
    variables (their values are never looked at)."""
    names = set(env_names)
    if "KUBERNETES_SERVICE_HOST" in names:
        return "kubernetes", "KUBERNETES_SERVICE_HOST is set"
    if any(n.startswith("ENROOT_") for n in names):
        return "enroot", "ENROOT_* environment variables are set"
    if names & {"APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"}:
        return "apptainer", "APPTAINER_CONTAINER/SINGULARITY_CONTAINER is set"
    if containerenv:
        return "podman", "/run/.containerenv exists"
    if dockerenv:
        return "docker", "/.dockerenv exists"
    for word, kind in (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"),
                       ("containerd", "container"), ("lxc", "container")):
        if word in cgroup_text:
            return kind, f"/proc/self/cgroup mentions {word}"
    return "none", "no container markers"
