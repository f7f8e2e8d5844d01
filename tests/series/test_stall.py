"""The attribution on series recorded from real reproductions (tests/data/observe/*.json): each
gets its primary and evidence naming the device or process; thresholds override by name; the
fixed-memory merge keeps the verdict; a window round-trips through JSON."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from harness.series.observed import Disk, Gpu, Tick, TickBuffer, Window, load, merge
from harness.series.stall import THRESHOLDS, Thresholds, diagnose

DATA = Path(__file__).resolve().parents[1] / "data" / "observe"


def recorded(name: str) -> Window:
    return load(DATA / f"{name}.json")


@pytest.mark.parametrize("name, primary, words", [
    ("cpu", "cpu", ["of 2 CPUs", "stress-ng-cpu (pid "]),
    ("quota", "cpu", ["throttled by its cgroup quota of 0.2 CPUs (cpu.cfs_quota_us of /harness-observe-"]),
    ("storage", "storage", ["held at its cgroup I/O limit (blkio.throttle.read_bps_device of "
                            "/harness-observe-", "of 2.1 MB/s allowed", "fio (pid "]),
    ("memory", "memory", ["at its cgroup memory limit /harness-observe-", "of 100 MiB", "OOM kills"]),
    ("shm", "shm", ["full (16 MiB of 16 MiB)"]),
    ("network", "network", ["queued to send", "iperf3 (pid "]),
    ("idle", "none", ["none: nothing held the workload back"]),
    ("node", "cpu", ["all 2 CPUs"]),
])
def test_recorded_series_get_their_primary(name: str, primary: str, words: list[str]) -> None:
    d = diagnose(recorded(name))
    assert d.primary == primary, d.verdict
    for w in words:
        assert w in d.verdict
    assert d.gpu_busy is None  # no GPU on the machine that recorded them


def test_the_primary_finding_comes_first_and_shares_are_fractions() -> None:
    d = diagnose(recorded("storage"))
    assert d.findings[0].resource == "storage" and d.findings[0].devices[0].startswith("loop")
    assert all(0 < f.share <= 1 for f in d.findings)
    doc = d.to_dict()
    assert set(doc) == {"primary", "verdict", "findings", "gpu_busy"}
    assert set(doc["findings"][0]) == {"resource", "share", "evidence", "devices", "processes"}


def test_thresholds_override_by_name() -> None:
    w = recorded("quota")
    assert diagnose(w, THRESHOLDS.with_overrides({"min_share": 1.01})).primary == "none"
    # a quota that throttles in fewer than all periods is not named as the quota any more
    d = diagnose(w, THRESHOLDS.with_overrides({"cpu_throttled": 1.01}))
    assert "quota" not in d.verdict
    with pytest.raises(ValueError, match=r"unknown observe threshold.*nosuch"):
        THRESHOLDS.with_overrides({"nosuch": 1})
    assert {f.name for f in dataclasses.fields(Thresholds)} >= {"min_share", "disk_util", "gpu_clock"}


def test_a_window_round_trips_through_json() -> None:
    w = recorded("network")
    assert Window.from_dict(w.to_dict()) == w
    assert diagnose(Window.from_dict(w.to_dict())) == diagnose(w)


def test_an_empty_window_is_none_and_says_why() -> None:
    d = diagnose(Window("node", "", 0.0, 1.0, ()))
    assert d.primary == "none" and "no samples" in d.verdict


def tick(i: int, util: float, busy: bool) -> Tick:
    return Tick(t=float(i + 1), dt=1.0, ncpu=8, cpu_busy=0.2, tasks=4, tasks_d=1.0 if busy else 0.0,
                work_cpu=0.1, work_wait=0.0, work_read_bps=5e8 if busy else 0.0, mem_events=1.0,
                disks={"nvme0n1": Disk(util=0.99 if busy else 0.1, read_bps=1.3e9 if busy else 1e6,
                                       write_bps=0.0, queue=30.0 if busy else 0.1)},
                gpus=(Gpu(0, util=util, sm_clock=1980, sm_clock_max=1980, temp=60.0),))


def test_the_buffer_keeps_memory_fixed_and_the_verdict_whatever_the_length() -> None:
    buf = TickBuffer(capacity=64)
    n = 10_000
    for i in range(n):
        busy = i % 5 < 3  # 60% of the time the dataloader waits on nvme0n1
        buf.add(tick(i, 0.41 if busy else 0.5, busy))
    ticks = buf.all()
    assert len(ticks) <= 64 + 1 and buf.merges >= 7
    assert sum(t.dt for t in ticks) == pytest.approx(n)  # time is conserved
    assert sum(t.mem_events for t in ticks) == pytest.approx(n)  # event counts are summed
    d = diagnose(Window("pids", "", float(n), 1.0, ticks, pids=(1,)))
    assert d.primary == "storage" and "nvme0n1" in d.verdict
    # 60% of the ticks waited and the GPUs averaged 44.6%: the sampled, merged window says the same
    assert re.match(r"input-bound: GPUs busy 4[45]% of the time .* for 6[01]% of the window",
                    d.verdict), d.verdict


def test_merge_samples_rates_sums_events_and_keeps_gauge_peaks() -> None:
    a = Tick(t=1.0, dt=1.0, cpu_busy=1.0, mem_used=10.0, oom_kills=1.0,
             gpus=(Gpu(0, util=1.0, reasons=0x8),))
    b = Tick(t=4.0, dt=3.0, cpu_busy=0.0, mem_used=5.0, oom_kills=2.0,
             gpus=(Gpu(0, util=0.0, reasons=0x40),))
    m = merge(a, b)
    assert (m.t, m.dt, m.cpu_busy, m.mem_used, m.oom_kills) == (4.0, 4.0, 0.0, 10.0, 3.0)
    assert m.gpus[0].util == 0.0 and m.gpus[0].reasons == 0x48 and m.gpus[0].gpu == 0
