"""The stall doctor's judgement: a sampled window -> findings, the primary bottleneck, one sentence.

Pure. Each resource has a rule that flags the ticks in which it held the workload back; its
`share` is the flagged time over the window. Every threshold is in THRESHOLDS (one table; a
profile's `hardware.observe` or a check's `thresholds` param overrides entries by name).

Scope matters: watching a workload (pids or a command) judges it from its own side: its CPU use
and run-queue wait, its cgroup, its tasks in D state, its network namespace, its /dev/shm. Other
tenants of a busy node do not make a sleeping workload "cpu-bound". Watching the node judges the
node's own counters (all CPUs, every disk, PSI).

Primary: a GPU that throttles or pages through PCIe comes first (the GPU is there but slow);
then, when the GPUs' utilisation averaged `gpu_bound` or more, `gpu` (compute-bound, the healthy
case); otherwise the host finding with the largest share (ties within 0.1 broken by TIE_ORDER:
memory trouble also shows as CPU time), worded "input-bound: GPUs busy N% of the time while ..."
where GPUs wait; otherwise `none`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from harness.parsers.clockreasons import BITS, THROTTLING, decode
from harness.series.observed import Proc, Tick, Window
from harness.series.stallwords import mib, num, pct, rate, size

RESOURCES = ("none", "gpu", "throttling", "gpu_memory", "storage", "cpu", "memory", "network", "shm")
TIE_ORDER = ("memory", "shm", "storage", "network", "cpu")


@dataclass(frozen=True)
class Thresholds:
    """The one table of thresholds (fractions 0-1 unless a unit is named)."""

    min_share: float = 0.2  # a resource is a finding when it held the work back this share of the window
    cpu_busy: float = 0.9  # node CPUs busy (node scope), or CPU use / CPUs the workload may use
    cpu_wait: float = 0.25  # s/s the workload's tasks were runnable but waited for a CPU
    cpu_throttled: float = 0.1  # CFS periods in which the cgroup's quota stopped the workload
    disk_util: float = 0.9  # device busy (I/O in flight) this fraction of the tick: saturated
    io_queue: float = 4.0  # requests in flight on a device on average: a deep (asynchronous) queue
    io_limit: float = 0.9  # cgroup I/O rate this fraction of its io.max / blkio limit: held by it
    io_pressure: float = 0.2  # PSI io `some` (node scope, or the workload's cgroup on v2)
    mem_pressure: float = 0.1  # PSI memory `some`
    mem_limit: float = 0.95  # cgroup memory use against its limit
    majflt: float = 100.0  # major page faults per second (swapping or re-reading evicted pages)
    net_util: float = 0.9  # interface rate against its link speed
    tcp_backlog: float = 262144.0  # bytes queued to send in the workload's sockets (B)
    tcp_retrans: float = 0.01  # retransmitted / sent TCP segments
    rdma_xmit_wait: float = 1e5  # port_xmit_wait ticks per second (the port lacked credits)
    shm_full: float = 0.95  # /dev/shm use against its size
    gpu_bound: float = 0.8  # GPU utilisation (mean over GPUs and window) to call the work compute-bound
    gpu_working: float = 0.3  # utilisation above which a low clock is throttling, not idling
    gpu_clock: float = 0.9  # SM clock below this fraction of its max, with a throttling reason
    gpu_mem_full: float = 0.95  # GPU memory used against its total
    pcie_paging_gbps: float = 1.0  # PCIe traffic of a memory-full GPU that means paging (GB/s)

    def with_overrides(self, values: Mapping[str, float]) -> Thresholds:
        """A copy with `values` replacing entries by name; ValueError names an unknown one."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown observe threshold(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(known))}")
        for k, v in values.items():  # above 1 a fraction is never reached: a rule turned off
            if not (math.isfinite(float(v)) and float(v) >= 0.0):
                raise ValueError(f"observe threshold {k}={v:g}: must be a finite number >= 0")
        return dataclasses.replace(self, **{k: float(v) for k, v in values.items()})


THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class ProcRef:
    pid: int
    comm: str
    what: str  # "read 78 GB", "used 1.9 cores"

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "comm": self.comm, "what": self.what}


@dataclass(frozen=True)
class Finding:
    resource: str
    share: float  # of the window, 0-1
    evidence: str
    devices: tuple[str, ...] = ()
    processes: tuple[ProcRef, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"resource": self.resource, "share": round(self.share, 3), "evidence": self.evidence,
                "devices": list(self.devices), "processes": [p.to_dict() for p in self.processes]}


@dataclass(frozen=True)
class Diagnosis:
    primary: str
    verdict: str  # one sentence
    findings: tuple[Finding, ...]
    gpu_busy: Optional[float] = None  # mean GPU utilisation over the window, 0-1; None without GPUs
    shares: Mapping[str, float] = dataclasses.field(default_factory=dict)  # every resource judged

    def to_dict(self) -> dict[str, Any]:
        return {"primary": self.primary, "verdict": self.verdict,
                "findings": [f.to_dict() for f in self.findings],
                "gpu_busy": None if self.gpu_busy is None else round(self.gpu_busy, 3)}


# ---------------------------------------------------------------- the per-resource rules

def _share(ticks: Sequence[Tick], flags: Sequence[bool]) -> float:
    total = sum(t.dt for t in ticks)
    return sum(t.dt for t, f in zip(ticks, flags, strict=True) if f) / total if total > 0 else 0.0


def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
    v = [x for x in values if x is not None]
    return sum(v) / len(v) if v else None


def _top(procs: Sequence[Proc], key: Callable[[Proc], float], what: Callable[[Proc], str],
         n: int = 3) -> tuple[ProcRef, ...]:
    ranked = sorted((p for p in procs if key(p) > 0), key=key, reverse=True)[:n]
    return tuple(ProcRef(p.pid, p.comm, what(p)) for p in ranked)


def _cpu(w: Window, th: Thresholds) -> Optional[Finding]:
    ticks = w.ticks
    procs = _top(w.processes, lambda p: p.cpu_s + p.wait_s,
                 lambda p: f"used {num(p.cpu_s)} CPU-s" + (f", waited {num(p.wait_s)} s for a CPU"
                                                           if p.wait_s >= 0.01 else ""))
    if w.scope == "node":
        flags = [t.cpu_busy is not None and t.cpu_busy >= th.cpu_busy for t in ticks]
        share = _share(ticks, flags)
        busy = _mean([t.cpu_busy for t, f in zip(ticks, flags, strict=True) if f]) or 0.0
        return Finding("cpu", share, f"all {ticks[-1].ncpu} CPUs {pct(busy)} busy for {pct(share)} of the "
                       "window", (), procs)
    throttled = [t.cg_throttled is not None and t.cg_throttled >= th.cpu_throttled for t in ticks]

    def saturated(t: Tick) -> bool:
        limit = min(float(t.ncpu), t.cg_quota or float(t.ncpu), float(max(t.tasks, 1)))
        return t.work_cpu is not None and t.work_cpu >= th.cpu_busy * limit

    waiting = [t.work_wait is not None and t.work_wait >= th.cpu_wait for t in ticks]
    flags = [a or saturated(t) or c for t, a, c in zip(ticks, throttled, waiting, strict=True)]
    share = _share(ticks, flags)
    cores = _mean([t.work_cpu for t, f in zip(ticks, flags, strict=True) if f]) or 0.0
    if _share(ticks, throttled) >= th.min_share:
        quota = max((t.cg_quota or 0.0) for t in ticks)
        frac = _mean([t.cg_throttled for t, f in zip(ticks, throttled, strict=True) if f]) or 0.0
        held = _mean([t.cg_throttled_s for t, f in zip(ticks, throttled, strict=True) if f]) or 0.0
        where = f" ({w.quota_file})" if w.quota_file else ""
        text = (f"throttled by its cgroup quota of {num(quota)} CPUs{where}: stopped in {pct(frac)} of "
                f"periods for {pct(_share(ticks, throttled))} of the window, held back {num(held)} s/s, "
                f"using {num(cores)} cores")
        return Finding("cpu", share, text, (), procs)
    wait = _mean([t.work_wait for t, f in zip(ticks, flags, strict=True) if f]) or 0.0
    node_busy = _mean([t.cpu_busy for t, f in zip(ticks, flags, strict=True) if f])
    node = f"; node CPUs {pct(node_busy)} busy" if node_busy is not None else ""
    return Finding("cpu", share, f"used {num(cores)} of {ticks[-1].ncpu} CPUs and waited {num(wait)} s/s "
                   f"for a CPU for {pct(share)} of the window{node}", (), procs)


def _storage(w: Window, th: Thresholds) -> Optional[Finding]:
    ticks = w.ticks

    def at_limit(t: Tick) -> list[str]:
        return [d for d, io in t.io.items()
                if (io.read_limit and io.read_bps >= th.io_limit * io.read_limit)
                or (io.write_limit and io.write_bps >= th.io_limit * io.write_limit)]

    def busy_disks(t: Tick) -> list[str]:
        return [d for d, s in t.disks.items() if s.util >= th.disk_util]

    def deep(t: Tick) -> list[str]:
        return [d for d, s in t.disks.items() if s.queue >= th.io_queue]

    def flag(t: Tick) -> bool:
        if at_limit(t):
            return True
        if w.scope == "node":
            return bool(busy_disks(t)) or t.psi.get("io.some", 0.0) >= th.io_pressure
        own = (t.work_read_bps or 0.0) + (t.work_write_bps or 0.0) > 0
        moving = own or bool(busy_disks(t))
        # asynchronous I/O (libaio, io_uring, NFS, GDS) waits in S state, not D: the workload's
        # own I/O moving while a device is saturated or holds a deep queue is waiting on storage
        return (t.tasks_d >= 1 and moving) or (own and bool(busy_disks(t) or deep(t))) \
            or t.cg_psi.get("io.some", 0.0) >= th.io_pressure

    flags = [flag(t) for t in ticks]
    share = _share(ticks, flags)
    hit = [t for t, f in zip(ticks, flags, strict=True) if f] or list(ticks)
    procs = _top(w.processes, lambda p: p.read_bytes + p.write_bytes + p.d_ticks,
                 lambda p: f"read {size(p.read_bytes)}, wrote {size(p.write_bytes)}"
                 + (f", in D state {p.d_ticks} samples" if p.d_ticks else ""))
    limited = sorted({d for t in hit for d in at_limit(t)})
    d_tasks = _mean([t.tasks_d for t in hit]) or 0.0
    waiting = (f"; {num(d_tasks)} task{'' if d_tasks == 1 else 's'} in D state on average"
               if d_tasks else "")
    if w.scope != "node" and not d_tasks and any(deep(t) or busy_disks(t) for t in hit):
        waiting = "; its tasks slept (S state) with their I/O in flight: asynchronous I/O"
    if limited:
        dev = limited[0]
        ios = [t.io[dev] for t in hit if dev in t.io]
        r, wr = _mean([i.read_bps for i in ios]) or 0.0, _mean([i.write_bps for i in ios]) or 0.0
        lim_r = max((i.read_limit or 0.0) for i in ios)
        lim_w = max((i.write_limit or 0.0) for i in ios)
        parts = ([f"read {rate(r)} of {rate(lim_r)} allowed"] if lim_r else []) + \
                ([f"wrote {rate(wr)} of {rate(lim_w)} allowed"] if lim_w else [])
        where = f" ({w.io_limit_file})" if w.io_limit_file else ""
        return Finding("storage", share, f"{dev} held at its cgroup I/O limit{where}: {', '.join(parts)} "
                       f"for {pct(share)} of the window{waiting}", tuple(limited), procs)
    util: dict[str, list[float]] = {}
    for t in hit:
        for d, s in t.disks.items():
            util.setdefault(d, []).append(s.util)
    ranked = sorted(util, key=lambda d: sum(util[d]) / len(util[d]), reverse=True)
    if not ranked:
        return Finding("storage", share, f"tasks waited for I/O (D state) for {pct(share)} of the window"
                       f"{waiting}", (), procs)
    dev = ranked[0]
    disk = [t.disks[dev] for t in hit if dev in t.disks]
    u = sum(s.util for s in disk) / len(disk)
    bps = sum(s.read_bps + s.write_bps for s in disk) / len(disk)
    q = sum(s.queue for s in disk) / len(disk)
    sat = [d for d in ranked if sum(util[d]) / len(util[d]) >= th.disk_util]
    return Finding("storage", share, f"{dev} {'saturated' if u >= th.disk_util else 'busy'} (util {pct(u)}, "
                   f"{rate(bps)}, queue {num(q)}) for {pct(share)} of the window{waiting}",
                   tuple(sat or [dev]), procs)


def _memory(w: Window, th: Thresholds) -> Optional[Finding]:
    ticks = w.ticks

    def flag(t: Tick) -> bool:
        if t.oom_kills > 0:
            return True
        if w.scope == "node":
            return t.psi.get("memory.some", 0.0) >= th.mem_pressure or (t.work_majflt or 0.0) >= th.majflt
        at_limit = t.mem_events > 0 or (t.mem_limit is not None and t.mem_used is not None
                                        and t.mem_used >= th.mem_limit * t.mem_limit)
        stalled = (t.cg_psi.get("memory.some", t.psi.get("memory.some", 0.0)) >= th.mem_pressure
                   or (t.work_majflt or 0.0) >= th.majflt)
        return (at_limit and stalled) or t.cg_psi.get("memory.some", 0.0) >= th.mem_pressure

    flags = [flag(t) for t in ticks]
    share = _share(ticks, flags)
    hit = [t for t, f in zip(ticks, flags, strict=True) if f] or list(ticks)
    procs = _top(w.processes, lambda p: p.rss_max, lambda p: f"resident {mib(p.rss_max)}, "
                 f"{num(p.majflt)} major faults")
    kills = sum(t.oom_kills for t in ticks)
    hits = sum(t.mem_events for t in ticks)
    stall = _mean([t.cg_psi.get("memory.some", t.psi.get("memory.some")) for t in hit])
    parts = []
    limit = max((t.mem_limit or 0.0) for t in ticks)
    if limit:
        used = max((t.mem_used or 0.0) for t in hit)
        where = f" {w.memory_cgroup}" if w.memory_cgroup else ""
        parts.append(f"at its cgroup memory limit{where}: {mib(used)} of {mib(limit)}")
    if stall is not None:
        parts.append(f"tasks stalled on memory {pct(stall)} of the time")
    if hits:
        parts.append(f"limit hit {hits:,.0f} times")
    if kills:
        parts.append(f"{kills:.0f} OOM kills")
    return Finding("memory", share, f"{'; '.join(parts) or 'memory pressure'} for {pct(share)} of the window",
                   (), procs)


def _network(w: Window, th: Thresholds) -> Optional[Finding]:
    ticks = w.ticks

    def full_links(t: Tick) -> list[str]:
        return [n for n, s in t.net.items()
                if s.speed_bps and max(s.rx_bps, s.tx_bps) >= th.net_util * s.speed_bps]

    def congested(t: Tick) -> list[str]:
        return [n for n, r in t.rdma.items() if r.xmit_wait >= th.rdma_xmit_wait or r.discards > 0]

    def retrans(t: Tick) -> float:
        return (t.tcp_retrans or 0.0) / t.tcp_out if t.tcp_out else 0.0

    def flag(t: Tick) -> bool:
        backlog = (t.tcp_send or 0.0) >= th.tcp_backlog and (t.tcp_out or 0.0) > 0
        return backlog or retrans(t) >= th.tcp_retrans or bool(full_links(t)) or bool(congested(t))

    flags = [flag(t) for t in ticks]
    share = _share(ticks, flags)
    hit = [t for t, f in zip(ticks, flags, strict=True) if f] or list(ticks)
    devs = sorted({d for t in hit for d in full_links(t) + congested(t)})
    busiest: dict[str, float] = {}
    for t in hit:
        for n, s in t.net.items():
            if n != "lo":
                busiest[n] = busiest.get(n, 0.0) + max(s.rx_bps, s.tx_bps) * t.dt
    top = max(busiest, key=lambda n: busiest[n]) if busiest else None
    span = sum(t.dt for t in hit)
    parts = []
    if top is not None and busiest[top] > 0:
        parts.append(f"{top} moving {rate(busiest[top] / span)}")
        devs = devs or [top]
    backlog = _mean([t.tcp_send for t in hit])
    if backlog:
        parts.append(f"{size(backlog)} queued to send")
    rt = _mean([retrans(t) for t in hit]) or 0.0
    if rt:
        parts.append(f"{pct(rt) if rt >= 0.01 else f'{100 * rt:.2f}%'} of TCP segments retransmitted")
    if any(congested(t) for t in hit):
        parts.append("RDMA ports waiting for credits or discarding")
    procs = _top(w.processes, lambda p: p.cpu_s + 0.001,
                 lambda p: f"used {num(p.cpu_s)} CPU-s" if p.cpu_s >= 0.01 else "sleeping on its sockets")
    return Finding("network", share, f"{', '.join(parts) or 'network limited'} for {pct(share)} of the "
                   "window", tuple(devs), procs)


def _shm(w: Window, th: Thresholds) -> Optional[Finding]:
    ticks = w.ticks
    flags = [t.shm_size is not None and t.shm_used is not None and t.shm_used >= th.shm_full * t.shm_size
             for t in ticks]
    share = _share(ticks, flags)
    size_ = max((t.shm_size or 0.0) for t in ticks)
    used = max((t.shm_used or 0.0) for t in ticks)
    procs = _top(w.processes, lambda p: p.rss_max, lambda p: f"resident {mib(p.rss_max)}")
    return Finding("shm", share, f"{w.shm_path} full ({mib(used)} of {mib(size_)}) for {pct(share)} of the "
                   "window: shared-memory allocations fail (a container's shm size is too small?)",
                   (w.shm_path,), procs)


# ---------------------------------------------------------------- GPUs

def _gpu_flags(w: Window, pred: Callable[[Any], bool]) -> dict[int, list[bool]]:
    out: dict[int, list[bool]] = {}
    for t in w.ticks:
        for g in t.gpus:
            out.setdefault(g.gpu, []).append(pred(g))
    return out


@dataclass(frozen=True)
class _Worst:
    """The GPU in a condition for the largest share of the window, its samples in that condition,
    and every GPU in it for at least `min_share` (the worst one when none is)."""

    share: float
    gpu: int
    samples: tuple[Any, ...]
    devices: tuple[str, ...]


def _worst_gpu(w: Window, pred: Callable[[Any], bool], min_share: float) -> Optional[_Worst]:
    """None without GPU samples; a _Worst with no samples when no GPU was ever in the condition."""
    shares = {i: _share(w.ticks, f) for i, f in _gpu_flags(w, pred).items()}
    if not shares:
        return None
    worst = max(shares, key=lambda i: shares[i])
    gs = tuple(g for t in w.ticks for g in t.gpus if g.gpu == worst and pred(g))
    devs = tuple(f"gpu{i}" for i, s in sorted(shares.items()) if s >= min_share) or (f"gpu{worst}",)
    return _Worst(shares[worst], worst, gs, devs)


def _gpu_procs(w: Window) -> tuple[ProcRef, ...]:
    return _top(w.processes, lambda p: p.gpu_mem_max, lambda p: f"GPU memory {mib(p.gpu_mem_max)}")


def gpu_busy_share(w: Window) -> Optional[float]:
    """How busy the GPUs were: utilisation (the share of time a kernel ran) averaged over the GPUs
    and weighted by time; None without GPU readings."""
    num_, den = 0.0, 0.0
    for t in w.ticks:
        for g in t.gpus:
            if g.util is not None:
                num_, den = num_ + g.util * t.dt, den + t.dt
    return num_ / den if den > 0 else None


def _throttling(w: Window, th: Thresholds) -> Optional[Finding]:
    mask = sum(BITS[r] for r in THROTTLING)

    def throttled(g: Any) -> bool:
        return bool(g.util is not None and g.util >= th.gpu_working and g.sm_clock and g.sm_clock_max
                    and g.sm_clock < th.gpu_clock * g.sm_clock_max and g.reasons & mask)

    found = _worst_gpu(w, throttled, th.min_share)
    if found is None:
        return None
    worst, gs, devs = found.gpu, found.samples, found.devices
    if not gs:
        return Finding("throttling", 0.0, "no GPU throttled")
    clock = sum(g.sm_clock or 0.0 for g in gs) / len(gs)
    reasons = 0
    for g in gs:
        reasons |= g.reasons & mask
    names = ", ".join(decode(reasons))
    temp = max((g.temp for g in gs if g.temp is not None), default=None)
    text = (f"gpu{worst} at {num(clock)} of {num(gs[0].sm_clock_max or 0.0)} MHz for {pct(found.share)} "
            f"of the window ({names})" + (f", {temp:.0f} C" if temp is not None else ""))
    if len(devs) > 1:
        text += f"; throttled too: {', '.join(d for d in devs if d != f'gpu{worst}')}"
    return Finding("throttling", found.share, text, devs, _gpu_procs(w))


def _gpu_memory(w: Window, th: Thresholds) -> Optional[Finding]:
    def paging(g: Any) -> bool:
        return bool(g.mem_used and g.mem_total and g.mem_used >= th.gpu_mem_full * g.mem_total
                    and (g.pcie_bps or 0.0) >= th.pcie_paging_gbps * 1e9)

    found = _worst_gpu(w, paging, th.min_share)
    if found is None:
        return None
    worst, gs, devs = found.gpu, found.samples, found.devices
    if not gs:
        return Finding("gpu_memory", 0.0, "no GPU memory full")
    pcie = sum(g.pcie_bps or 0.0 for g in gs) / len(gs)
    util = _mean([g.util for g in gs]) or 0.0
    used, total = mib(gs[-1].mem_used or 0.0), mib(gs[-1].mem_total or 0.0)
    return Finding("gpu_memory", found.share,
                   f"gpu{worst} memory full ({used} of {total}) "
                   f"and paging over PCIe at {rate(pcie)} for {pct(found.share)} of the window, "
                   f"busy {pct(util)}", devs, _gpu_procs(w))


def _gpu(w: Window, busy: float) -> Finding:
    n = len({g.gpu for t in w.ticks for g in t.gpus})
    return Finding("gpu", busy, f"{n} GPU{'s' if n != 1 else ''} busy {pct(busy)} of the time "
                   "(utilisation averaged over the GPUs and the window)", tuple(f"gpu{i}" for i in range(n)),
                   _gpu_procs(w))


# ---------------------------------------------------------------- the verdict

HOST_RULES: Mapping[str, Callable[[Window, Thresholds], Optional[Finding]]] = {
    "storage": _storage, "cpu": _cpu, "memory": _memory, "network": _network, "shm": _shm,
}
LABELS = {"gpu": "compute-bound", "throttling": "throttled", "gpu_memory": "GPU memory full",
          "storage": "storage-bound", "cpu": "cpu-bound", "memory": "memory-bound",
          "network": "network-bound", "shm": "shm full"}


def diagnose(w: Window, th: Thresholds = THRESHOLDS) -> Diagnosis:
    """The findings (share >= min_share), the primary resource and the verdict sentence."""
    if not w.ticks:
        return Diagnosis("none", "nothing observed: the window holds no samples", ())
    found: list[Finding] = []
    shares: dict[str, float] = {}
    for rule in (_throttling, _gpu_memory, *HOST_RULES.values()):
        f = rule(w, th)
        if f is not None:
            shares[f.resource] = round(f.share, 4)
            if f.share >= th.min_share and f.share > 0:
                found.append(f)
    busy = gpu_busy_share(w)
    if busy is not None:
        shares["gpu"] = round(busy, 4)
    gpu_first = [f for f in found if f.resource in ("throttling", "gpu_memory")]
    host = sorted((f for f in found if f.resource in HOST_RULES),
                  key=lambda f: (-f.share, TIE_ORDER.index(f.resource)))
    if host:  # within 0.1 of the largest share, the earlier in TIE_ORDER wins
        near = [f for f in host if f.share >= host[0].share - 0.1]
        first = min(near, key=lambda f: TIE_ORDER.index(f.resource))
        host = [first] + [f for f in host if f is not first]
    if busy is not None and busy >= th.min_share:
        found.append(_gpu(w, busy))
    if gpu_first:
        primary = max(gpu_first, key=lambda f: f.share)
    elif busy is not None and busy >= th.gpu_bound:
        primary = next(f for f in found if f.resource == "gpu")
    elif host:
        primary = host[0]
    else:
        return Diagnosis("none", _nothing(w, busy, th), tuple(found), busy, shares)
    ordered = (primary, *[f for f in gpu_first + host if f is not primary],
               *[f for f in found if f.resource == "gpu" and f is not primary])
    return Diagnosis(primary.resource, _sentence(primary, busy, th), ordered, busy, shares)


def _nothing(w: Window, busy: Optional[float], th: Thresholds) -> str:
    gpus = f"; GPUs busy {pct(busy)} of the time" if busy is not None else ""
    what = "the node" if w.scope == "node" else "the workload"
    return (f"none: nothing held {what} back for {pct(th.min_share)} or more of the "
            f"{w.duration_s:.0f} s window{gpus}")


def _sentence(f: Finding, busy: Optional[float], th: Thresholds) -> str:
    if f.resource in HOST_RULES and busy is not None and busy < th.gpu_bound:
        head = f"input-bound: GPUs busy {pct(busy)} of the time while {f.resource} held them back: "
    else:
        head = f"{LABELS[f.resource]}: "
    who = f"; {f.processes[0].comm} (pid {f.processes[0].pid}) {f.processes[0].what}" if f.processes else ""
    return head + f.evidence + who
