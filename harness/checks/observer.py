"""The observation loop of `harness observe` and the `observe` kind: read every source once per
interval, turn two readings into a tick, keep ticks in a fixed-size buffer.

Sources are read the cheapest way and only where present (a missing one is named in
`Window.sources`, never an error): /proc (CPU, PSI, tasks, network), the workload's cgroup,
/proc/diskstats, /dev/shm as the workload sees it, RDMA port counters, NVML. Watching a
workload reads its processes only; watching the node reads every process's stat and, for the
ones that ran, its I/O counters. Memory is fixed whatever the duration: the tick buffer halves
its resolution when full (series.observed.TickBuffer) and at most `max_procs` process totals
are kept (the least active are forgotten first).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from harness.platform import cgroup, diskstats, infiniband, shm
from harness.platform.nvml import GpuObservation, NvmlSession
from harness.platform.procfs import CLK_TCK, CpuTimes, NetDev, Pressure, ProcFs, TaskStat, TcpQueues
from harness.series.observed import Disk, Gpu, IoLimit, Net, Proc, Rdma, Tick, TickBuffer, Window

MAX_THREADS = 512  # threads per process whose state is read each tick
TCP_EVERY_S = 2.0  # /proc/net/tcp{,6} is read at most this often (it costs milliseconds)
TCP_GATE_B = 256 * 1024  # ... and only while TCP buffers hold this much (sockstat; Thresholds.tcp_backlog)


@dataclass(frozen=True)
class Reading:
    """Every source's raw counters at one instant (monotonic seconds `t`)."""

    t: float
    cpu: Optional[CpuTimes] = None
    psi: Mapping[str, Pressure] = field(default_factory=dict)
    cg: Optional[cgroup.CgroupReading] = None
    cg_paths: tuple[tuple[str, str], ...] = ()  # which cgroup each controller's counters are of
    disks: Mapping[str, diskstats.DiskStat] = field(default_factory=dict)
    net: Mapping[str, NetDev] = field(default_factory=dict)
    snmp: Mapping[str, int] = field(default_factory=dict)
    tcp: Optional[TcpQueues] = None
    rdma: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    shm: Optional[shm.ShmUsage] = None
    gpus: tuple[GpuObservation, ...] = ()
    procs: Mapping[tuple[int, int], tuple[TaskStat, Optional[tuple[int, int]], Optional[tuple[int, int]]]] = \
        field(default_factory=dict)  # (pid, starttime) -> (stat, io, schedstat)
    d_tasks: tuple[int, ...] = ()  # pids with a task in D
    r_tasks: int = 0
    tasks: int = 0


class _Totals:
    """Per-process totals over the window, at most `limit` processes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.procs: dict[tuple[int, int], Proc] = {}

    def add(self, key: tuple[int, int], comm: str, **inc: float) -> None:
        p = self.procs.get(key) or Proc(pid=key[0], comm=comm)
        upd: dict[str, Any] = {}
        for k, v in inc.items():
            cur = getattr(p, k)
            upd[k] = max(cur, v) if k.endswith("_max") else cur + v
        self.procs[key] = dataclasses.replace(p, **upd)
        if len(self.procs) > self.limit:  # forget the least active
            quiet = min(self.procs, key=lambda k: _activity(self.procs[k]))
            del self.procs[quiet]

    def top(self, n: int = 64) -> tuple[Proc, ...]:
        return tuple(sorted(self.procs.values(), key=_activity, reverse=True)[:n])


def _activity(p: Proc) -> float:
    return p.cpu_s + p.wait_s + (p.read_bytes + p.write_bytes) / 1e8 + p.d_ticks + p.gpu_mem_max / 1e9


class Observer:
    """Reads the sources for one target: `roots` (pids whose process trees are the workload) or,
    with no roots, the whole node."""

    def __init__(self, roots: tuple[int, ...] = (), *, scope: str = "", root: Path = Path("/"),
                 nvml: Optional[NvmlSession] = None, capacity: int = 600, max_procs: int = 256) -> None:
        self.roots = roots
        self.scope = scope or ("pids" if roots else "node")
        self.root = root
        self.fs = ProcFs(root)
        self.nvml = nvml
        self.buffer = TickBuffer(capacity)
        self.totals = _Totals(max_procs)
        self.prev: Optional[Reading] = None
        self.me = os.getpid()
        self._starts = {p: st.starttime for p in roots if (st := self.fs.task(p)) is not None}
        self.cg = self._locate()
        self.host_netns = self.fs.netns(self.me)
        self.sources: dict[str, str] = {}
        self.started = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
        self.t0: Optional[float] = None
        self._tcp_at = 0.0  # when /proc/net/tcp was last read
        self.tcp_reads = 0

    def _locate(self) -> Optional[cgroup.Cgroup]:
        return next((c for p in self.roots if (c := cgroup.locate(p, self.root)) is not None), None)

    def alive(self) -> bool:
        """Whether any root process still runs (always True for the node). A zombie is gone, and so
        is a pid the kernel has given to a new process (its start time differs)."""
        if not self.roots:
            return True
        for pid in self.roots:
            st = self.fs.task(pid)
            if st is not None and st.state not in ("Z", "X") \
                    and self._starts.get(pid, st.starttime) == st.starttime:
                return True
        return False

    # ------------------------------------------------------------ one reading

    def _note(self, source: str, value: object, why: str) -> None:
        self.sources.setdefault(source, "ok" if value is not None and value != {} else why)

    def read(self) -> Reading:
        fs, pid0 = self.fs, (self.roots[0] if self.roots else None)
        cpu = fs.stat()
        psi = {r: p for r in ("cpu", "memory", "io") if (p := fs.pressure(r)) is not None}
        if self.roots:  # the workload may move (a wrapper that enters its cgroup, then execs)
            self.cg = self._locate() or self.cg
        cg = cgroup.read(self.cg) if self.cg is not None else None
        disks = diskstats.read(self.root) or {}
        net_pid = pid0 if pid0 is not None and fs.task(pid0) is not None else None
        net = fs.net_dev(net_pid) or {}
        snmp = fs.snmp(net_pid) or {}
        tcp = self._tcp(net_pid, snmp)
        ib = self.root / "sys" / "class" / "infiniband"
        rdma = {f"{d}/{p}": c for (d, p), c in infiniband.port_counters(infiniband.devices(ib), ib).items()}
        usage = shm.usage_of(shm.path_for(net_pid, self.root))
        gpus = self.nvml.observe() if self.nvml is not None else ()
        procs, d_tasks, r_tasks, tasks = self._processes()
        for name, value, why in (("cpu", cpu, "no /proc/stat"), ("psi", psi or None, "kernel without PSI"),
                                 ("cgroup", cg if self.roots else {}, "no cgroup found" if self.roots
                                  else "node scope"),
                                 ("disks", disks or None, "no /proc/diskstats"),
                                 ("network", net or None, "no /proc/net/dev"),
                                 ("rdma", rdma or None, "no RDMA device"), ("shm", usage, "no /dev/shm"),
                                 ("gpu", gpus or None, "no NVML")):
            self._note(name, value, why)
        paths = tuple(sorted(self.cg.paths.items())) if self.cg else ()
        return Reading(time.monotonic(), cpu, psi, cg, paths, disks, net, snmp,
                       tcp, rdma, usage, gpus, procs, d_tasks, r_tasks, tasks)

    def _tcp(self, pid: Optional[int], snmp: Mapping[str, int]) -> Optional[TcpQueues]:
        """Bytes queued in TCP sockets. /proc/net/tcp costs milliseconds on any node (the kernel
        walks its whole socket hash table), so it is read only while TCP buffers hold at least
        TCP_GATE_B (sockstat, cheap) and TCP sends, and then at most every TCP_EVERY_S; in between
        the last reading stands."""
        pages = self.fs.tcp_buffer_pages(pid)
        prev = self.prev
        sending = prev is None or snmp.get("OutSegs") != prev.snmp.get("OutSegs")
        if pages is not None and (pages * _PAGE < TCP_GATE_B or not sending):
            return TcpQueues(0, 0, 0)
        now = time.monotonic()
        if prev is not None and prev.tcp is not None and prev.tcp.sockets \
                and now - self._tcp_at < TCP_EVERY_S:
            return prev.tcp
        self._tcp_at = now
        self.tcp_reads += 1
        return self.fs.tcp_queues(pid)

    def _processes(self) -> tuple[dict[tuple[int, int], Any], tuple[int, ...], int, int]:
        fs = self.fs
        prev = self.prev.procs if self.prev is not None else {}
        prev_cpu = {k[0]: v[0].cpu_ticks for k, v in prev.items()}
        out: dict[tuple[int, int], Any] = {}
        d_pids: list[int] = []
        running = tasks = 0
        if self.roots:
            for pid in fs.descendants(self.roots):
                st = fs.task(pid)
                if st is None:
                    continue
                out[(pid, st.starttime)] = (st, fs.io(pid), fs.schedstat(pid))
                states = [st.state]
                tids = fs.threads(pid)
                if len(tids) > 1:
                    states = [t.state for tid in tids[:MAX_THREADS] if (t := fs.task(pid, tid)) is not None]
                tasks += len(states)
                running += sum(s == "R" for s in states)
                if "D" in states:
                    d_pids.append(pid)
        else:  # the node: every process's stat, I/O counters only for those that ran or wait for I/O
            for pid in fs.pids():
                if pid == self.me or (st := fs.task(pid)) is None:
                    continue
                ran = st.cpu_ticks != prev_cpu.get(pid, -1) or st.state == "D"
                out[(pid, st.starttime)] = (st, fs.io(pid) if ran else None, None)
                tasks += 1
                running += st.state == "R"
                if st.state == "D":
                    d_pids.append(pid)
        return out, tuple(d_pids), running, tasks

    # ------------------------------------------------------------ two readings -> one tick

    def sample(self) -> None:
        """Read every source; from the second reading on, add the tick since the previous one."""
        cur = self.read()
        if self.t0 is None:
            self.t0 = cur.t
        if self.prev is not None and cur.t > self.prev.t:
            self.buffer.add(self._tick(self.prev, cur))
        self.prev = cur

    def _tick(self, a: Reading, b: Reading) -> Tick:
        dt = b.t - a.t
        kw: dict[str, Any] = {"t": round(b.t - (self.t0 or a.t), 3), "dt": round(dt, 3)}
        if a.cpu and b.cpu and b.cpu.total > a.cpu.total:
            span = b.cpu.total - a.cpu.total
            kw.update(ncpu=b.cpu.ncpu, cpu_busy=(b.cpu.busy - a.cpu.busy) / span,
                      cpu_iowait=(b.cpu.iowait - a.cpu.iowait) / span)
        kw["psi"] = _psi(a.psi, b.psi, dt)
        kw.update(self._work(a, b, dt))
        if a.cg is not None and b.cg is not None and a.cg_paths == b.cg_paths:  # not across a move
            kw.update(_cgroup(a.cg, b.cg, dt, b.disks))
        kw["disks"] = {n: Disk(util=min(1.0, (s.io_ms - p.io_ms) / 1000 / dt),
                               read_bps=(s.read_bytes - p.read_bytes) / dt,
                               write_bps=(s.write_bytes - p.write_bytes) / dt,
                               queue=(s.queue_ms - p.queue_ms) / 1000 / dt)
                       for n, s in b.disks.items() if (p := a.disks.get(n)) is not None}
        same_ns = not self.roots or self.fs.netns(self.roots[0]) in (None, self.host_netns)
        kw["net"] = {n: Net(rx_bps=(c.rx_bytes - o.rx_bytes) / dt, tx_bps=(c.tx_bytes - o.tx_bytes) / dt,
                            drops=(c.rx_drop - o.rx_drop + c.tx_drop - o.tx_drop) / dt,
                            speed_bps=self._speed(n) if same_ns else None)
                     for n, c in b.net.items() if (o := a.net.get(n)) is not None}
        if "OutSegs" in a.snmp and "OutSegs" in b.snmp:
            kw["tcp_out"] = (b.snmp["OutSegs"] - a.snmp["OutSegs"]) / dt
            kw["tcp_retrans"] = (b.snmp.get("RetransSegs", 0) - a.snmp.get("RetransSegs", 0)) / dt
        if b.tcp is not None:
            kw["tcp_send"] = float(b.tcp.send)
        kw["rdma"] = {port: Rdma(xmit_wait=_delta(c, a.rdma[port], "port_xmit_wait") / dt,
                                 discards=(_delta(c, a.rdma[port], "port_xmit_discards")
                                           + _delta(c, a.rdma[port], "port_rcv_errors")) / dt)
                      for port, c in b.rdma.items() if port in a.rdma}
        if b.shm is not None:
            kw.update(shm_used=float(b.shm.used), shm_size=float(b.shm.size))
        kw["gpus"] = tuple(_gpu(g) for g in b.gpus if g.error is None)
        for g in b.gpus:
            for pid, mem in g.processes:
                key = next((k for k in b.procs if k[0] == pid), None)
                if key is not None or not self.roots:
                    comm = b.procs[key][0].comm if key is not None else str(pid)
                    self.totals.add(key or (pid, 0), comm, gpu_mem_max=float(mem))
        return Tick(**kw)

    def _work(self, a: Reading, b: Reading, dt: float) -> dict[str, Any]:
        """The scope's tasks: CPU use and wait, I/O, faults; process totals updated."""
        cpu = wait = rd = wr = flt = 0.0
        for key, (st, io, sched) in b.procs.items():
            old = a.procs.get(key)
            d_cpu = (st.cpu_ticks - old[0].cpu_ticks) / CLK_TCK if old else 0.0
            d_flt = float(st.majflt - old[0].majflt) if old else 0.0
            d_wait = (sched[1] - old[2][1]) / 1e9 if old and sched and old[2] else 0.0
            d_rd = float(io[0] - old[1][0]) if old and io and old[1] else 0.0
            d_wr = float(io[1] - old[1][1]) if old and io and old[1] else 0.0
            cpu, wait, rd, wr, flt = cpu + d_cpu, wait + d_wait, rd + d_rd, wr + d_wr, flt + d_flt
            in_d = key[0] in b.d_tasks
            if d_cpu or d_wait or d_rd or d_wr or in_d or self.roots:
                self.totals.add(key, st.comm, cpu_s=d_cpu, wait_s=d_wait, read_bytes=d_rd, write_bytes=d_wr,
                                d_ticks=int(in_d), majflt=d_flt, rss_max=float(st.rss_pages * _PAGE))
        out: dict[str, Any] = {"tasks": b.tasks, "tasks_d": float(len(b.d_tasks)),
                               "tasks_r": float(b.r_tasks)}
        if b.procs:
            out.update(work_cpu=cpu / dt, work_read_bps=rd / dt, work_write_bps=wr / dt, work_majflt=flt / dt)
            if self.roots:
                out["work_wait"] = wait / dt
        return out

    def _speed(self, iface: str) -> Optional[float]:
        try:
            mbps = int((self.root / "sys" / "class" / "net" / iface / "speed").read_text().strip())
        except (OSError, ValueError):
            return None
        return mbps * 1e6 / 8 if mbps > 0 else None

    # ------------------------------------------------------------ the window

    def window(self, interval: float, command: Mapping[str, Any] | None = None) -> Window:
        ticks = self.buffer.all()
        duration = round(ticks[-1].t, 3) if ticks else 0.0
        cg = self.prev.cg if self.prev is not None else None
        paths = self.cg.paths if self.cg is not None else {}
        quota_file = f"{cg.quota_file} of {paths.get('cpu', '/')}" if cg and cg.quota_file else ""
        io_file = f"{cg.io_limit_file} of {paths.get('io', '/')}" if cg and cg.io_limit_file else ""
        return Window(scope=self.scope, started=self.started, duration_s=duration, interval_s=interval,
                      ticks=ticks, processes=self.totals.top(), pids=self.roots,
                      cgroup=self.cg.path if self.cg else None, memory_cgroup=paths.get("memory"),
                      quota_file=quota_file, io_limit_file=io_file,
                      shm_path="/dev/shm" if not self.roots else f"/dev/shm of pid {self.roots[0]}",
                      sources=dict(self.sources), command=dict(command or {}), dropped=self.buffer.merges)


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _delta(new: Mapping[str, int], old: Mapping[str, int], name: str) -> float:
    return float(max(0, new.get(name, 0) - old.get(name, 0)))


def _psi(a: Mapping[str, Pressure], b: Mapping[str, Pressure], dt: float) -> dict[str, float]:
    out = {}
    for res, p in b.items():
        q = a.get(res)
        if q is None:
            continue
        out[f"{res}.some"] = min(1.0, (p.some_us - q.some_us) / 1e6 / dt)
        if p.full_us is not None and q.full_us is not None:
            out[f"{res}.full"] = min(1.0, (p.full_us - q.full_us) / 1e6 / dt)
    return out


def _cgroup(a: cgroup.CgroupReading, b: cgroup.CgroupReading, dt: float,
            disks: Mapping[str, diskstats.DiskStat]) -> dict[str, Any]:
    out: dict[str, Any] = {"cg_quota": b.cpu_quota_cores, "cg_psi": _psi(a.pressure, b.pressure, dt)}
    if None not in (a.cpu_periods, b.cpu_periods, a.cpu_throttled_periods, b.cpu_throttled_periods):
        periods = (b.cpu_periods or 0) - (a.cpu_periods or 0)
        thr = (b.cpu_throttled_periods or 0) - (a.cpu_throttled_periods or 0)
        out["cg_throttled"] = thr / periods if periods > 0 else 0.0
    if a.cpu_throttled_us is not None and b.cpu_throttled_us is not None:
        out["cg_throttled_s"] = (b.cpu_throttled_us - a.cpu_throttled_us) / 1e6 / dt
    if b.mem_current is not None:
        out["mem_used"] = float(b.mem_current)
    if b.mem_limit is not None:
        out["mem_limit"] = float(b.mem_limit)
    out["mem_events"] = float(sum(max(0, b.mem_events.get(k, 0) - a.mem_events.get(k, 0))
                                  for k in ("max", "oom")))
    out["oom_kills"] = float(max(0, b.mem_events.get("oom_kill", 0) - a.mem_events.get("oom_kill", 0)))
    names = {s.dev: n for n, s in disks.items()}
    io = {}
    for dev, (r, w) in b.io_bytes.items():
        r0, w0 = a.io_bytes.get(dev, (r, w))
        r0, w0 = min(r0, r), min(w0, w)  # a counter that went back (a reset) counts from zero
        lim_r, lim_w = b.io_limits.get(dev, (None, None))
        if r - r0 or w - w0 or lim_r or lim_w:
            io[names.get(dev, dev)] = IoLimit((r - r0) / dt, (w - w0) / dt, lim_r, lim_w)
    out["io"] = io
    return out


def _gpu(g: GpuObservation) -> Gpu:
    pcie = (None if g.pcie_rx is None and g.pcie_tx is None
            else ((g.pcie_rx or 0.0) + (g.pcie_tx or 0.0)) * 1e9)
    return Gpu(gpu=g.gpu, util=None if g.util is None else g.util / 100, sm_clock=g.sm_clock,
               sm_clock_max=g.sm_clock_max, reasons=g.reasons or 0, temp=g.temp,
               mem_used=None if g.mem_used is None else float(g.mem_used),
               mem_total=None if g.mem_total is None else float(g.mem_total), pcie_bps=pcie)


def watch(observer: Observer, *, duration: Optional[float], interval: float,
          finished: Callable[[float], bool]) -> None:
    """Sample every `interval` s until `duration` passes, the roots are gone, or `finished(timeout)`
    (which waits up to timeout s for the workload to end) says so; one last sample at the end."""
    observer.sample()
    start = time.monotonic()
    due = start + interval
    end = start + duration if duration is not None else None
    last = start
    while True:
        now = time.monotonic()
        stop_at = due if end is None else min(due, end)
        if finished(max(0.0, stop_at - now)) or not observer.alive():
            break
        now = time.monotonic()
        if end is not None and now >= end - 1e-3:
            break
        if now >= due - 1e-3:
            observer.sample()
            last = now
            due += interval
            if due < now:  # fell behind (a stalled machine): skip, do not burst
                due = now + interval
    if time.monotonic() - last > 0.05 or not observer.buffer.ticks:  # a workload that ended at once
        observer.sample()  # still gets its one short tick
