"""The /proc edge for `harness observe`: CPU times, pressure stall (PSI), tasks, network counters.

Each file format has a pure `parse_*(text)`; `ProcFs(root)` reads them under `root` (default "/",
tests point it at a tree in tmp_path). Reads of a file that is absent (an old kernel, a process
that just exited) give None: a source that is not there is left out, never an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from harness.platform import diskstats
from harness.platform.diskstats import DiskStat

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuTimes:
    """The aggregate `cpu` line of /proc/stat, in clock ticks, and the number of CPUs listed."""

    busy: int  # user + nice + system + irq + softirq + steal
    iowait: int
    total: int
    ncpu: int
    steal: int = 0  # time the hypervisor ran something else (inside busy)
    running: int = 0  # procs_running: runnable tasks (threads) on the node now


@dataclass(frozen=True)
class Pressure:
    """A /proc/pressure/* (or cgroup v2 *.pressure) file: total stall time in us since boot."""

    some_us: int
    full_us: int | None  # the cpu file of old kernels has no `full` line


@dataclass(frozen=True)
class TaskStat:
    """The fields of /proc/PID/stat the observer uses."""

    pid: int
    comm: str
    state: str  # R running, S sleeping, D uninterruptible (I/O), Z zombie, ...
    ppid: int
    cpu_ticks: int  # utime + stime
    majflt: int
    starttime: int  # clock ticks after boot: tells a reused pid apart
    rss_pages: int


@dataclass(frozen=True)
class NetDev:
    """One interface's counters from /proc/net/dev."""

    rx_bytes: int
    tx_bytes: int
    rx_drop: int
    tx_drop: int


@dataclass(frozen=True)
class TcpQueues:
    """Bytes waiting in TCP send and receive queues over every socket of /proc/net/tcp{,6}."""

    send: int
    recv: int
    sockets: int


def parse_stat(text: str) -> CpuTimes:
    """/proc/stat -> the aggregate CPU times; ValueError when there is no `cpu` line."""
    agg: list[int] | None = None
    ncpu = running = 0
    for line in text.splitlines():
        if line.startswith("procs_running "):
            running = int(line.split()[1])
        elif line.startswith("cpu "):
            agg = [int(x) for x in line.split()[1:]]
        elif line.startswith("cpu") and line[3:4].isdigit():
            ncpu += 1
    if agg is None or len(agg) < 4:
        raise ValueError("no aggregate cpu line in /proc/stat")
    f = agg + [0] * (8 - len(agg))
    user, nice, system, idle, iowait, irq, softirq, steal = f[:8]  # guest time is inside user
    busy = user + nice + system + irq + softirq + steal
    return CpuTimes(busy=busy, iowait=iowait, total=busy + idle + iowait, ncpu=max(ncpu, 1), steal=steal,
                    running=running)


def parse_pressure(text: str) -> Pressure:
    """`some avg10=.. avg60=.. avg300=.. total=N` (and `full ...`) -> the totals in us."""
    totals: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        for p in parts[1:]:
            if p.startswith("total="):
                totals[parts[0]] = int(p[6:])
    if "some" not in totals:
        raise ValueError("no `some` line in a pressure file")
    return Pressure(some_us=totals["some"], full_us=totals.get("full"))


def parse_task_stat(text: str) -> TaskStat:
    """/proc/PID/stat; the command name may hold spaces and parentheses, so split at the last ')'."""
    head, _, tail = text.rpartition(")")
    pid_s, _, comm = head.partition(" (")
    f = tail.split()
    if len(f) < 22:
        raise ValueError("short /proc/PID/stat")
    # f[0] is field 3 (state): field n is f[n - 3]
    return TaskStat(pid=int(pid_s), comm=comm, state=f[0], ppid=int(f[1]), cpu_ticks=int(f[11]) + int(f[12]),
                    majflt=int(f[9]), starttime=int(f[19]), rss_pages=int(f[21]))


def parse_schedstat(text: str) -> tuple[int, int]:
    """/proc/PID/schedstat -> (ns on a CPU, ns runnable but waiting for a CPU)."""
    f = text.split()
    return int(f[0]), int(f[1])


def parse_pid_io(text: str) -> tuple[int, int]:
    """/proc/PID/io -> (read_bytes, write_bytes): bytes this process made storage read or write."""
    vals = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return int(vals["read_bytes"]), int(vals["write_bytes"])


def parse_net_dev(text: str) -> dict[str, NetDev]:
    """/proc/net/dev -> counters per interface."""
    out = {}
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        f = rest.split()
        if not sep or len(f) < 12:
            continue
        out[name.strip()] = NetDev(int(f[0]), int(f[8]), int(f[3]), int(f[11]))
    return out


def parse_snmp(text: str) -> dict[str, int]:
    """The Tcp: header/value pair of /proc/net/snmp -> {"OutSegs": n, "RetransSegs": n, ...}."""
    lines = [ln.split() for ln in text.splitlines() if ln.startswith("Tcp:")]
    if len(lines) < 2:
        return {}
    names, values = lines[0][1:], lines[1][1:]
    return {k: int(v) for k, v in zip(names, values, strict=False) if v.lstrip("-").isdigit()}


def parse_sockstat(text: str) -> dict[str, dict[str, int]]:
    """/proc/net/sockstat `TCP: inuse 5 orphan 0 tw 0 alloc 7 mem 245` -> {"TCP": {"inuse": 5, ...}};
    TCP `mem` is pages held in every TCP socket's buffers (cheap to read, unlike /proc/net/tcp)."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        f = rest.split()
        out[name.strip()] = {k: int(v) for k, v in zip(f[::2], f[1::2], strict=False) if v.isdigit()}
    return out


def parse_tcp_queues(text: str) -> TcpQueues:
    """/proc/net/tcp or tcp6 -> summed tx_queue and rx_queue of every socket (hex `tx:rx` column)."""
    send = recv = n = 0
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 5 or ":" not in f[4]:
            continue
        tx, _, rx = f[4].partition(":")
        send, recv, n = send + int(tx, 16), recv + int(rx, 16), n + 1
    return TcpQueues(send, recv, n)


class ProcFs:
    """Reads /proc under `root`. Every method returns None when its file is absent or unreadable."""

    def __init__(self, root: Path = Path("/")) -> None:
        self.proc = root / "proc"

    def text(self, *parts: str) -> Optional[str]:
        """The text of the file /proc/PARTS (None when absent or unreadable)."""
        try:
            with open(self.proc.joinpath(*parts), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return None

    def disks(self) -> Optional[dict[str, DiskStat]]:
        """Whole devices' I/O counters (diskstats.read); None without /proc/diskstats."""
        return diskstats.read(self.proc.parent)

    def stat(self) -> Optional[CpuTimes]:
        text = self.text("stat")
        return None if text is None else parse_stat(text)

    def pressure(self, resource: str) -> Optional[Pressure]:
        """PSI of "cpu", "memory" or "io"; None where the kernel has no PSI."""
        text = self.text("pressure", resource)
        try:
            return None if text is None else parse_pressure(text)
        except ValueError:
            return None

    def pids(self) -> Iterator[int]:
        try:
            names = os.listdir(self.proc)
        except OSError:
            return
        yield from (int(n) for n in names if n.isdigit())

    def task(self, pid: int, tid: int | None = None) -> Optional[TaskStat]:
        text = self.text(str(pid), "stat") if tid is None else self.text(str(pid), "task", str(tid), "stat")
        try:
            return None if text is None else parse_task_stat(text)
        except (ValueError, IndexError):
            return None

    def threads(self, pid: int) -> list[int]:
        try:
            return [int(t) for t in os.listdir(self.proc / str(pid) / "task") if t.isdigit()]
        except OSError:
            return []

    def schedstat(self, pid: int) -> Optional[tuple[int, int]]:
        text = self.text(str(pid), "schedstat")
        try:
            return None if text is None else parse_schedstat(text)
        except (ValueError, IndexError):
            return None

    def io(self, pid: int) -> Optional[tuple[int, int]]:
        """(read_bytes, write_bytes); None when absent or not ours to read (another user's process)."""
        text = self.text(str(pid), "io")
        try:
            return None if text is None else parse_pid_io(text)
        except (ValueError, KeyError):
            return None

    def children(self, pid: int) -> list[int]:
        """The direct children of every thread of `pid` (/proc/PID/task/*/children)."""
        out: list[int] = []
        for tid in self.threads(pid):
            text = self.text(str(pid), "task", str(tid), "children")
            if text:
                out += [int(c) for c in text.split()]
        return out

    def descendants(self, roots: Iterable[int], limit: int = 4096) -> list[int]:
        """The roots that still exist and every process below them, at most `limit`."""
        seen: dict[int, None] = {}
        todo = [p for p in roots if (self.proc / str(p)).exists()]
        while todo and len(seen) < limit:
            p = todo.pop()
            if p not in seen:
                seen[p] = None
                todo += self.children(p)
        return list(seen)

    def _net(self, pid: int | None, name: str) -> Optional[str]:
        # /proc/PID/net is the network namespace of PID: a container's own eth0 and TCP counters
        return self.text("net", name) if pid is None else self.text(str(pid), "net", name)

    def net_dev(self, pid: int | None = None) -> Optional[Mapping[str, NetDev]]:
        text = self._net(pid, "dev")
        return None if text is None else parse_net_dev(text)

    def snmp(self, pid: int | None = None) -> Optional[Mapping[str, int]]:
        text = self._net(pid, "snmp")
        return None if text is None else parse_snmp(text)

    def tcp_buffer_pages(self, pid: int | None = None) -> Optional[int]:
        """Pages held in TCP socket buffers in the namespace (sockstat `TCP: ... mem N`)."""
        text = self._net(pid, "sockstat")
        return None if text is None else parse_sockstat(text).get("TCP", {}).get("mem")

    def tcp_queues(self, pid: int | None = None) -> Optional[TcpQueues]:
        found = [parse_tcp_queues(t) for n in ("tcp", "tcp6") if (t := self._net(pid, n)) is not None]
        if not found:
            return None
        return TcpQueues(sum(q.send for q in found), sum(q.recv for q in found),
                         sum(q.sockets for q in found))

    def netns(self, pid: int) -> Optional[str]:
        """The network namespace of `pid` ("net:[4026531840]"), to tell a container's from the host's."""
        try:
            return os.readlink(self.proc / str(pid) / "ns" / "net")
        except OSError:
            return None
