#!/usr/bin/env python3
"""Can the telemetry sampler hold 10 Hz on 8 GPUs? Its cost against bare NVML calls.

Two measurements over the same NVML (the real one when a driver is loaded, else the test
suite's fake NVML with --gpus GPUs; the fake measures the harness's own cost only):

1. one reading of every GPU: `NvmlSession.sample()` against the bare pynvml calls it makes
   (the same 16 per GPU, in a plain loop), medians over --reads; prints the ratio harness/bare;
2. the real `telemetry.Sampler` thread at --hz for --seconds: achieved rate, overruns (ticks
   skipped because a reading overran its slot) and the highest rate one reading's cost allows.

Goal: 10 Hz held (no overrun, achieved rate >= 95% of it) on 8 GPUs. With fewer real GPUs than
8 the per-GPU cost is scaled to 8 and printed as an estimate.

    python benchmarks/bench_telemetry.py [--gpus 8] [--hz 10] [--seconds 5] [--reads 200] [--fake]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GOAL_HZ = 10.0
GOAL_GPUS = 8


def use_fake(gpus: int) -> None:
    """Put the tests' fake NVML (tests/support/fakenvml.py) in place of pynvml."""
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    import fakenvml

    sys.modules["pynvml"] = fakenvml.module([fakenvml.FakeGpu() for _ in range(gpus)])


def bare_reader(nv: Any, handles: list[Any]) -> Callable[[], None]:
    """The calls NvmlSession._sample makes, without the harness around them."""
    temp_gpu, sm, mem = nv.NVML_TEMPERATURE_GPU, nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM
    corr, unc, vol = (nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                      nv.NVML_VOLATILE_ECC)
    reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) \
        or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    temperature = getattr(nv, "nvmlDeviceGetTemperatureV", None) or nv.nvmlDeviceGetTemperature  # 13+: V
    calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = [
        (nv.nvmlDeviceGetUtilizationRates, ()), (reasons, ()), (nv.nvmlDeviceGetPowerUsage, ()),
        (temperature, (temp_gpu,)), (nv.nvmlDeviceGetFieldValues, ([82],)),
        (nv.nvmlDeviceGetTotalEnergyConsumption, ()), (nv.nvmlDeviceGetClockInfo, (sm,)),
        (nv.nvmlDeviceGetClockInfo, (mem,)), (nv.nvmlDeviceGetCurrPcieLinkGeneration, ()),
        (nv.nvmlDeviceGetMaxPcieLinkGeneration, ()), (nv.nvmlDeviceGetCurrPcieLinkWidth, ()),
        (nv.nvmlDeviceGetMaxPcieLinkWidth, ()), (nv.nvmlDeviceGetPcieReplayCounter, ()),
        (nv.nvmlDeviceGetTotalEccErrors, (corr, vol)), (nv.nvmlDeviceGetTotalEccErrors, (unc, vol)),
    ]

    def read() -> None:
        for h in handles:
            for fn, args in calls:
                try:
                    fn(h, *args)
                except nv.NVMLError:
                    pass

    return read


def median_s(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int, default=GOAL_GPUS, help="GPUs of the fake NVML (default 8)")
    ap.add_argument("--hz", type=float, default=GOAL_HZ)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--reads", type=int, default=200)
    ap.add_argument("--fake", action="store_true", help="the fake NVML even when a driver is loaded")
    a = ap.parse_args()

    from harness.platform import nvml
    from harness.run.sampler import Sampler

    backend = "real NVML"
    if a.fake:
        use_fake(a.gpus)
        backend = "fake NVML (tests/support/fakenvml.py): the harness's own cost only"
    try:
        session = nvml.NvmlSession()
    except nvml.NvmlUnavailable as e:
        print(f"{e}; using the fake NVML")
        use_fake(a.gpus)
        backend = "fake NVML (tests/support/fakenvml.py): the harness's own cost only"
        session = nvml.NvmlSession()
    with session:
        n = len(session.handles)
        if n == 0:
            print("NVML sees no GPU")
            return 1
        print(f"backend: {backend}; {n} GPU(s)")
        bare = median_s(bare_reader(session._nv, session.handles), a.reads)
        harness = median_s(session.sample, a.reads)
        print(f"one reading of {n} GPU(s): bare NVML {bare * 1e3:.3f} ms, harness {harness * 1e3:.3f} ms, "
              f"ratio {harness / bare:.2f}x")

        sampler = Sampler(session.sample, 1.0 / a.hz).start()
        time.sleep(a.seconds)
        series = sampler.stop()
    ticks = series.t[:-1]  # the closing sample comes off-beat
    achieved = (len(ticks) - 1) / ticks[-1] if len(ticks) > 1 and ticks[-1] > 0 else 0.0
    cost = series.sample_cost_s
    print(f"sampler at {a.hz:g} Hz for {a.seconds:g} s: {len(series.t)} samples, {achieved:.2f} Hz achieved, "
          f"{series.overruns} overrun(s), {cost * 1e3:.3f} ms per reading "
          f"(at most {1 / cost if cost else float('inf'):,.0f} Hz)")
    per_gpu = cost / n
    at_goal = per_gpu * GOAL_GPUS
    est = "" if n >= GOAL_GPUS else f" (estimated from {n} GPU(s): {per_gpu * 1e3:.3f} ms per GPU)"
    held = series.overruns == 0 and achieved >= 0.95 * a.hz and at_goal < 1.0 / GOAL_HZ
    print(f"{GOAL_GPUS} GPUs: {at_goal * 1e3:.2f} ms per reading{est} against the {1e3 / GOAL_HZ:.0f} ms "
          f"a {GOAL_HZ:g} Hz tick allows: {'MET' if held else 'MISSED'}")
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
