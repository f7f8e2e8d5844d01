"""Every series of a fleet as columns: per series, the node indices and float64 values, nothing else.

A fleet report streams its nodes: each node's samples are appended once and its run is let go,
so memory grows with the number of values (12 bytes each), not with whole RunRecords. A node's
repeated values in one series are averaged, in the order they came, as stats.group does.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.fleet import stats
from harness.fleet.stats import Outlier, SeriesKey


@dataclass
class _Column:
    key: SeriesKey
    nodes: array  # int32 node indices, in the order they came
    values: array  # float64


# (check id, metric name, unit, labels, value), as harness.fleet.collect.MetricRow
Row = tuple[str, str, str, Mapping[str, Any], float]
# SeriesBuilder.parts: node names, and (key, int32 node indices, float64 values) per series
Columns = tuple[tuple[str, ...], list[tuple[SeriesKey, bytes, bytes]]]


class SeriesBuilder:
    """Appends (series key, node, value) samples node by node; `table()` freezes them."""

    def __init__(self) -> None:
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._cols: dict[SeriesKey, _Column] = {}
        # by SKU, (check, name, unit, *labels) as they came -> the column and its appenders
        self._raw: dict[str, dict[tuple[object, ...], tuple[_Column, array, Any, Any]]] = {}
        self._repeats: dict[tuple[SeriesKey, int], list[float]] = {}  # (key, position) -> values
        self._node = -1
        self._node_was_seen = False

    def start_node(self, name: str) -> None:
        """Every sample until the next start_node belongs to `name`."""
        index = self._index.get(name)
        self._node_was_seen = index is not None
        if index is None:
            index = self._index[name] = len(self._names)
            self._names.append(name)
        self._node = index

    def _column(self, key: SeriesKey) -> _Column:
        col = self._cols.get(key)
        if col is None:
            col = self._cols[key] = _Column(key, array("i"), array("d"))
        return col

    def _append(self, col: _Column, value: float) -> None:
        node, nodes = self._node, col.nodes
        if nodes and nodes[-1] == node:
            pos = len(nodes) - 1
        elif self._node_was_seen and node in nodes:  # the same node name twice in a fleet: rare
            pos = nodes.index(node)
        else:
            nodes.append(node)
            col.values.append(value)
            return
        self._repeats.setdefault((col.key, pos), [col.values[pos]]).append(value)
        col.values[pos] = value

    def add(self, key: SeriesKey, value: float) -> None:
        self._append(self._column(key), value)

    def add_samples(self, node: str, samples: Iterable[tuple[SeriesKey, float]]) -> None:
        self.start_node(node)
        for key, value in samples:
            self.add(key, value)

    def add_rows(self, node: str, sku: str, rows: Iterable[Row],
                 folded: frozenset[str] = frozenset()) -> None:
        """One node's metrics: series keyed by SKU, check, metric, unit and the labels not `folded`."""
        self.start_node(node)
        raw_cols = self._raw.get(sku)
        if raw_cols is None:
            raw_cols = self._raw[sku] = {}
        node_index, again = self._node, self._node_was_seen
        for check, name, unit, labels, value in rows:
            raw = (check, name, unit, *labels.items())  # the labels as they came, unfolded
            got = raw_cols.get(raw)
            if got is None:
                lab = tuple((k, str(v)) for k, v in labels.items() if k not in folded)
                col = self._column(SeriesKey(sku, check, name, unit, tuple(sorted(lab))))
                got = raw_cols[raw] = (col, col.nodes, col.nodes.append, col.values.append)
            col, nodes, add_node, add_value = got
            if nodes and nodes[-1] != node_index and not again:
                add_node(node_index)  # the common case, inline
                add_value(value)
            else:
                self._append(col, value)

    def _fold(self) -> None:
        """Each node's repeated values in a series, averaged in the order they came."""
        for (key, pos), values in self._repeats.items():
            self._cols[key].values[pos] = sum(values) / len(values)
        self._repeats = {}

    def parts(self) -> Columns:
        """The columns so far (repeats averaged), to merge into another builder: the node names, and
        per series its key, node indices and values as bytes (a few bytes a value to send)."""
        self._fold()
        return tuple(self._names), [(k, c.nodes.tobytes(), c.values.tobytes()) for k, c in self._cols.items()]

    def merge(self, parts: Columns) -> None:
        """Another builder's parts, as if its nodes came now; each of them must be new here (a node
        twice in a fleet averages across both, which only add_rows does)."""
        names, cols = parts
        offset = len(self._names)
        for name in names:
            if name in self._index:
                raise ValueError(f"node {name} is in two parts")
            self._index[name] = len(self._names)
            self._names.append(name)
        for key, nodes, values in cols:
            col = self._column(key)
            col.nodes.frombytes((np.frombuffer(nodes, dtype=np.int32) + np.int32(offset)).tobytes())
            col.values.frombytes(values)

    def table(self) -> SeriesTable:
        self._fold()
        cols = {k: (np.frombuffer(c.nodes, dtype=np.int32), np.frombuffer(c.values, dtype=np.float64))
                for k, c in self._cols.items()}
        return SeriesTable(tuple(self._names), cols)


class SeriesTable(Mapping[SeriesKey, Mapping[str, float]]):
    """Read-only series: `table[key]` is a new {node: value} dict; `arrays(key)` the columns."""

    def __init__(self, names: tuple[str, ...], cols: Mapping[SeriesKey, tuple[np.ndarray, np.ndarray]]):
        self._names = names
        self._cols = cols

    def __getitem__(self, key: SeriesKey) -> dict[str, float]:
        nodes, values = self._cols[key]
        names = self._names
        return {names[i]: v for i, v in zip(nodes.tolist(), values.tolist(), strict=True)}

    def __iter__(self) -> Iterator[SeriesKey]:
        return iter(self._cols)

    def __len__(self) -> int:
        return len(self._cols)

    @property
    def names(self) -> tuple[str, ...]:
        """Node names by node index."""
        return self._names

    def arrays(self, key: SeriesKey) -> tuple[np.ndarray, np.ndarray]:
        """The node indices (into `names`) and values of one series, in the order the nodes came."""
        return self._cols[key]

    @property
    def values_held(self) -> int:
        return sum(len(v) for _, v in self._cols.values())

    def outliers(self, better: Callable[[SeriesKey], str], threshold: float = stats.DEFAULT_THRESHOLD,
                 min_nodes: int = stats.DEFAULT_MIN_NODES,
                 min_rel: float = stats.DEFAULT_MIN_REL) -> list[Outlier]:
        """stats.find_outliers of every series: the farthest first."""
        out: list[Outlier] = []
        for key in sorted(self._cols):
            nodes, values = self._cols[key]
            out += stats.column_outliers(key, self._names, nodes, values, better(key), threshold, min_nodes,
                                         min_rel)
        out.sort(key=lambda o: (-abs(o.z), o.node, o.key))
        return out
