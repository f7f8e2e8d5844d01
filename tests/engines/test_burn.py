"""The builtin burn for real on the CPU (NumPy backend): the core loop with an injected wrong
product, the JSON-lines protocol through a real subprocess, its parser, and the check kind."""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from enginehelp import run_engine
from judging import run_judged

from harness.checks.base import CheckContext
from harness.checks.gpu_burn import KIND, GpuBurnParams, build_argv
from harness.engines.burn import burn_loop, run_children, tflops
from harness.engines.burn_ops import MemoryPass, NumpyBackend, Ops
from harness.model import Outcome
from harness.parsers import burnlog
from harness.parsers.registry import parsers


def engine(*args: str) -> subprocess.CompletedProcess[str]:
    return run_engine("harness.engines.burn", *args)


class Ticker:
    """A clock the fake device advances: each product costs 1 s, each comparison 5 s."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def fake_ops(clock: Ticker, products: list[int], tile_error: float = 0.0) -> Ops:
    it = iter(products)

    def multiply() -> int:
        clock.t += 1.0
        return next(it)

    def differs(c: int, first: int) -> bool:
        clock.t += 5.0  # a full compare with the first product: ~7-8% of a bf16 product on an H200
        return c != first

    return Ops(multiply, lambda: None, differs, lambda c: f"d{c}", lambda c: tile_error)


def test_only_the_products_are_timed_and_every_product_is_verified_apart():
    clock = Ticker()
    r = burn_loop(3, 1000, fake_ops(clock, [10] * 30), deadline=20.0, batch=2, clock=clock)
    # the first product (1 s); per batch: 2 products (2 s, timed) then 2 compares (10 s, not timed)
    assert (r.iterations, r.verified, r.errors) == (4, 4, 0)  # every product compared, not 1 in `batch`
    assert r.seconds == 4.0 and r.wall_seconds == 25.0
    assert r.tflops == tflops(1000, 4, 4.0) and r.tflops_wall == tflops(1000, 4, 25.0)
    assert r.tflops > 3 * r.tflops_wall  # before: the compare was inside the timing


def test_a_product_that_differs_inside_a_batch_is_caught_not_only_the_batchs_last():
    clock = Ticker()
    # batch of 3: the second product of the first batch is wrong; the batch's last one is right
    r = burn_loop(0, 64, fake_ops(clock, [10, 10, 11, 10, 10, 10, 10], tile_error=0.5), deadline=5.0,
                  batch=3, dtype="bf16", clock=clock)
    assert (r.iterations, r.verified, r.errors) == (3, 3, 1)
    assert r.digest == "d10" and r.tile_ok is False


def test_the_numpy_backend_counts_mismatches_on_the_device_and_reads_them_once_per_batch():
    from harness.engines.burn import mismatched
    from harness.engines.burn_ops import NumpyBackend

    ops = NumpyBackend().setup(0, 16, "fp32")
    first = ops.multiply()
    good, bad = ops.multiply(), ops.multiply().copy()
    bad[3, 4] += 1.0
    reads: list[int] = []
    counted = replace(ops, read=lambda xs: reads.append(len(xs)) or [int(x) for x in xs])
    assert mismatched(counted, [good, bad, good], first) == 1
    assert reads == [3]  # one read for the whole batch


def test_tflops_arithmetic():
    assert tflops(8192, 100, 10.0) == pytest.approx(2 * 8192**3 * 100 / 10 / 1e12)  # 109.95 TFLOPS
    assert tflops(8192, 100, 0.0) == 0.0


def test_numpy_run_through_the_real_subprocess_and_parser():
    p = engine("--seconds", "0.5", "--dtype", "fp64", "--backend", "numpy", "--size", "48")
    assert p.returncode == 0, p.stderr
    r = burnlog.parse(p.stdout)
    assert r.valid, r.problems
    got = {m.name: m for m in r.metrics}
    assert got["gpu_burn.ok"].value == 1.0 and got["gpu_burn.errors"].value == 0.0
    assert got["gpu_burn.iterations"].value >= 2 and got["gpu_burn.tflops"].value > 0
    assert got["gpu_burn.tflops"].labels == {"dtype": "fp64", "gpu": 0}
    assert {k: r.details[k] for k in ("backend", "dtype", "size", "devices", "pci_bus_ids", "faults")} == {
        "backend": "numpy", "dtype": "fp64", "size": 48, "devices": [0], "pci_bus_ids": [None], "faults": {}}
    assert r.details["verified"]["0"] >= 1 and r.details["mem_bytes"]["0"] == 4 * 2**20


def test_unsupported_dtype_on_a_device_is_reported_and_invalid():
    p = engine("--seconds", "0.2", "--dtype", "bf16", "--backend", "numpy")
    assert p.returncode == 1
    r = burnlog.parse(p.stdout)
    assert not r.valid
    assert r.problems == ("GPU 0: ValueError: dtype bf16 needs a GPU backend (numpy does fp32 and fp64)",)
    assert r.details["dead"] == {}  # no GPU finished: the engine or the environment failed, none named


@pytest.mark.skipif(any(importlib.util.find_spec(m) for m in ("torch", "cupy")),
                    reason="a GPU backend is installed here")
def test_auto_never_falls_back_to_the_cpu():
    p = engine("--seconds", "0.2")
    assert p.returncode == 2
    r = burnlog.parse(p.stdout)
    assert not r.valid and r.problems[0].startswith("ImportError: no GPU backend importable (torch:")


def test_parser_edges():
    start = '{"event": "start", "backend": "torch", "dtype": "bf16", "size": 8192, "devices": [0, 1]}\n'
    one = '{"event": "result", "gpu": 0, "iterations": 1, "errors": 0, "seconds": 60, "tflops": 1.0}\n'
    r = burnlog.parse(start + one)
    assert not r.valid
    assert r.problems == ("no done line: the burn did not finish",
                          "GPU 0: 1 multiply(ies), none verified: nothing was compared", "GPU 1: no result")
    assert {(m.name, m.labels["gpu"]): m.value for m in r.metrics if m.name == "gpu_burn.ok"} == {
        ("gpu_burn.ok", 0): 0.0, ("gpu_burn.ok", 1): 0.0}
    assert not burnlog.parse("garbage").valid and parsers()["builtin-burn"] is burnlog.parse


def test_kind_with_the_builtin_engine_on_numpy(tmp_path: Path):
    params = GpuBurnParams(engine="builtin", backend="numpy", dtype="fp32", duration=1, size=32)
    assert build_argv(params)[1:] == ["-m", "harness.engines.burn", "--seconds", "1", "--dtype", "fp32",
                                      "--backend", "numpy", "--grace", "30", "--size", "32"]
    ctx = CheckContext("b", tmp_path, 60, False, False, {"gpus": [{"index": 0}]}, logging.getLogger("t"))
    out = run_judged(KIND, params, ctx)
    assert out.problems == ()
    (ev,) = out.evaluations
    assert ev.outcome is Outcome.PASS and ev.message == "all 1 GPUs OK, no computation errors"
    assert out.summary.startswith("builtin fp32 burn 1 s: 1 of 1 GPUs OK;")


def test_every_device_burns_the_same_inputs_in_its_own_process():
    p = engine("--seconds", "0.3", "--dtype", "fp32", "--backend", "numpy", "--size", "40",
               "--host-devices", "3")
    assert p.returncode == 0, p.stderr
    results = [json.loads(x) for x in p.stdout.splitlines() if '"result"' in x]
    assert sorted(r["gpu"] for r in results) == [0, 1, 2]
    assert len({r["digest"] for r in results}) == 1  # common seed: before, each device had its own inputs
    assert all(r["tile_ok"] and r["mem_errors"] == 0 for r in results)
    assert burnlog.parse(p.stdout).valid


def test_a_hung_device_is_killed_and_the_other_devices_results_are_kept():
    got: list[dict] = []
    real = [sys.executable, "-m", "harness.engines.burn", "--seconds", "0.2", "--dtype", "fp64",
            "--backend", "numpy", "--size", "32", "--device", "0"]
    hang = [sys.executable, "-c", "import time; time.sleep(60)"]
    t0 = time.monotonic()
    run_children({0: real, 1: hang}, burn_s=4.0, setup_s=6.0, out=got.append)
    assert time.monotonic() - t0 < 20
    by_gpu = {e["gpu"]: e for e in got}
    assert by_gpu[0]["event"] == "result" and by_gpu[0]["verified"] >= 1
    assert by_gpu[1]["event"] == "error" and by_gpu[1]["message"].startswith("hung: not ready 6 s after")


READY_LATE = ("import json, time; time.sleep({wait}); print(json.dumps({{'event': 'ready'}}), flush=True); "
              "time.sleep({burn}); print(json.dumps({{'event': 'result', 'iterations': 1}}), flush=True)")


def test_the_grace_counts_from_each_childs_own_readiness_not_from_the_spawn():
    """A slow start (torch import, a CUDA context, a 110 GB fill on 8 cold GPUs) is not a hang: the
    child is ready after 2.5 s and reports 1 s later, within its burn_s of 2 s from its ready line
    (4 s after the spawn, which the old bound from the spawn called hung)."""
    got: list[dict] = []
    slow = [sys.executable, "-c", READY_LATE.format(wait=2.5, burn=1.0)]
    stuck = [sys.executable, "-c", READY_LATE.format(wait=0.2, burn=60)]
    run_children({0: slow, 1: stuck}, burn_s=2.0, setup_s=30.0, out=got.append)
    by_gpu = {e["gpu"]: e for e in got}
    assert by_gpu[0]["event"] == "result"
    assert by_gpu[1]["message"].startswith("hung: no result 2 s after it began burning")


def test_a_child_that_cannot_be_killed_is_named_and_left_behind_within_a_bound():
    """A process on a hung GPU sits in uninterruptible sleep: SIGKILL does not take. Here the kill is
    made a no-op; the engine names the GPU at once, waits kill_wait_s, and ends."""
    got: list[dict] = []
    left: list[subprocess.Popen] = []
    hang = [sys.executable, "-c", "import time; time.sleep(60)"]
    real = [sys.executable, "-m", "harness.engines.burn", "--seconds", "0.2", "--dtype", "fp64",
            "--backend", "numpy", "--size", "32", "--device", "0"]
    t0 = time.monotonic()
    try:
        run_children({0: real, 3: hang}, burn_s=30.0, setup_s=3.0, out=got.append, kill_wait_s=0.5,
                     kill=left.append)
        took = time.monotonic() - t0
    finally:
        for p in left:
            p.kill()
            p.wait(timeout=10)
    assert took < 20  # bounded: before, p.wait() after the kill waited for ever
    assert [p.args for p in left] == [hang]
    by_gpu = {e["gpu"]: [x for x in got if x["gpu"] == e["gpu"]] for e in got}
    assert by_gpu[0][0]["event"] == "result"
    err, note = by_gpu[3]
    assert err["event"] == "error" and err["message"].startswith("hung: not ready 3 s")
    assert note["event"] == "note" and "did not die within 0.5 s of SIGKILL" in note["message"]


def test_a_child_that_dies_without_a_result_is_named():
    got: list[dict] = []
    die = [sys.executable, "-c", "import sys; sys.exit('CUDA error: device lost')"]
    run_children({5: die}, 10.0, got.append, setup_s=10.0)
    assert got == [{"event": "error", "gpu": 5,
                    "message": "exit 1 without a result: CUDA error: device lost"}]


def result_line(gpu: int, digest: str, **kw: object) -> str:
    r = {"event": "result", "gpu": gpu, "iterations": 100, "verified": 10, "errors": 0, "tflops": 700.0,
         "digest": digest, "name": "NVIDIA H200", "tile_ok": True, "mem_errors": 0, **kw}
    return json.dumps(r) + "\n"


def test_a_gpu_that_is_consistently_wrong_fails_against_its_siblings():
    start = '{"event": "start", "backend": "torch", "dtype": "bf16", "size": 8192, "devices": [0, 1, 2, 3]}\n'
    text = (start + result_line(0, "aa") + result_line(1, "aa") + result_line(2, "bb") + result_line(3, "aa")
            + '{"event": "done"}\n')
    r = burnlog.parse(text)
    assert r.valid  # a wrong GPU is a hardware verdict, not an invalid run
    ok = {m.labels["gpu"]: m.value for m in r.metrics if m.name == "gpu_burn.ok"}
    assert ok == {0: 1.0, 1: 1.0, 2: 0.0, 3: 1.0}
    assert r.details["faults"]["2"].startswith(
        "its product of the common inputs differs from that of 3 of the 4")


def test_memory_pattern_and_reference_faults_fail_their_gpu():
    start = '{"event": "start", "backend": "torch", "dtype": "bf16", "size": 8192, "devices": [0, 1]}\n'
    text = (start + result_line(0, "aa", mem_errors=12) + result_line(1, "aa", tile_ok=False, tile_error=0.4)
            + '{"event": "done"}\n')
    r = burnlog.parse(text)
    ok = {m.labels["gpu"]: m.value for m in r.metrics if m.name == "gpu_burn.ok"}
    assert ok == {0: 0.0, 1: 0.0}
    assert r.details["faults"] == {"0": "12 words of its memory pattern came back changed",
                                   "1": "its product is off the float64 reference (relative error 0.4)"}


def test_the_memory_pass_counts_words_that_changed():
    mem = NumpyBackend().memory(0, 0.8)
    assert mem.nbytes == 4 * 2**20
    mem.chunks[0][[5, 77, 4096]] ^= 1 << 3  # three flipped bits
    assert mem.verify() == 3 and mem.chunks == []
    assert isinstance(mem, MemoryPass)


def test_the_check_fails_a_wrong_gpu_with_the_reason(tmp_path: Path):
    from harness.checks.gpu_burn import _burn_verdicts

    start = '{"event": "start", "backend": "torch", "dtype": "bf16", "size": 8192, "devices": [0, 1, 2]}\n'
    text = start + result_line(0, "aa") + result_line(1, "aa") + result_line(2, "cc") + '{"event": "done"}\n'
    parsed = burnlog.parse(text)
    (ev,) = _burn_verdicts(parsed, "builtin", parsed.details["faults"])
    assert ev.outcome is Outcome.FAIL and ev.labels["gpu"] == 2
    assert ev.message.startswith("GPU 2: wrong results (its product of the common inputs differs")


def test_the_numpy_backend_stands_in_for_every_gpu_the_check_makes_visible(tmp_path: Path):
    # the gpu_burn check sets CUDA_VISIBLE_DEVICES to NVML's GPUs by UUID; on the NVML fake (2 GPUs)
    # the CPU burn must report both, or the device-check rehearsal reads "1 of the 2 GPUs"
    import os

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "GPU-00000000-fake,GPU-00000001-fake"}
    p = subprocess.run([sys.executable, "-m", "harness.engines.burn", "--seconds", "0.2", "--dtype", "fp32",
                        "--backend", "numpy", "--size", "32", "--mem-fraction", "0"], env=env,
                       capture_output=True, text=True, timeout=120, check=False)
    results = [json.loads(ln) for ln in p.stdout.splitlines() if '"result"' in ln]
    assert sorted(r["gpu"] for r in results) == [0, 1], p.stdout + p.stderr
