"""The contention gate: a busy node must not read as a bad one.

Before and during every check that loads the node (a measurement: fio, a burn, bandwidth, NCCL,
RDMA, ...) the gate records the competing load that can change its number: other processes'
runnable tasks per CPU and the CPU time stolen by a hypervisor, pressure stall (PSI) of cpu, io
and memory, other processes' I/O on the disk a storage check measures (all its I/O less the check's
own processes'; every physical disk when the target is not one disk), memory left available, and
other processes on the GPUs. Before the check it reads FIRST_LOOK_S and stops there when every
reading is calm (far below its limit), else the whole WINDOW_S (the run's first check's first window
starts as the run does, first_look(): it is read when the run's preparation ends, at least
START_LOOK_S after the start, so it costs the run no sleep; it stands only when calm and at most
WINDOW_S old, else the check's window is read afresh); it waits, bounded
(`contention.timeout`, like the settle gate), while the node is contended; still contended,
the check is ERRORED "contended: ..." and does not run. During the check it samples every
WINDOW_S (other GPU processes too); a measurement contended for at least DURING_SHARE of its
windows, or sharing a GPU with another process in any window, is ERRORED with the evidence of
every kind of load seen (during()), its metrics kept but not judged as hardware. The evidence is
in the check's details["contention"]. LIMITS is the one table of default thresholds, which a
suite's (or a check's) `contention:` settings override (limits_of; the limits in force are recorded with the
evidence); `resources` says which load matters
to which kind of measurement. $HARNESS_CONTENTION=record records the load but refuses nothing
(a shared lab machine whose competing load is accepted; the test suite), `off` reads nothing.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.numfmt import fmt_value
from harness.platform import nvml
from harness.platform.procfs import ProcFs
from harness.run.nodeload import VIRTUAL_DISKS, Snapshot, mode_of, on_disks, snapshot

if TYPE_CHECKING:
    from harness.config.loader import ResolvedCheck

WINDOW_S = 1.0
RECORD_WINDOW_S = 0.25  # record mode reads a shorter window: it refuses nothing
# Before a check, a first look this long is enough when every reading is below CALM of its limit;
# anything nearer a limit is read over the whole window (the same start), as before. 0.2 s is 20
# clock ticks a CPU for steal, and 2.5 MB of others' I/O at the calm mark; the checks' own windows
# go on reading all the while (during()).
FIRST_LOOK_S = 0.2
# The run's first look, from its start (first_look()), is as long as the run's preparation and at
# least this: 10 clock ticks a CPU for steal (on two CPUs one tick is not calm: the whole window is
# read then), and 1.25 MB of others' I/O at the calm mark.
START_LOOK_S = 0.1
CALM = 0.25
DURING_SHARE = 0.5
STORAGE_KINDS = frozenset({"fio", "data_path"})


@dataclass(frozen=True)
class Limits:
    """The one table of contention thresholds (shares 0-1 of a window unless a unit is named)."""

    runnable_per_cpu: float = 3.0  # other processes' runnable tasks per CPU: a check gets <= 1/4 CPU
    steal: float = 0.2  # CPU time the hypervisor gave to other guests
    cpu_some: float = 0.9  # PSI cpu `some` before the check (nothing of the check runs yet)
    io_some: float = 0.5  # PSI io `some` before a storage check
    mem_some: float = 0.2  # PSI memory `some`
    mem_available: float = 0.03  # MemAvailable / MemTotal below this: the page cache is gone
    foreign_io_bps: float = 50e6  # other processes' disk I/O, B/s (during: and >= 25% of the check's)
    foreign_io_share: float = 0.25


LIMITS = Limits()


def limits_of(check: ResolvedCheck) -> Limits:
    """LIMITS with the suite's and the check's `contention:` thresholds over them."""
    return dataclasses.replace(LIMITS, **check.contention.limits())


def resources(check: ResolvedCheck) -> frozenset[str]:
    """What competing load can change this check's number."""
    out = {"cpu", "steal", "memory"}
    if check.kind.name in STORAGE_KINDS:
        out.add("io")
    if "gpu" in check.kind.needs or check.kind.settle:
        out.add("gpu")
    return frozenset(out)


OBSERVERS = frozenset({"observe"})  # they report what holds a workload back, competing load included


def wants(check: ResolvedCheck) -> bool:
    """Whether the gate watches this check: the suite decides, else whether the kind loads the node
    (and is not an observer)."""
    enabled = check.contention.enabled
    if enabled is not None:
        return enabled
    return check.kind.name not in OBSERVERS and check.kind.loads(check.params)


def target_disks(check: ResolvedCheck, sys_root: Path = Path("/sys")) -> frozenset[str] | None:
    """The whole disk a storage check measures (its `target`, else the temporary directory), or
    None for every physical disk (several targets, a virtual device, an unknown path)."""
    if check.kind.name not in STORAGE_KINDS or getattr(check.params, "targets", None):
        return None
    target = getattr(check.params, "target", None) or tempfile.gettempdir()
    try:
        st = os.stat(target)
    except (OSError, TypeError, ValueError):
        return None
    dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    try:
        node = (sys_root / "dev" / "block" / f"{os.major(dev)}:{os.minor(dev)}").resolve(strict=True)
    except OSError:
        return None
    disk = node.parent if (node / "partition").exists() else node
    return None if disk.name.startswith(VIRTUAL_DISKS) else frozenset({disk.name})


def window(a: Snapshot, b: Snapshot) -> dict[str, float]:
    """The competing load between two snapshots, by name (only what both could read)."""
    dt = max(b.t - a.t, 1e-3)
    out: dict[str, float] = {"runnable_per_cpu": round(b.running / max(b.ncpu, 1), 2)}
    if b.cpu_total > a.cpu_total:
        out["steal"] = round((b.steal - a.steal) / (b.cpu_total - a.cpu_total), 3)
    for r in ("cpu", "io", "memory"):
        if r in a.psi and r in b.psi:
            out[f"psi_{r}_some"] = round(min(1.0, (b.psi[r] - a.psi[r]) / 1e6 / dt), 3)
    own = sum(v - a.own_io.get(pid, 0) for pid, v in b.own_io.items())
    out["own_io_bps"] = round(max(0, own) / dt)
    if a.disk_bytes is not None and b.disk_bytes is not None:
        out["foreign_io_bps"] = round(max(0, b.disk_bytes - a.disk_bytes - own) / dt)
    if b.mem_available is not None:
        out["mem_available"] = round(b.mem_available, 3)
    return out


def calm(load: Mapping[str, Any], wanted: frozenset[str], lim: Limits = LIMITS) -> bool:
    """Whether every reading the gate judges before a check is clearly idle: below CALM of its
    limit (memory available above 1/CALM of its floor). A node this quiet in the first look is not
    read for the rest of the window."""
    near = {f.name: getattr(lim, f.name) * CALM for f in dataclasses.fields(lim)
            if f.name != "foreign_io_share"}
    near["mem_available"] = min(1.0, lim.mem_available / CALM)
    return not judge(load, wanted, before=True, lim=dataclasses.replace(lim, **near))


def judge(load: Mapping[str, Any], wanted: frozenset[str], before: bool,
          lim: Limits = LIMITS) -> list[str]:
    """What in `load` contends with a check that depends on `wanted`, in words ([] for nothing).
    PSI cpu and io are judged before the check only: during it the check's own load raises them."""
    out = []
    if "cpu" in wanted and load.get("runnable_per_cpu", 0) >= lim.runnable_per_cpu:
        out.append(f"cpu: {load['runnable_per_cpu']:g} runnable tasks of other processes per CPU "
                   f"(limit {lim.runnable_per_cpu:g})")
    if "cpu" in wanted and before and load.get("psi_cpu_some", 0) >= lim.cpu_some:
        out.append(f"cpu: tasks waited for a CPU {load['psi_cpu_some']:.0%} of the time (PSI)")
    if "steal" in wanted and load.get("steal", 0) >= lim.steal:
        out.append(f"steal: the hypervisor took {load['steal']:.0%} of the CPU time")
    if "memory" in wanted and load.get("psi_memory_some", 0) >= lim.mem_some:
        out.append(f"memory: tasks stalled on memory {load['psi_memory_some']:.0%} of the time (PSI)")
    if "memory" in wanted and load.get("mem_available", 1.0) < lim.mem_available:
        out.append(f"memory: {load['mem_available']:.1%} of memory available")
    if "io" in wanted:
        foreign, own = load.get("foreign_io_bps", 0), load.get("own_io_bps", 0)
        if foreign >= lim.foreign_io_bps and (before or foreign >= lim.foreign_io_share * own):
            where = ", ".join(load["disks"]) if load.get("disks") else "the disks"
            out.append(f"io: other processes moved {fmt_value(foreign / 1e9, 'GB/s', 3)} on {where}"
                       + ("" if before else f" (the check: {fmt_value(own / 1e9, 'GB/s', 3)})"))
        if before and load.get("psi_io_some", 0) >= lim.io_some:
            out.append(f"io: tasks waited for I/O {load['psi_io_some']:.0%} of the time (PSI)")
    return out


def busy_processes(fs: ProcFs, top: int = 3) -> list[str]:
    """Other processes with runnable threads now, most first: 'stress-ng-cpu x12'."""
    own = set(fs.descendants([os.getpid()]))
    counts: dict[str, int] = {}
    for pid in fs.pids():
        if pid in own:
            continue
        t = fs.task(pid)
        if t is not None and t.state == "R":
            counts[t.comm] = counts.get(t.comm, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [f"{name} x{n}" if n > 1 else name for name, n in ranked]


def gpu_others(session: Callable[[], nvml.NvmlSession] = nvml.NvmlSession) -> list[str]:
    """Other processes on the GPUs, as 'GPU n: pid p (x GiB)'; [] without NVML."""
    try:
        nv = session()
    except nvml.NvmlUnavailable:
        return []
    try:
        ours = set(ProcFs().descendants([os.getpid()]))
        return [f"GPU {g.gpu}: pid {pid} ({mem / 2**30:.1f} GiB)" for g in nv.observe()
                for pid, mem in g.processes if pid not in ours]
    finally:
        nv.close()


class Gate:
    """The contention gate of one run: `before` a check (wait or refuse), `watch` it while it runs."""

    def __init__(self, fs: ProcFs | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, window_s: float | None = None,
                 gpus: Callable[[], list[str]] = gpu_others, mode: str | None = None,
                 start: Snapshot | None = None) -> None:
        self.fs, self.clock, self.sleep = fs or ProcFs(), clock, sleep
        self.mode = mode or mode_of(os.environ)
        self.gpus = gpus
        self.window_s = window_s or (RECORD_WINDOW_S if self.mode == "record" else WINDOW_S)
        self.start = start  # first_look(): the start of the run's first check's first window

    def _read(self, wanted: frozenset[str], disks: frozenset[str] | None, lim: Limits,
              first: bool = False) -> tuple[dict[str, Any], list[str], float]:
        """(load, reasons, window length) of one window. The first read of a check looks for
        FIRST_LOOK_S and stops there when every reading is clearly idle (calm); otherwise, and on
        every later read, the window is window_s long from the same start."""
        a = snapshot(self.fs, self.clock, disks)
        look = FIRST_LOOK_S if first and self.window_s > FIRST_LOOK_S else self.window_s
        self._sleep_to(a, look)
        load: dict[str, Any] = window(a, snapshot(self.fs, self.clock, disks))
        if look < self.window_s and not calm(load, wanted, lim):
            look = self.window_s
            self._sleep_to(a, look)
            load = window(a, snapshot(self.fs, self.clock, disks))
        return (*self._judged(load, wanted, disks, lim), look)

    def _from_start(self, wanted: frozenset[str], disks: frozenset[str] | None, lim: Limits,
                    start: Snapshot) -> tuple[dict[str, Any], list[str], float] | None:
        """The first window read from `start` (taken as the run started: the harness prepared the
        run in it), as long as that took and at least START_LOOK_S; None unless calm. The harness's
        own load can make it less calm (PSI counts every task's waits), never calmer (its own
        runnable tasks and I/O are left out), so a window that is not is read afresh."""
        a = on_disks(start, disks)
        self._sleep_to(a, min(START_LOOK_S, self.window_s))
        b = snapshot(self.fs, self.clock, disks)
        load = window(a, b)
        if not calm(load, wanted, lim):
            return None
        return (*self._judged(load, wanted, disks, lim), round(b.t - a.t, 3))

    def _judged(self, load: dict[str, Any], wanted: frozenset[str], disks: frozenset[str] | None,
                lim: Limits) -> tuple[dict[str, Any], list[str]]:
        """The window's load with the disks, busy processes and other GPU processes named, and what
        in it contends (judge())."""
        if disks and "io" in wanted:
            load["disks"] = sorted(disks)
        why = judge(load, wanted, before=True, lim=lim)
        if any(w.startswith("cpu: ") for w in why) and (names := busy_processes(self.fs)):
            load["processes"] = names
            why = [f"{w} ({', '.join(names)})" if w.startswith("cpu: ") and "runnable" in w else w
                   for w in why]
        if "gpu" in wanted and (others := self.gpus()):
            load["gpu_processes"] = others
            why.append("gpu: other processes on the GPUs: " + "; ".join(others[:4]))
        return load, why

    def _sleep_to(self, a: Snapshot, length: float) -> None:
        """Sleep until the window from `a` is `length` long (not at all when it is already)."""
        if (left := length - (self.clock() - a.t)) > 0:
            self.sleep(left)

    def before(self, check: ResolvedCheck, stop: Callable[[], bool],
               note: Callable[[str], None]) -> tuple[dict[str, Any], str]:
        """(details, reason): the load before `check`, waited for while contended; the reason is ""
        when the check may measure, else what still contended after `contention.timeout`.
        The run's start (Gate(start=...)) begins the first window of the run's first check when
        that check is gated and the start at most window_s old; every other window is read afresh."""
        start, self.start = self.start, None
        if self.mode == "off" or not wants(check):
            return {}, ""
        wanted, limit = resources(check), check.contention.timeout
        disks = target_disks(check) if "io" in wanted else None
        lim, noted, first = limits_of(check), False, True
        if start is not None and self.clock() - start.t > self.window_s:
            start = None  # older than one window (a settle wait, a held lock): not judged
        read = None if start is None else self._from_start(wanted, disks, lim, start)
        t0 = self.clock()  # the first look from the start is no wait for competing load
        while True:
            load, why, look = read or self._read(wanted, disks, lim, first)
            read, first = None, False
            waited = round(self.clock() - t0 - look, 1)
            rec = {"before": load, "waited_s": max(0.0, waited), "window_s": look, "timeout_s": limit,
                   "limits": dataclasses.asdict(lim)}
            if not why:
                return {"contention": rec}, ""
            rec["contended"] = why
            if self.mode == "record":
                return {"contention": {**rec, "gated": False}}, ""
            if stop() or self.clock() - t0 >= limit:
                return {"contention": rec}, "; ".join(why) + (f" (waited {limit:g} s)" if not stop() else "")
            if not noted:
                note(f"waiting up to {limit:g} s for competing load to go: {'; '.join(why)}")
                noted = True

    def watch(self, check: ResolvedCheck) -> Watch:
        """A sampler of the competing load while `check` runs (a no-op when the gate does not watch it)."""
        wanted = resources(check) if self.mode != "off" and wants(check) else frozenset()
        return Watch(self, wanted, target_disks(check) if "io" in wanted else None, limits_of(check))


class Watch:
    """Samples the competing load every window until stopped; `contended` says what it found."""

    def __init__(self, gate: Gate, wanted: frozenset[str], disks: frozenset[str] | None = None,
                 lim: Limits = LIMITS) -> None:
        self.gate, self.wanted, self.disks, self.lim = gate, wanted, disks, lim
        self.windows: list[dict[str, Any]] = []
        self.found: list[list[str]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if wanted:
            self._thread = threading.Thread(target=self._loop, name="contention", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        a = snapshot(self.gate.fs, self.gate.clock, self.disks)
        while not self._stop.wait(self.gate.window_s):
            b = snapshot(self.gate.fs, self.gate.clock, self.disks)
            load: dict[str, Any] = window(a, b)
            if self.disks:
                load["disks"] = sorted(self.disks)
            why = judge(load, self.wanted, before=False, lim=self.lim)
            if "gpu" in self.wanted and (others := self._gpu_others()):
                load["gpu_processes"] = others
                why.append("gpu: other processes on the GPUs: " + "; ".join(others[:4]))
            self.windows.append(load)
            self.found.append(why)
            a = b

    def _gpu_others(self) -> list[str]:
        try:
            return self.gate.gpus()
        except Exception:  # an NVML that fails now: the check's own telemetry reports the GPU
            return []

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5 * self.gate.window_s)

    @property
    def refuses(self) -> str:
        """What made the measurement contended when the gate refuses it ("" in record mode)."""
        return self.contended if self.gate.mode == "gate" else ""

    @property
    def contended(self) -> str:
        """What contended the measurement ("" for nothing): see during()."""
        return during(self.windows, self.found)

    def details(self) -> dict[str, Any]:
        if not self.wanted:
            return {}
        worst = {k: max(w.get(k, 0) for w in self.windows) for k in
                 ("runnable_per_cpu", "steal", "psi_memory_some", "foreign_io_bps")} if self.windows else {}
        out = {"windows": len(self.windows), "contended_windows": sum(1 for f in self.found if f),
               "worst": worst, "contended": self.contended, "kinds": kinds_seen(self.found)}
        gpu = [w["gpu_processes"] for w in self.windows if w.get("gpu_processes")]
        if gpu:
            out["gpu_processes"] = sorted({p for ps in gpu for p in ps})
        return out


KINDS = ("cpu", "steal", "memory", "io")  # judge()'s reason prefixes, in its order; gpu apart
EVIDENCE_CHARS = 240  # one kind's evidence in a message, at most
# per kind, how bad a window was: the evidence shown is that of its worst window
SEVERITY: Mapping[str, Callable[[Mapping[str, Any]], float]] = {
    "cpu": lambda w: max(w.get("runnable_per_cpu", 0) / max(LIMITS.runnable_per_cpu, 1e-9),
                         w.get("psi_cpu_some", 0)),
    "steal": lambda w: w.get("steal", 0),
    "memory": lambda w: max(w.get("psi_memory_some", 0), 1 - w.get("mem_available", 1.0)),
    "io": lambda w: w.get("foreign_io_bps", 0),
}


def _kind(reason: str) -> str:
    return reason.split(":", 1)[0]


def kinds_seen(found: Sequence[Sequence[str]]) -> dict[str, int]:
    """Kind of contention (cpu, steal, memory, io, gpu) -> in how many windows it was seen."""
    out: dict[str, int] = {}
    for why in found:
        for kind in dict.fromkeys(_kind(w) for w in why):
            out[kind] = out.get(kind, 0) + 1
    return out


def _clip(text: str, limit: int = EVIDENCE_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def during(windows: Sequence[Mapping[str, Any]], found: Sequence[Sequence[str]]) -> str:
    """What contended a measurement, from its windows' loads and judge() reasons ("" for nothing).

    Contended: another process on the GPUs in any window, or any competing load in at least
    DURING_SHARE of the windows. The message names every kind seen in any window (gpu first, then
    cpu, steal, memory, io), each with the windows it was seen in and the evidence of its worst
    window; each kind's evidence is cut at EVIDENCE_CHARS, so the message stays bounded."""
    n = len(windows)
    gpu = [i for i, w in enumerate(windows) if w.get("gpu_processes")]
    hit = [f for f in found if f]
    if not n or (not gpu and len(hit) < DURING_SHARE * n):
        return ""
    parts = []
    if gpu:  # another process on the GPUs shares them with the measurement, however briefly
        seen = "; ".join(windows[gpu[0]]["gpu_processes"][:4])
        parts.append(_clip(f"gpu: other processes on the GPUs in {len(gpu)} of {n} windows, "
                           f"first in window {gpu[0] + 1}: {seen}"))
    counts = kinds_seen(found)
    for kind in [*KINDS, *sorted(set(counts) - {*KINDS, "gpu"})]:
        if not counts.get(kind):
            continue
        rank = SEVERITY.get(kind, lambda _w: 0.0)
        idx = [i for i, why in enumerate(found) if any(_kind(w) == kind for w in why)]
        worst = max(idx, key=lambda i: rank(windows[i]) if i < n else 0.0)
        evidence = "; ".join(w for w in found[worst] if _kind(w) == kind)
        parts.append(f"{_clip(evidence)} (in {counts[kind]} of {n} s)")
    return "; ".join(parts) if gpu else f"{len(hit)} of {n} s: " + "; ".join(parts)
