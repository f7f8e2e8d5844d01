"""Every series of a fleet as columns: per series, the node indices and float64 values, nothing else.

A fleet report streams its nodes: each node's samples are appended once and its run is let go,
so memory grows with the number of values (12 bytes each), not with whole RunRecords. A node's
repeated values in one series are averaged, in the order they came, as stats.group does.

Nodes of one SKU mostly report the very same metrics in the very same order. `add_metrics` keeps
such nodes as a block, one row of values a node, found by comparing the node's (check, name, unit,
labels) list with the shapes seen before (one C-level list comparison, no lookup per value); the
blocks become columns when the table is frozen or the parts are sent. A node whose shape is new is
resolved once, row by row; one seen twice in a fleet is added row by row.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
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
# a node's metrics as the fleet reads them: per check its id and its metrics as dicts (name, value,
# unit and, when it has any, labels), as results.json spells them
NodeMetrics = Sequence[tuple[str, Sequence[Mapping[str, Any]]]]
# SeriesBuilder.parts: node names, (key, int32 node indices, float64 values) per series, and per
# block its keys by position, int32 node indices and float64 values (a row a node)
Columns = tuple[tuple[str, ...], list[tuple[SeriesKey, bytes, bytes]],
                list[tuple[tuple[SeriesKey, ...], bytes, bytes]]]
MAX_SHAPES = 8  # block shapes kept a SKU; a node of yet another shape goes row by row
_NO_LABELS: Mapping[str, Any] = MappingProxyType({})


def rows_of(metrics: NodeMetrics) -> Iterator[Row]:
    """A node's metrics as rows, in check and metric order."""
    for check, ms in metrics:
        for m in ms:
            yield check, m["name"], m["unit"], m.get("labels", _NO_LABELS), m["value"]


def _shape(metrics: NodeMetrics) -> list[tuple[str, str, str, Any]]:
    """What makes two nodes' metrics land in the same columns: (check, name, unit, labels) by position."""
    return [(check, m["name"], m["unit"], m.get("labels")) for check, ms in metrics for m in ms]


@dataclass
class _Block:
    """Nodes whose metrics came with the same keys in the same order: a row of values a node."""

    keys: tuple[SeriesKey, ...]  # by position
    nodes: array  # int32 node indices
    values: array  # float64, len(keys) a node


class SeriesBuilder:
    """Appends (series key, node, value) samples node by node; `table()` freezes them."""

    def __init__(self) -> None:
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._cols: dict[SeriesKey, _Column] = {}
        # by SKU, (check, name, unit, *labels) as they came -> the column and its appenders
        self._raw: dict[str, dict[tuple[object, ...], tuple[_Column, array, Any, Any]]] = {}
        self._repeats: dict[tuple[SeriesKey, int], list[float]] = {}  # (key, position) -> values
        self._shapes: dict[str, list[tuple[list[Any], _Block]]] = {}  # by SKU, the latest first
        self._blocks: list[_Block] = []
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

    def _raw_column(self, raw_cols: dict[tuple[object, ...], tuple[_Column, array, Any, Any]], sku: str,
                    check: str, name: str, unit: str, labels: Mapping[str, Any],
                    folded: frozenset[str]) -> tuple[_Column, array, Any, Any]:
        raw = (check, name, unit, *labels.items())  # the labels as they came, unfolded
        got = raw_cols.get(raw)
        if got is None:
            lab = tuple((k, str(v)) for k, v in labels.items() if k not in folded)
            col = self._column(SeriesKey(sku, check, name, unit, tuple(sorted(lab))))
            got = raw_cols[raw] = (col, col.nodes, col.nodes.append, col.values.append)
        return got

    def add_rows(self, node: str, sku: str, rows: Iterable[Row],
                 folded: frozenset[str] = frozenset()) -> None:
        """One node's metrics: series keyed by SKU, check, metric, unit and the labels not `folded`."""
        self.start_node(node)
        if self._node_was_seen:
            self._flush()  # its earlier values may sit in a block
        raw_cols = self._raw.setdefault(sku, {})
        node_index, again = self._node, self._node_was_seen
        for check, name, unit, labels, value in rows:
            got = raw_cols.get((check, name, unit, *labels.items()))
            if got is None:
                got = self._raw_column(raw_cols, sku, check, name, unit, labels, folded)
            col, nodes, add_node, add_value = got
            if nodes and nodes[-1] != node_index and not again:
                add_node(node_index)  # the common case, inline
                add_value(value)
            else:
                self._append(col, value)

    def add_metrics(self, node: str, sku: str, metrics: NodeMetrics,
                    folded: frozenset[str] = frozenset()) -> None:
        """add_rows of a node's metrics as results.json holds them; a node of a shape seen before
        is one row appended to that shape's block."""
        if node in self._index:
            self.add_rows(node, sku, rows_of(metrics), folded)
            return
        shape = _shape(metrics)
        shapes = self._shapes.setdefault(sku, [])
        block = next((b for s, b in shapes if s == shape), None)
        if block is None:
            if len(shapes) >= MAX_SHAPES:
                self.add_rows(node, sku, rows_of(metrics), folded)
                return
            raw_cols = self._raw.setdefault(sku, {})
            keys = tuple(self._raw_column(raw_cols, sku, *row[:4], folded)[0].key for row in rows_of(metrics))
            block = _Block(keys, array("i"), array("d"))
            shapes.insert(0, (shape, block))
            self._blocks.append(block)
        self.start_node(node)
        block.nodes.append(self._node)
        block.values.extend([m["value"] for _, ms in metrics for m in ms])

    def _flush(self) -> None:
        """Every block's values into the columns; the blocks are let go."""
        for block in self._blocks:
            self._unblock(block.keys, block.nodes, block.values)
        self._blocks, self._shapes = [], {}

    def _unblock(self, keys: tuple[SeriesKey, ...], nodes: array | bytes, values: array | bytes,
                 offset: int = 0) -> None:
        """A block's rows (node indices + `offset`) appended to the columns by position. A key at
        several positions is a node's repeats: kept as add_rows keeps them, averaged by _fold, so a
        node seen again later averages across every value. No node of a block is in a column yet
        (add_rows flushes the blocks before it adds a node seen before)."""
        if not keys or not nodes:
            return
        ids = (np.frombuffer(nodes, dtype=np.int32) + np.int32(offset)).tobytes()
        rows = np.frombuffer(values, dtype=np.float64).reshape(-1, len(keys))
        where: dict[SeriesKey, list[int]] = {}
        for pos, key in enumerate(keys):
            where.setdefault(key, []).append(pos)
        for key, positions in where.items():
            col = self._column(key)
            start = len(col.values)
            col.nodes.frombytes(ids)
            col.values.frombytes(rows[:, positions[-1]].tobytes())
            if len(positions) > 1:
                for i, repeats in enumerate(rows[:, positions].tolist(), start):
                    self._repeats[(key, i)] = repeats

    def _fold(self) -> None:
        """Each node's repeated values in a series, averaged in the order they came."""
        for (key, pos), values in self._repeats.items():
            self._cols[key].values[pos] = sum(values) / len(values)
        self._repeats = {}

    def parts(self) -> Columns:
        """What this builder holds, to merge into another: the node names; per series (in the order
        they came) its key, node indices and values as bytes (repeats averaged); and the blocks."""
        self._fold()
        cols = [(k, c.nodes.tobytes(), c.values.tobytes()) for k, c in self._cols.items()]
        blocks = [(b.keys, b.nodes.tobytes(), b.values.tobytes()) for b in self._blocks]
        return tuple(self._names), cols, blocks

    def merge(self, parts: Columns) -> None:
        """Another builder's parts, as if its nodes came now; each of them must be new here (a node
        twice in a fleet averages across both, which only add_rows does)."""
        names, cols, blocks = parts
        offset = len(self._names)
        for name in names:
            if name in self._index:
                raise ValueError(f"node {name} is in two parts")
            self._index[name] = len(self._names)
            self._names.append(name)
        self._flush()
        for key, nodes, values in cols:
            col = self._column(key)
            if nodes:
                col.nodes.frombytes((np.frombuffer(nodes, dtype=np.int32) + np.int32(offset)).tobytes())
                col.values.frombytes(values)
        for keys, nodes, values in blocks:
            self._unblock(keys, nodes, values, offset)

    def table(self) -> SeriesTable:
        """The columns so far, each in the order its nodes first came (their indices)."""
        self._flush()
        self._fold()
        cols = {}
        for k, c in self._cols.items():
            nodes = np.frombuffer(c.nodes, dtype=np.int32)
            values = np.frombuffer(c.values, dtype=np.float64)
            if len(nodes) > 1 and bool((nodes[1:] < nodes[:-1]).any()):  # blocks flushed one after another
                order = np.argsort(nodes, kind="stable")
                nodes, values = nodes[order], values[order]
            cols[k] = (nodes, values)
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
