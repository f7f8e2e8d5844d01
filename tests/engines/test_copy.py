"""The builtin copy test for real on host memory (NumPy backend): timing arithmetic, the plan of
copies, the JSON-lines protocol through a real subprocess, and its parser on good and broken runs."""

from __future__ import annotations

import json
import os
import statistics
import subprocess

import pytest
from enginehelp import Clock, run_engine

from harness.engines.copy import (
    TESTS,
    _Backend,
    cpulist,
    gbps,
    local_cpus,
    measure,
    parse_cpulist,
    plan,
    time_copies,
)
from harness.parsers import copylog
from harness.parsers.registry import parsers


def engine(*args: str) -> subprocess.CompletedProcess[str]:
    return run_engine("harness.engines.copy", *args)


def test_gbps_arithmetic():
    # 512 MiB copied 16 times in 0.156 s: 55.05 GB/s, what an H100 does over PCIe Gen5
    assert gbps(512 * 2**20, 16, 0.156) == pytest.approx(512 * 2**20 * 16 / 0.156 / 1e9)
    assert gbps(2**20, 4, 0.0) == 0.0


def test_time_copies_warms_up_then_times_the_iterations_between_two_syncs():
    calls: list[str] = []
    seconds = time_copies(lambda: calls.append("copy"), lambda: calls.append("sync"), 3, clock=Clock())
    assert calls == ["copy", "sync", "copy", "copy", "copy", "sync"]
    assert seconds == 1.0  # one clock reading before the timed copies, one after


def test_plan_every_gpu_both_ways_then_every_ordered_pair():
    tests = plan([0, 1, 2], p2p=True)
    h2d, d2h = TESTS["h2d"], TESTS["d2h"]
    assert tests[:6] == [(h2d, "cpu", "gpu0"), (h2d, "cpu", "gpu1"), (h2d, "cpu", "gpu2"),
                         (d2h, "gpu0", "cpu"), (d2h, "gpu1", "cpu"), (d2h, "gpu2", "cpu")]
    assert len(tests) == 6 + 6 and (TESTS["p2p"], "gpu2", "gpu0") in tests
    assert plan([0, 1], p2p=False) == tests[:1] + tests[1:2] + tests[3:5]


def test_measure_on_host_memory_copies_for_real():
    r = measure(_Backend(2), TESTS["p2p"], "gpu0", "gpu1", 2**20, 5)
    assert (r.test, r.src, r.dst, r.bytes, r.iterations) == (TESTS["p2p"], "gpu0", "gpu1", 2**20, 5)
    assert r.seconds > 0 and r.gbps == gbps(2**20, 5, r.seconds)


def test_numpy_run_through_the_real_subprocess_and_parser():
    p = engine("--backend", "numpy", "--size", str(2**20), "--iterations", "3", "--host-devices", "3")
    assert p.returncode == 0, p.stderr
    r = copylog.parse(p.stdout)
    assert r.valid, r.problems
    assert r.details == {"backend": "numpy", "size": 2**20, "iterations": 3, "trials": 3,
                         "devices": [0, 1, 2], "pci_bus_ids": [None, None, None], "cpus": {}}
    names = [m.name for m in r.metrics]
    assert [names.count(n) for n in ("gpu.h2d_bw", "gpu.d2h_bw", "gpu.p2p_bw")] == [3, 3, 6]
    h2d = [m for m in r.metrics if m.name == "gpu.h2d_bw"]
    assert h2d[2].labels == {"gpu": 2, "test": "host_to_device_memcpy_ce"} and h2d[2].value > 0
    events = [json.loads(line) for line in p.stdout.splitlines()]
    result = events[1]
    assert result["gbps"] == pytest.approx(gbps(result["bytes"], result["iterations"], result["seconds"]))


def test_no_gpu_backend_is_said_on_the_protocol():
    pytest.importorskip("numpy")
    for mod in ("torch", "cupy"):
        try:
            __import__(mod)
            pytest.skip(f"{mod} is installed")
        except ImportError:
            pass
    p = engine("--backend", "auto")
    assert p.returncode == 2
    r = copylog.parse(p.stdout)
    assert not r.valid and r.problems[0].startswith("ImportError: no GPU backend importable (torch:")


def run_lines(*extra: dict) -> str:
    start = {"event": "start", "backend": "torch", "size": 512, "iterations": 2, "devices": [0, 1],
             "plan": [["host_to_device_memcpy_ce", "cpu", f"gpu{i}"] for i in (0, 1)]}
    return "\n".join(json.dumps(e) for e in (start, *extra))


def ok(dst: str) -> dict:
    return {"event": "result", "test": "host_to_device_memcpy_ce", "src": "cpu", "dst": dst, "bytes": 512,
            "iterations": 2, "seconds": 1e-6, "gbps": 1.024}


def test_a_failed_copy_is_invalid_and_named():
    # SYNTHETIC protocol lines, written as the engine writes them
    err = {"event": "error", "test": "host_to_device_memcpy_ce", "src": "cpu", "dst": "gpu1",
           "message": "RuntimeError: CUDA error: an illegal memory access was encountered"}
    r = copylog.parse(run_lines(ok("gpu0"), err, {"event": "done"}))
    assert r.problems == ("host_to_device_memcpy_ce cpu->gpu1: RuntimeError: CUDA error: an illegal memory "
                          "access was encountered",)
    assert [m.labels["gpu"] for m in r.metrics] == [0]


def test_missing_results_and_missing_done_are_invalid():
    r = copylog.parse(run_lines(ok("gpu0")))
    assert r.problems == ("host_to_device_memcpy_ce cpu->gpu1: no result",
                          "no done line: the copy test did not finish")
    assert copylog.parse("Traceback (most recent call last):\n").problems == (
        "not builtin copy test output (no start line)",)


def test_registered():
    assert parsers()["builtin-copy"] is copylog.parse


# ---------------------------------------------------------------- trials and CPU affinity (#21 items 7, 10)

class _OnGpu18(_Backend):
    """Host buffers standing in for a GPU at 0000:18:00.0; each copy records the CPUs it ran on."""

    def __init__(self) -> None:
        super().__init__(2)
        self.ran_on: list[set[int]] = []

    def pci_bus_id(self, device: int) -> str | None:
        return "00000000:18:00.0" if device == 0 else None

    def h2d(self, device: int, nbytes: int):
        copy, sync = super().h2d(device, nbytes)

        def recorded() -> None:
            self.ran_on.append(os.sched_getaffinity(0))
            copy()

        return recorded, sync


def test_host_copies_run_on_the_cpus_local_to_their_gpu_and_the_result_says_which(tmp_path):
    me = sorted(os.sched_getaffinity(0))
    dev = tmp_path / "bus/pci/devices/0000:18:00.0"
    dev.mkdir(parents=True)
    (dev / "local_cpulist").write_text(f"{me[0]}\n")  # the GPU's socket: one CPU we may use
    be = _OnGpu18()
    r = measure(be, TESTS["h2d"], "cpu", "gpu0", 4096, 3, trials=2, sysfs=str(tmp_path))
    assert be.ran_on and all(cpus == {me[0]} for cpus in be.ran_on)
    assert r.cpus == str(me[0])
    assert os.sched_getaffinity(0) == set(me)  # restored afterwards
    other = measure(be, TESTS["h2d"], "cpu", "gpu1", 4096, 3, sysfs=str(tmp_path))  # no PCI address
    assert other.cpus is None and be.ran_on[-1] == set(me)


def test_cpulists_parse_and_print():
    assert parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpulist("garbage") == set()
    assert cpulist({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert local_cpus("00000000:99:00.0", "/nonexistent") is None and local_cpus(None) is None


def test_trials_report_the_median_like_nvbandwidth():
    p = engine("--backend", "numpy", "--size", "65536", "--iterations", "2", "--trials", "5", "--no-p2p")
    assert p.returncode == 0, p.stderr
    results = [json.loads(x) for x in p.stdout.splitlines() if '"result"' in x]
    assert results and all(r["trials"] == 5 and len(r["trial_gbps"]) == 5 for r in results)
    assert all(r["gbps"] == statistics.median(r["trial_gbps"]) and r["iterations"] == 2 for r in results)
    assert copylog.parse(p.stdout).details["trials"] == 5


class _Tensor:
    """What the copy test does with a PyTorch tensor: its address, and copy_ (a no-op here)."""

    def __init__(self, array=None) -> None:
        self.array = array

    def data_ptr(self) -> int:
        return self.array.ctypes.data if self.array is not None else 0

    def copy_(self, other, non_blocking: bool = False) -> None:
        pass


class _Cudart:
    def __init__(self) -> None:
        self.registered: list[tuple[int, set[int]]] = []
        self.unregistered: list[int] = []

    def cudaHostRegister(self, ptr: int, nbytes: int, flags: int) -> int:
        self.registered.append((ptr, os.sched_getaffinity(0)))
        return 0

    def cudaHostUnregister(self, ptr: int) -> int:
        self.unregistered.append(ptr)
        return 0


def test_torch_host_buffers_are_fresh_per_gpu_and_pinned_from_its_local_cpus(tmp_path):
    # the torch backend's pinned-memory cache is never emptied (pytorch#134332): GPU 0's buffer
    # would serve every later GPU. Each test now gets its own buffer, registered from the GPU's CPUs.
    import types

    from harness.engines.copy import _Torch

    me = sorted(os.sched_getaffinity(0))
    for bus, cpu in (("0000:18:00.0", me[0]), ("0000:9b:00.0", me[-1])):
        dev = tmp_path / "bus/pci/devices" / bus
        dev.mkdir(parents=True)
        (dev / "local_cpulist").write_text(f"{cpu}\n")
    cudart = _Cudart()
    fake = types.SimpleNamespace(
        uint8="uint8", from_numpy=_Tensor, full=lambda *a, **k: _Tensor(),
        cuda=types.SimpleNamespace(cudart=lambda: cudart, empty_cache=lambda: None,
                                   synchronize=lambda d: None))
    be = _Torch.__new__(_Torch)
    be.torch, be._registered = fake, []
    be.pci_bus_id = lambda d: ("0000:18:00.0", "0000:9b:00.0")[d]  # type: ignore[method-assign]
    measure(be, TESTS["h2d"], "cpu", "gpu0", 4096, 2, sysfs=str(tmp_path))
    measure(be, TESTS["d2h"], "gpu1", "cpu", 4096, 2, sysfs=str(tmp_path))
    (p0, cpus0), (p1, cpus1) = cudart.registered
    assert cpus0 == {me[0]} and cpus1 == {me[-1]}  # each pinned while running on its GPU's CPUs
    assert cudart.unregistered == [p0, p1] and be._registered == []  # released after each test
