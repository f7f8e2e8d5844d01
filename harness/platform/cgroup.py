"""The cgroup edge for `harness observe`: a workload's CPU quota and throttling, memory limit and
events, I/O limits and bytes, on cgroup v2 (production nodes) and v1 controllers (this machine).

`locate(pid, root)` finds the process's cgroup directories from /proc/PID/cgroup; `read()` reads
one snapshot of its counters. Each file format has a pure `parse_*`. A file that is absent
(controller not enabled, no limit set) leaves its field None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from harness.platform.procfs import Pressure, parse_pressure

UNLIMITED = 1 << 62  # v1 writes "no limit" as a page-rounded 2^63-1


@dataclass(frozen=True)
class Cgroup:
    """A process's cgroup: the directory serving each controller and whether it is v2."""

    path: str  # the cgroup's path as /proc/PID/cgroup names it (the cpu controller's on v1)
    paths: Mapping[str, str] = field(default_factory=dict)  # "cpu", "memory", "io" -> that controller's path
    cpu: Optional[Path] = None
    memory: Optional[Path] = None
    io: Optional[Path] = None
    cpu_v2: bool = False
    memory_v2: bool = False
    io_v2: bool = False


@dataclass(frozen=True)
class CgroupReading:
    """One snapshot of a cgroup's counters; None where the controller or file is absent."""

    cpu_periods: Optional[int] = None
    cpu_throttled_periods: Optional[int] = None
    cpu_throttled_us: Optional[int] = None
    cpu_quota_cores: Optional[float] = None  # None: no quota
    quota_file: str = ""
    mem_current: Optional[int] = None
    mem_limit: Optional[int] = None  # None: no limit
    mem_events: Mapping[str, int] = field(default_factory=dict)  # max (limit hit), oom, oom_kill, high
    io_bytes: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # "maj:min" -> (read, write)
    io_limits: Mapping[str, tuple[Optional[int], Optional[int]]] = field(default_factory=dict)  # B/s
    io_limit_file: str = ""
    pressure: Mapping[str, Pressure] = field(default_factory=dict)  # v2: cpu, memory, io


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """/proc/PID/cgroup -> {controller: path}; the v2 hierarchy is under the key ""."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def parse_keyed(text: str) -> dict[str, int]:
    """`key value` lines (cpu.stat, memory.events, memory.stat) -> {key: value}."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 2 and f[1].lstrip("-").isdigit():
            out[f[0]] = int(f[1])
    return out


def parse_cpu_max(text: str) -> Optional[float]:
    """cgroup v2 cpu.max `quota period` ("max 100000": none) -> the quota in cores."""
    f = text.split()
    if not f or f[0] == "max":
        return None
    period = int(f[1]) if len(f) > 1 else 100_000
    return int(f[0]) / period if period > 0 else None


def parse_cfs_quota(quota_text: str, period_text: str) -> Optional[float]:
    """cgroup v1 cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us -> the quota in cores."""
    quota, period = int(quota_text.strip()), int(period_text.strip())
    return None if quota < 0 or period <= 0 else quota / period


def parse_limit(text: str) -> Optional[int]:
    """memory.max ("max") or memory.limit_in_bytes (2^63 rounded) -> bytes, None when unlimited."""
    t = text.strip()
    if t == "max":
        return None
    v = int(t)
    return None if v >= UNLIMITED else v


def parse_io_max(text: str) -> dict[str, tuple[Optional[int], Optional[int]]]:
    """v2 io.max `8:16 rbps=2097152 wbps=max riops=max wiops=max` -> {dev: (read B/s, write B/s)}."""
    out: dict[str, tuple[Optional[int], Optional[int]]] = {}
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        kv = dict(p.split("=", 1) for p in f[1:] if "=" in p)
        r, w = kv.get("rbps", "max"), kv.get("wbps", "max")
        out[f[0]] = (None if r == "max" else int(r), None if w == "max" else int(w))
    return out


def parse_io_stat(text: str) -> dict[str, tuple[int, int]]:
    """v2 io.stat `8:16 rbytes=1459200 wbytes=314773504 rios=192 ...` -> {dev: (read B, written B)}."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        kv = dict(p.split("=", 1) for p in f[1:] if "=" in p)
        out[f[0]] = (int(kv.get("rbytes", 0)), int(kv.get("wbytes", 0)))
    return out


def parse_blkio_bps(text: str) -> dict[str, int]:
    """v1 blkio.throttle.{read,write}_bps_device `7:0 1048576` lines -> {dev: B/s}."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 2 and f[1].isdigit():
            out[f[0]] = int(f[1])
    return out


def parse_blkio_bytes(text: str) -> dict[str, tuple[int, int]]:
    """v1 blkio.throttle.io_service_bytes `7:0 Read 123` lines -> {dev: (read B, written B)}."""
    out: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) != 3 or f[1] not in ("Read", "Write"):
            continue
        r, w = out.get(f[0], (0, 0))
        out[f[0]] = (int(f[2]), w) if f[1] == "Read" else (r, int(f[2]))
    return out


def _text(path: Optional[Path], name: str) -> Optional[str]:
    if path is None:
        return None
    try:
        return (path / name).read_text(errors="replace")
    except OSError:
        return None


def locate(pid: int, root: Path = Path("/")) -> Optional[Cgroup]:
    """The cgroup of `pid` (None when /proc/PID/cgroup is unreadable or the process is gone)."""
    try:
        paths = parse_proc_cgroup((root / "proc" / str(pid) / "cgroup").read_text())
    except OSError:
        return None
    base = root / "sys" / "fs" / "cgroup"

    def v1(controller: str, probe: str) -> Optional[Path]:
        if controller not in paths:
            return None
        for mount in (controller, "cpu,cpuacct" if controller == "cpu" else controller):
            d = base / mount / paths[controller].lstrip("/")
            if (d / probe).exists():
                return d
        return None

    v2dir: Optional[Path] = None
    if "" in paths:
        for top in (base, base / "unified"):
            d = top / paths[""].lstrip("/")
            if (top / "cgroup.controllers").exists() and d.is_dir():
                v2dir = d
                break

    def pick(controller: str, probe1: str, probe2: str) -> tuple[Optional[Path], bool]:
        d = v1(controller, probe1)
        if d is not None:
            return d, False
        if v2dir is not None and (v2dir / probe2).exists():
            return v2dir, True
        return None, False

    cpu, cpu_v2 = pick("cpu", "cpu.stat", "cpu.max")
    mem, mem_v2 = pick("memory", "memory.limit_in_bytes", "memory.max")
    io, io_v2 = pick("blkio", "blkio.throttle.io_service_bytes", "io.stat")
    v2path = paths.get("", "/")
    named = {c: (v2path if v2 else paths.get(v1name, "/")) for c, d, v2, v1name in
             (("cpu", cpu, cpu_v2, "cpu"), ("memory", mem, mem_v2, "memory"), ("io", io, io_v2, "blkio"))
             if d is not None}
    return Cgroup(paths.get("cpu", v2path), named, cpu, mem, io, cpu_v2, mem_v2, io_v2)


def read(cg: Cgroup) -> CgroupReading:
    """One snapshot of the cgroup's counters (fields of absent files stay None)."""
    kw: dict[str, object] = {}
    stat = _text(cg.cpu, "cpu.stat")
    if stat is not None:
        s = parse_keyed(stat)
        kw["cpu_periods"] = s.get("nr_periods")
        kw["cpu_throttled_periods"] = s.get("nr_throttled")
        if "throttled_usec" in s:
            kw["cpu_throttled_us"] = s["throttled_usec"]
        elif "throttled_time" in s:  # v1: ns
            kw["cpu_throttled_us"] = s["throttled_time"] // 1000
    if cg.cpu_v2:
        text = _text(cg.cpu, "cpu.max")
        if text is not None:
            kw["cpu_quota_cores"], kw["quota_file"] = parse_cpu_max(text), "cpu.max"
    else:
        quota, period = _text(cg.cpu, "cpu.cfs_quota_us"), _text(cg.cpu, "cpu.cfs_period_us")
        if quota is not None and period is not None:
            kw["cpu_quota_cores"], kw["quota_file"] = parse_cfs_quota(quota, period), "cpu.cfs_quota_us"
    if cg.memory is not None:
        cur, lim = (("memory.current", "memory.max") if cg.memory_v2
                    else ("memory.usage_in_bytes", "memory.limit_in_bytes"))
        t = _text(cg.memory, cur)
        kw["mem_current"] = int(t) if t is not None and t.strip().isdigit() else None
        t = _text(cg.memory, lim)
        kw["mem_limit"] = parse_limit(t) if t is not None else None
        if cg.memory_v2:
            t = _text(cg.memory, "memory.events")
            kw["mem_events"] = parse_keyed(t) if t is not None else {}
        else:
            events = {}
            t = _text(cg.memory, "memory.failcnt")
            if t is not None and t.strip().isdigit():
                events["max"] = int(t)
            t = _text(cg.memory, "memory.oom_control")
            if t is not None and "oom_kill" in (oc := parse_keyed(t)):
                events["oom_kill"] = oc["oom_kill"]
            kw["mem_events"] = events
    if cg.io is not None:
        if cg.io_v2:
            t = _text(cg.io, "io.stat")
            kw["io_bytes"] = parse_io_stat(t) if t is not None else {}
            t = _text(cg.io, "io.max")
            kw["io_limits"], kw["io_limit_file"] = (parse_io_max(t) if t is not None else {}), "io.max"
        else:
            t = _text(cg.io, "blkio.throttle.io_service_bytes_recursive") or \
                _text(cg.io, "blkio.throttle.io_service_bytes")
            kw["io_bytes"] = parse_blkio_bytes(t) if t is not None else {}
            r = parse_blkio_bps(_text(cg.io, "blkio.throttle.read_bps_device") or "")
            w = parse_blkio_bps(_text(cg.io, "blkio.throttle.write_bps_device") or "")
            kw["io_limits"] = {d: (r.get(d), w.get(d)) for d in sorted(set(r) | set(w))}
            kw["io_limit_file"] = " and ".join(f"blkio.throttle.{n}_bps_device" for n, m in
                                               (("read", r), ("write", w)) if m) or "blkio.throttle"
    pressure = {}
    for res, d in (("cpu", cg.cpu if cg.cpu_v2 else None), ("memory", cg.memory if cg.memory_v2 else None),
                   ("io", cg.io if cg.io_v2 else None)):
        t = _text(d, f"{res}.pressure")
        if t is not None:
            try:
                pressure[res] = parse_pressure(t)
            except ValueError:
                pass
    kw["pressure"] = pressure
    return CgroupReading(**kw)  # type: ignore[arg-type]
