"""Fleet-relative outliers (pure): robust z-scores from the median and MAD across nodes.

For each series (SKU, check, metric, unit, labels) the nodes' values are compared with the
series median; the spread is 1.4826 x MAD (the normal-consistent MAD), or 1.2533 x the mean
absolute deviation when more than half the nodes agree exactly (MAD = 0). A node is an outlier
when it lies at least `threshold` robust standard deviations from the median on the *bad* side
(lower for higher-is-better metrics, higher for lower-is-better, either side when neither) and
at least `min_rel` away relative to the median: the straggler that passes its profile yet slows
every job it joins. Iglewicz and Hoaglin's 3.5 is the default threshold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median

from harness.model import join_labels

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


def _bad_side(z: float, better: str, threshold: float) -> bool:
    if better == "higher":
        return z <= -threshold
    if better == "lower":
        return z >= threshold
    return abs(z) >= threshold


def series_outliers(key: SeriesKey, values: Mapping[str, float], better: str,
                    threshold: float = DEFAULT_THRESHOLD, min_nodes: int = DEFAULT_MIN_NODES,
                    min_rel: float = DEFAULT_MIN_REL) -> list[Outlier]:
    """The outliers of one series (node -> value); none when fewer than `min_nodes` nodes."""
    finite = {n: v for n, v in values.items() if math.isfinite(v)}
    if len(finite) < min_nodes:
        return []
    s = spread(list(finite.values()))
    out = []
    for node, v in finite.items():
        z = robust_z(v, s)
        far = s.median == 0 or abs(v - s.median) >= min_rel * abs(s.median)
        if far and _bad_side(z, better, threshold):
            out.append(Outlier(node, key, v, s.median, s.sigma, z, better, s.n))
    return out


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
