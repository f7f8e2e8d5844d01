#!/usr/bin/env python3
"""What watching costs: the stall doctor's CPU share and memory at its default 1 s interval.

Runs the observer (the same loop as `harness observe`) over the node, or over --pid PID, for
--seconds (default 30), then a bare loop that only opens and reads the same /proc files at the
same interval. Prints the observer's CPU time as a share of one core (goal < 1%), the bare
loop's, their ratio, the observer's resident memory and the Python memory its window holds, and
the memory of 10-minute and 6-hour windows (the same: the buffer halves its resolution).

    python benchmarks/bench_observe.py [--seconds 30] [--interval 1] [--pid PID]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.checks.observer import Observer, watch  # noqa: E402
from harness.platform.procfs import ProcFs  # noqa: E402
from harness.series.observed import TickBuffer  # noqa: E402


def observer_run(seconds: float, interval: float, pids: tuple[int, ...]) -> tuple[float, float, Observer]:
    obs = Observer(pids)
    w0, c0 = time.monotonic(), time.process_time()
    watch(obs, duration=seconds, interval=interval, finished=lambda t: time.sleep(t) or False)
    return time.process_time() - c0, time.monotonic() - w0, obs


def bare_files(pids: tuple[int, ...]) -> list[str]:
    """The files one observer tick reads, named once (processes as they are now)."""
    fixed = ["/proc/stat", "/proc/pressure/cpu", "/proc/pressure/memory", "/proc/pressure/io",
             "/proc/diskstats", "/proc/net/dev", "/proc/net/snmp", "/proc/net/sockstat"]
    fs = ProcFs()
    procs = fs.descendants(pids) if pids else list(fs.pids())
    per = ("stat", "io", "schedstat") if pids else ("stat",)
    return [f for f in fixed if os.path.exists(f)] + [f"/proc/{p}/{n}" for p in procs for n in per]


def bare_run(seconds: float, interval: float, files: list[str], tcp_reads: int) -> float:
    """Read `files` every interval, and the TCP socket tables as many times as the observer did."""
    c0 = time.process_time()
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
        tcp = ["/proc/net/tcp", "/proc/net/tcp6"] if n <= tcp_reads else []
        for f in files + tcp:
            try:
                with open(f, "rb") as fh:
                    fh.read()
            except OSError:
                pass
        time.sleep(interval)
    return time.process_time() - c0


def long_window(obs: Observer, seconds: int) -> tuple[int, int]:
    """(ticks kept, bytes traced) after `seconds` one-second ticks through a fresh buffer."""
    tick = obs.buffer.ticks[-1]
    tracemalloc.start()
    buf = TickBuffer()
    for _ in range(seconds):
        buf.add(tick)
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return len(buf.all()), size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--pid", type=int, action="append", default=[])
    a = ap.parse_args()
    pids = tuple(a.pid)
    n = len(list(ProcFs().pids()))
    what = f"pid {', '.join(map(str, pids))}" if pids else f"the node ({n} processes)"
    print(f"watching {what} for {a.seconds:g} s every {a.interval:g} s")
    cpu, wall, obs = observer_run(a.seconds, a.interval, pids)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    bare = bare_run(a.seconds, a.interval, bare_files(pids), obs.tcp_reads)
    share, bare_share = cpu / wall, bare / a.seconds
    print(f"observer:  {cpu * 1000:,.0f} ms CPU in {wall:.1f} s = {100 * share:.2f}% of one core "
          f"(goal < 1%): {'ok' if share < 0.01 else 'OVER'}; read /proc/net/tcp {obs.tcp_reads} times")
    print(f"bare loop: {bare * 1000:,.0f} ms CPU reading the same files = "
          f"{100 * bare_share:.2f}% of one core")
    print(f"ratio observer / bare: {share / bare_share:.1f}x" if bare_share > 0
          else "ratio: the bare loop used no measurable CPU")
    print(f"memory: {rss / 2**20:,.1f} MiB resident (Python, harness and all); window of "
          f"{len(obs.buffer.all())} ticks, {len(obs.totals.procs)} process totals")
    for label, n in (("10 minutes", 600), ("6 hours", 6 * 3600)):
        kept, size = long_window(obs, n)
        print(f"window of {label} at 1 s: {kept} ticks kept, {size / 2**10:,.0f} KiB")


if __name__ == "__main__":
    main()
