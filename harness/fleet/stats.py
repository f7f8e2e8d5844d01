"""Fleet-relative outliers (pure): robust z-scores from the median and MAD across nodes.

For each series (SKU, check, metric, unit, labels) the nodes' values are compared with the
series median; the spread is 1.4826 x MAD (the normal-consistent MAD), or 1.2533 x the mean
absolute deviation when more than half the nodes agree exactly (MAD = 0). A node is an outlier
when it lies at least `threshold` robust standard deviations from the median on the *bad* side
(lower for higher-is-better metrics, higher for lower-is-better, either side when neither) and
at least `min_rel` away relative to the median: the straggler that passes its profile yet slows
every job it joins. Iglewicz and Hoaglin's 3.5 is the default threshold.

`column_outliers` does the same on a numpy column (a fleet of 10,000 nodes); both give the very
same floats: medians are exact order statistics and the mean absolute deviation is summed in
Python, in order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import TYPE_CHECKING

import numpy as np

from harness.model import join_labels

if TYPE_CHECKING:
    from numpy.typing import NDArray

MAD_TO_SIGMA = 1.4826  # 1 / Phi^-1(3/4)
MEANAD_TO_SIGMA = 1.2533  # sqrt(pi / 2)
DEFAULT_THRESHOLD = 3.5
DEFAULT_MIN_NODES = 4
DEFAULT_MIN_REL = 0.05


@dataclass(frozen=True, order=True)
class SeriesKey:
    """What makes values comparable across nodes."""

    sku: str
    check: str
    metric: str
    unit: str
    labels: tuple[tuple[str, str], ...] = ()

    def text(self) -> str:
        lab = join_labels(self.labels)
        return f"{self.check}: {self.metric}" + (f"{{{lab}}}" if lab else "")


@dataclass(frozen=True)
class Spread:
    """Centre and robust standard deviation of one series."""

    median: float
    sigma: float  # 0 when every value is the same
    n: int


@dataclass(frozen=True)
class Outlier:
    """One node far from its fleet on the bad side of one series."""

    node: str
    key: SeriesKey
    value: float
    median: float
    sigma: float
    z: float  # signed robust z-score
    better: str  # higher | lower | none
    n: int  # nodes in the series

    @property
    def deviation_pct(self) -> float | None:
        return None if self.median == 0 else 100.0 * (self.value - self.median) / abs(self.median)


def spread(values: Sequence[float]) -> Spread:
    """Median and robust sigma of a non-empty sequence."""
    if not values:
        raise ValueError("spread of no values")
    med = median(values)
    dev = [abs(v - med) for v in values]
    mad = median(dev)
    if mad > 0:
        sigma = MAD_TO_SIGMA * mad
    else:
        sigma = MEANAD_TO_SIGMA * (sum(dev) / len(dev))
    return Spread(med, sigma, len(values))


def robust_z(value: float, s: Spread) -> float:
    """(value - median) / sigma; 0 when the series has no spread."""
    if s.sigma == 0 or not math.isfinite(s.sigma):
        return 0.0
    return (value - s.median) / s.sigma


def series_outliers(key: SeriesKey, values: Mapping[str, float], better: str,
                    threshold: float = DEFAULT_THRESHOLD, min_nodes: int = DEFAULT_MIN_NODES,
                    min_rel: float = DEFAULT_MIN_REL) -> list[Outlier]:
    """The outliers of one series (node -> value); none when fewer than `min_nodes` nodes."""
    names = list(values)
    column = np.fromiter(values.values(), dtype=np.float64, count=len(names))
    return column_outliers(key, names, np.arange(len(names), dtype=np.int32), column, better, threshold,
                           min_nodes, min_rel)


def _median(a: NDArray[np.float64]) -> float:
    """statistics.median of a non-empty column, exactly: the middle order statistic(s)."""
    n = len(a)
    k = n // 2
    if n % 2:
        return float(np.partition(a, k)[k])
    p = np.partition(a, (k - 1, k))
    return (float(p[k - 1]) + float(p[k])) / 2


def column_outliers(key: SeriesKey, names: Sequence[str], nodes: NDArray[np.int32],
                    values: NDArray[np.float64], better: str, threshold: float = DEFAULT_THRESHOLD,
                    min_nodes: int = DEFAULT_MIN_NODES, min_rel: float = DEFAULT_MIN_REL) -> list[Outlier]:
    """series_outliers of one column: node i has index nodes[i] into `names` and value values[i]."""
    finite = np.isfinite(values)
    if not finite.all():
        nodes, values = nodes[finite], values[finite]
    n = len(values)
    if n < min_nodes:
        return []
    with np.errstate(all="ignore"):  # as Python floats do, overflow gives inf, not a warning
        med = _median(values)
        dev = np.abs(values - med)
        mad = _median(dev)
        sigma = MAD_TO_SIGMA * mad if mad > 0 else MEANAD_TO_SIGMA * (sum(dev.tolist()) / n)
        if sigma == 0 or not math.isfinite(sigma):
            z = np.zeros(n)
        else:
            z = (values - med) / sigma
        far = dev >= min_rel * abs(med) if med != 0 else np.ones(n, dtype=bool)
    if better == "higher":
        bad = z <= -threshold
    elif better == "lower":
        bad = z >= threshold
    else:
        bad = np.abs(z) >= threshold
    return [Outlier(names[nodes[i]], key, float(values[i]), med, sigma, float(z[i]), better, n)
            for i in np.flatnonzero(far & bad).tolist()]


def group(samples: Iterable[tuple[SeriesKey, str, float]]) -> dict[SeriesKey, dict[str, float]]:
    """(key, node, value) samples as series; a node's repeated values in one series are averaged."""
    series: dict[SeriesKey, dict[str, float]] = {}
    repeats: dict[tuple[SeriesKey, str], list[float]] = {}
    for key, node, value in samples:
        by_node = series.get(key)
        if by_node is None:
            by_node = series[key] = {}
        if node in by_node:
            repeats.setdefault((key, node), [by_node[node]]).append(value)
        by_node[node] = value
    for (key, node), values in repeats.items():
        series[key][node] = sum(values) / len(values)
    return series


def find_outliers(series: Mapping[SeriesKey, Mapping[str, float]], better: Callable[[SeriesKey], str],
                  threshold: float = DEFAULT_THRESHOLD, min_nodes: int = DEFAULT_MIN_NODES,
                  min_rel: float = DEFAULT_MIN_REL) -> list[Outlier]:
    """Every outlier of every series, the farthest first."""
    out: list[Outlier] = []
    for key in sorted(series):
        out += series_outliers(key, series[key], better(key), threshold, min_nodes, min_rel)
    out.sort(key=lambda o: (-abs(o.z), o.node, o.key))
    return out
