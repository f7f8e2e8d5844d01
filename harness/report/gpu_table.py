"""The per-GPU table of a check (pure view): one row per GPU, the key burn and telemetry numbers
as columns, and the cells whose rules failed or warned marked, so the odd GPU out stands out.

Drawn for any check with metrics labelled `gpu`: a burn shows TFLOPS, temperatures, power,
clocks, throttling and the PCIe link under load side by side for every GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.model import Evaluation, Metric, Outcome

# metric, the labels its series in this table carries besides gpu (dtype is allowed too), header
COLUMNS: tuple[tuple[str, Mapping[str, str], str], ...] = (
    ("gpu_burn.tflops", {}, "TFLOPS"),
    ("gpu_burn.errors", {}, "Errors"),
    ("gpu.temp_max", {}, "Temp max"),
    ("gpu.mem_temp_max", {}, "HBM temp max"),
    ("gpu.power_mean", {}, "Power mean"),
    ("gpu.power_max", {}, "Power max"),
    ("gpu.sm_clock_mean", {}, "SM clock mean"),
    ("gpu.util_mean", {}, "Utilisation"),
    ("gpu.throttle_pct", {"reason": "any"}, "Throttled"),
    ("gpu.pcie_gen", {"which": "current"}, "PCIe gen"),
    ("gpu.pcie_width", {"which": "current"}, "PCIe width"),
)
_FREE = frozenset({"gpu", "dtype"})


@dataclass(frozen=True)
class Cell:
    metric: Metric | None
    state: str  # "", "warn" or "fail": the worst outcome of the GPU's rules on this metric


@dataclass(frozen=True)
class GpuTable:
    headers: tuple[str, ...]
    rows: tuple[tuple[int, str, tuple[Cell, ...]], ...]  # gpu, row state, cells
    shown: frozenset[tuple[str, tuple[tuple[str, str], ...]]]  # (metric, labels) the table holds


def _key(m: Metric) -> tuple[str, tuple[tuple[str, str], ...]]:
    return m.name, tuple(sorted((k, str(v)) for k, v in m.labels.items()))


def _fits(m: Metric, name: str, labels: Mapping[str, str]) -> bool:
    return (m.name == name and all(str(m.labels.get(k)) == v for k, v in labels.items())
            and set(m.labels) <= _FREE | set(labels))


def _state(evs: Sequence[Evaluation]) -> str:
    outcomes = {e.outcome for e in evs}
    return "fail" if Outcome.FAIL in outcomes else "warn" if Outcome.WARN in outcomes else ""


def gpu_table(metrics: Sequence[Metric], evaluations: Sequence[Evaluation]) -> GpuTable | None:
    """The table, or None when the check has no per-GPU numbers of the columns above."""
    gpus = sorted({int(g) for m in metrics if isinstance(g := m.labels.get("gpu"), int)})
    cols = [(n, lab, h) for n, lab, h in COLUMNS if any(_fits(m, n, lab) for m in metrics)]
    if not gpus or not cols:
        return None
    shown: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    rows = []
    for g in gpus:
        mine = [e for e in evaluations if e.labels.get("gpu") == g]
        cells = []
        for name, labels, _ in cols:
            m = next((m for m in metrics if m.labels.get("gpu") == g and _fits(m, name, labels)), None)
            if m is not None:
                shown.add(_key(m))
            cells.append(Cell(m, _state([e for e in mine if e.metric == name])))
        rows.append((g, _state(mine), tuple(cells)))
    return GpuTable(tuple(h for _, _, h in cols), tuple(rows), frozenset(shown))


def holds(table: GpuTable | None, m: Metric) -> bool:
    """Whether `m` is a cell of the table (then the flat list of other metrics leaves it out)."""
    return table is not None and _key(m) in table.shown
