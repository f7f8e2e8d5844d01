"""What `harness observe` samples: a window of ticks (rates and fractions per interval) plus
per-process totals. Pure data, JSON round trip, and the merge that keeps memory fixed.

A tick covers `dt` seconds ending `t` seconds into the window. Rates are per second over the
tick (bytes/s, cores, s/s), fractions are 0-1, gauges (memory used, shm used) are the reading at
the tick's end. `merge()` folds two neighbouring ticks into one covering both: the later tick's
rates and fractions stand for the pair (a systematic sample: shares of time stay unbiased and
each reading keeps its crisp value, where averaging would smear a saturated second and an idle
one into two half-busy ones), gauges keep their peak, event counts are summed, reason bits
or-ed. The buffer halves its resolution with it when it fills, so a week-long window costs what
ten minutes do.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

FORMAT_VERSION = 1
MAX = {"merge": "max"}
SUM = {"merge": "sum"}
OR = {"merge": "or"}


@dataclass(frozen=True)
class Disk:
    util: float  # fraction of the tick with I/O in flight
    read_bps: float
    write_bps: float
    queue: float  # average requests in flight


@dataclass(frozen=True)
class IoLimit:
    """The workload cgroup's I/O rate on one device against its limit (None: no limit)."""

    read_bps: float
    write_bps: float
    read_limit: Optional[float] = field(default=None, metadata=MAX)
    write_limit: Optional[float] = field(default=None, metadata=MAX)


@dataclass(frozen=True)
class Net:
    rx_bps: float
    tx_bps: float
    drops: float  # packets dropped per second, both directions
    speed_bps: Optional[float] = field(default=None, metadata=MAX)  # link speed, when the kernel says


@dataclass(frozen=True)
class Rdma:
    xmit_wait: float  # port_xmit_wait ticks per second (credits lacking: congestion)
    discards: float  # port_xmit_discards + port_rcv_errors per second


@dataclass(frozen=True)
class Gpu:
    gpu: int
    util: Optional[float] = None  # 0-1
    sm_clock: Optional[float] = None  # MHz
    sm_clock_max: Optional[float] = field(default=None, metadata=MAX)
    reasons: int = field(default=0, metadata=OR)
    temp: Optional[float] = field(default=None, metadata=MAX)
    mem_used: Optional[float] = field(default=None, metadata=MAX)
    mem_total: Optional[float] = field(default=None, metadata=MAX)
    pcie_bps: Optional[float] = None  # rx + tx


@dataclass(frozen=True)
class Tick:
    """One sampling interval. None: the source was not there (the attribution skips it)."""

    t: float
    dt: float
    ncpu: int = field(default=1, metadata=MAX)
    cpu_busy: Optional[float] = None  # node, 0-1 of all CPUs
    cpu_iowait: Optional[float] = None
    psi: Mapping[str, float] = field(default_factory=dict)  # node "cpu.some", "io.full", ...: 0-1
    cg_psi: Mapping[str, float] = field(default_factory=dict)  # the workload cgroup's (v2)
    tasks: int = field(default=0, metadata=MAX)  # in scope (workload tasks, or the node's processes)
    tasks_d: float = 0.0  # in uninterruptible sleep (waiting for I/O) at the tick's end
    tasks_r: float = 0.0  # running or runnable
    work_cpu: Optional[float] = None  # cores the workload used
    work_wait: Optional[float] = None  # s/s its tasks were runnable but waiting for a CPU
    work_read_bps: Optional[float] = None
    work_write_bps: Optional[float] = None
    work_majflt: Optional[float] = None  # major page faults per second
    cg_quota: Optional[float] = field(default=None, metadata=MAX)  # cores
    cg_throttled: Optional[float] = None  # fraction of CFS periods throttled
    cg_throttled_s: Optional[float] = None  # s/s held back by the quota
    mem_used: Optional[float] = field(default=None, metadata=MAX)  # cgroup bytes
    mem_limit: Optional[float] = field(default=None, metadata=MAX)
    mem_events: float = field(default=0.0, metadata=SUM)  # limit hits (memory.events max, v1 failcnt)
    oom_kills: float = field(default=0.0, metadata=SUM)
    io: Mapping[str, IoLimit] = field(default_factory=dict)
    disks: Mapping[str, Disk] = field(default_factory=dict)
    net: Mapping[str, Net] = field(default_factory=dict)
    tcp_send: Optional[float] = field(default=None, metadata=MAX)  # bytes queued to send
    tcp_out: Optional[float] = None  # segments sent per second
    tcp_retrans: Optional[float] = None  # segments retransmitted per second
    rdma: Mapping[str, Rdma] = field(default_factory=dict)
    shm_used: Optional[float] = field(default=None, metadata=MAX)
    shm_size: Optional[float] = field(default=None, metadata=MAX)
    gpus: tuple[Gpu, ...] = ()


@dataclass(frozen=True)
class Proc:
    """One process's totals over the window."""

    pid: int
    comm: str
    cpu_s: float = 0.0
    wait_s: float = 0.0  # runnable, waiting for a CPU
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    d_ticks: int = 0  # ticks that found it (or one of its threads) in D state
    majflt: float = 0.0
    rss_max: float = 0.0
    gpu_mem_max: float = 0.0


@dataclass(frozen=True)
class Window:
    """A whole observation: what was watched, for how long, the ticks and the process totals."""

    scope: str  # "node", "pids" or "command"
    started: str  # ISO 8601 UTC
    duration_s: float
    interval_s: float
    ticks: tuple[Tick, ...]
    processes: tuple[Proc, ...] = ()
    pids: tuple[int, ...] = ()  # the roots watched
    cgroup: Optional[str] = None
    memory_cgroup: Optional[str] = None
    quota_file: str = ""  # "cpu.max of /slice/job", "cpu.cfs_quota_us of /x"
    io_limit_file: str = ""  # "io.max of /slice/job"
    shm_path: str = "/dev/shm"
    sources: Mapping[str, str] = field(default_factory=dict)  # source -> "ok" or why it is missing
    command: Mapping[str, Any] = field(default_factory=dict)  # argv, rc
    dropped: int = 0  # merges done to keep memory fixed

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["format_version"] = FORMAT_VERSION
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Window:
        d = dict(d)
        d.pop("format_version", None)
        d["ticks"] = tuple(_tick(t) for t in d.get("ticks", ()))
        d["processes"] = tuple(Proc(**p) for p in d.get("processes", ()))
        d["pids"] = tuple(d.get("pids", ()))
        return cls(**d)


def _tick(d: Mapping[str, Any]) -> Tick:
    d = dict(d)
    d["io"] = {k: IoLimit(**v) for k, v in d.get("io", {}).items()}
    d["disks"] = {k: Disk(**v) for k, v in d.get("disks", {}).items()}
    d["net"] = {k: Net(**v) for k, v in d.get("net", {}).items()}
    d["rdma"] = {k: Rdma(**v) for k, v in d.get("rdma", {}).items()}
    d["gpus"] = tuple(Gpu(**g) for g in d.get("gpus", ()))
    return Tick(**d)


def load(path: Path) -> Window:
    """A window saved by `harness observe --output` (series.json)."""
    return Window.from_dict(json.loads(path.read_text()))


# ---------------------------------------------------------------- merging (fixed memory)

def _merge_value(how: str, a: Any, b: Any) -> Any:
    if a is None or b is None:
        return b if a is None else a
    if dataclasses.is_dataclass(a):
        return _merge_obj(a, b)
    if isinstance(a, Mapping):
        keys = list(dict.fromkeys([*a, *b]))
        return {k: _merge_value(how, a.get(k), b.get(k)) for k in keys}
    if isinstance(a, tuple):
        if len(a) != len(b):
            return b
        return tuple(_merge_value(how, x, y) for x, y in zip(a, b, strict=True))
    if how == "max":
        return max(a, b)
    if how == "sum":
        return a + b
    if how == "or":
        return int(a) | int(b)
    return b  # "sample": the later reading stands for both


def _merge_obj(a: Any, b: Any) -> Any:
    out = {}
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        out[f.name] = x if f.name == "gpu" else _merge_value(f.metadata.get("merge", "sample"), x, y)
    return type(a)(**out)


def merge(a: Tick, b: Tick) -> Tick:
    """Two neighbouring ticks as one covering both (a before b)."""
    m = _merge_obj(a, b)
    return dataclasses.replace(m, t=b.t, dt=a.dt + b.dt)


class TickBuffer:
    """Up to `capacity` ticks; when full, neighbours are merged pairwise (the resolution halves)."""

    def __init__(self, capacity: int = 600) -> None:
        self.capacity = max(2, capacity - capacity % 2)
        self.ticks: list[Tick] = []
        self.merges = 0
        self._pending: Optional[Tick] = None  # after a halving, incoming ticks are paired first
        self._span = 1  # raw ticks per stored tick
        self._count = 0

    def add(self, tick: Tick) -> None:
        if self._span > 1:
            self._pending = tick if self._pending is None else merge(self._pending, tick)
            self._count += 1
            if self._count < self._span:
                return
            tick, self._pending, self._count = self._pending, None, 0
        self.ticks.append(tick)
        if len(self.ticks) >= self.capacity:
            self.ticks = [merge(self.ticks[i], self.ticks[i + 1]) for i in range(0, len(self.ticks), 2)]
            self.merges += 1
            self._span *= 2

    def all(self) -> tuple[Tick, ...]:
        return tuple(self.ticks) + ((self._pending,) if self._pending is not None else ())
