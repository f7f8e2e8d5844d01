"""The builtin copy test for real on host memory (NumPy backend): timing arithmetic, the plan of
copies, the JSON-lines protocol through a real subprocess, and its parser on good and broken runs."""

from __future__ import annotations

import json
import subprocess

import pytest
from enginehelp import Clock, run_engine

from harness.engines.copy import TESTS, _Backend, gbps, measure, plan, time_copies
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
    assert r.details == {"backend": "numpy", "size": 2**20, "iterations": 3, "devices": [0, 1, 2]}
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
