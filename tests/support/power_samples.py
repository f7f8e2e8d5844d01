"""A power_headroom check with its series saved (SYNTHETIC: built here, hostile strings on purpose)."""

from __future__ import annotations

from pathlib import Path

import report_samples as samples

from harness.model import BmcReading, CheckResult, Evaluation, Metric, Outcome, PsuReading, Status
from harness.platform.nvml import GpuSample
from harness.series import power as power_series
from harness.series.power import Sample

EVIL = samples.HOSTILE[0]


def bmc(t: float, watts: float, lost: bool = False) -> BmcReading:
    psus = tuple(PsuReading(f"PSU{i}" if i != 2 else f"PSU2{EVIL}", not (lost and i == 3), watts / 6, None,
                            3300.0, "AC lost" + EVIL if lost and i == 3 else "ok") for i in range(1, 7))
    return BmcReading(t, watts, psus, not lost, "ipmitool dcmi " + EVIL)


def power_check(run_dir: Path, *, estimated: bool = False, lost: bool = False) -> CheckResult:
    samples_ = []
    for i in range(-2, 14):
        phase = "before" if i < 0 else ("load" if i < 10 else "cooldown")
        watts = 2100.0 if phase != "load" else 9000.0 + 40 * i
        reading = None if estimated else bmc(i, watts, lost and i >= 5)
        gpus = tuple(GpuSample(g, power=80.0 if phase != "load" else 650.0) for g in range(8))
        samples_.append(Sample(float(i), phase, reading, None, gpus))
    series = power_series.build(samples_, 1.0, allowance_w=4600.0 if estimated else None, capacity_w=13200.0,
                                source="estimated" if estimated else "ipmitool dcmi " + EVIL)
    path = power_series.save(series, run_dir / "raw" / "power")
    peak = max(v for v, p in zip(series.node_w, series.phase, strict=True) if p == "load" and v)
    head = 100 * (1 - peak / 13200)
    ticks = [power_series.power.BmcTick(s.t, s.phase, s.bmc) for s in samples_ if s.bmc]
    return CheckResult(
        "power", "power_headroom", Status.FAILED if lost else Status.PASSED, "peak", "2024-05-01T10:00:00Z",
        20.0, metrics=(Metric("power.node_peak", peak, "W"), Metric("power.headroom_pct", head, "%"),
                       Metric("power.usable_capacity", 13200.0, "W")),
        evaluations=(Evaluation(metric="power.headroom_pct", labels={}, outcome=Outcome.PASS,
                                severity="fail", measured=head, unit="%", reference=None, low=20.0,
                                high=None, reduce="each", message="ok", source="dgx-h100"),),
        details={"power": {"file": str(path.relative_to(run_dir))},
                 "psus": power_series.power.psu_table(ticks)})
