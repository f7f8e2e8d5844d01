"""The builtin burn for real on the CPU (NumPy backend): the core loop with an injected wrong
product, the JSON-lines protocol through a real subprocess, its parser, and the check kind."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
from pathlib import Path

import pytest
from enginehelp import Clock, run_engine
from judging import run_judged

from harness.checks.base import CheckContext
from harness.checks.gpu_burn import KIND, GpuBurnParams, build_argv
from harness.engines.burn import burn_loop, tflops
from harness.model import Outcome
from harness.parsers import burnlog
from harness.parsers.registry import parsers


def engine(*args: str) -> subprocess.CompletedProcess[str]:
    return run_engine("harness.engines.burn", *args)


def test_every_product_is_compared_with_the_first():
    products = iter([10, 10, 11, 10, 10])  # the third product is corrupt

    r = burn_loop(3, 1000, lambda: next(products), lambda c, first: c != first, deadline=5.5, clock=Clock())
    # clock: start=1, then loop checks at 2,3,4,5 (< 5.5) and 6 (stops); end reading 7
    assert (r.gpu, r.iterations, r.errors, r.seconds) == (3, 5, 1, 6.0)
    assert r.tflops == tflops(1000, 5, 6.0) == pytest.approx(2e9 * 5 / 6.0 / 1e12)


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
    assert r.details == {"backend": "numpy", "dtype": "fp64", "size": 48, "devices": [0]}


def test_unsupported_dtype_on_a_device_is_reported_and_invalid():
    p = engine("--seconds", "0.2", "--dtype", "bf16", "--backend", "numpy")
    assert p.returncode == 1
    r = burnlog.parse(p.stdout)
    assert not r.valid
    assert r.problems == ("GPU 0: ValueError: dtype bf16 needs a GPU backend (numpy does fp32 and fp64)",
                          "GPU 0: no result")


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
                          "GPU 0: 1 multiply(ies): nothing was compared", "GPU 1: no result")
    assert {(m.name, m.labels["gpu"]): m.value for m in r.metrics if m.name == "gpu_burn.ok"} == {
        ("gpu_burn.ok", 0): 0.0, ("gpu_burn.ok", 1): 0.0}
    assert not burnlog.parse("garbage").valid and parsers()["builtin-burn"] is burnlog.parse


def test_kind_with_the_builtin_engine_on_numpy(tmp_path: Path):
    params = GpuBurnParams(engine="builtin", backend="numpy", dtype="fp32", duration=1, size=32)
    assert build_argv(params)[1:] == ["-m", "harness.engines.burn", "--seconds", "1", "--dtype", "fp32",
                                      "--backend", "numpy", "--size", "32"]
    ctx = CheckContext("b", tmp_path, 60, False, False, {"gpus": [{"index": 0}]}, logging.getLogger("t"))
    out = run_judged(KIND, params, ctx)
    assert out.problems == ()
    (ev,) = out.evaluations
    assert ev.outcome is Outcome.PASS and ev.message == "all 1 GPUs OK, no computation errors"
    assert out.summary.startswith("builtin fp32 burn 1 s: 1 of 1 GPUs OK;")
