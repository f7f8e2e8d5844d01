"""Synthetic telemetry series for tests of the pure series code and of the sampler's hook."""

from __future__ import annotations

from harness.parsers import clockreasons
from harness.series.telemetry import Series


def series(t, gpus, lost=None, period=1.0) -> Series:
    return Series(period, tuple(t), {g: {k: tuple(v) for k, v in cols.items()} for g, cols in gpus.items()},
                  lost or {})


def metric(ms, name, gpu, **labels) -> float:
    (m,) = [m for m in ms if m.name == name and m.labels.get("gpu") == gpu
            and all(m.labels.get(k) == v for k, v in labels.items())]
    return m.value


PC, HT = clockreasons.BITS["power_cap"], clockreasons.BITS["hw_thermal"]
SYNTH = series([0, 1, 2, 3, 4], {
    0: {"temp": [60, 65, 70, 68, 66], "mem_temp": [50, 52, None, 55, 54], "power": [300, 400, 500, 400, 300],
        "energy_mj": [1_000_000, 1_400_000, 1_900_000, 2_300_000, 2_600_000],
        "sm_clock": [1980, 1980, 1700, 1980, 1980], "util": [100, 100, 100, 100, 100],
        "reasons": [0, PC, PC | HT, 0, clockreasons.BITS["idle"]], "pcie_gen": [4, 5, 5, 5, 5],
        "pcie_gen_max": [5] * 5, "pcie_width": [16] * 5, "pcie_width_max": [16] * 5,
        "pcie_replays": [0, 0, 1, 3, 3], "ecc_uncorrected": [0] * 5, "ecc_corrected": [2, 2, 2, 2, 5]},
    1: {"temp": [40] * 5, "power": [100.0] * 5, "energy_mj": [None] * 5, "util": [0] * 5,
        "reasons": [None] * 5},
})
