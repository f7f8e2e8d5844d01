"""Blocks of same-shaped nodes give the very columns a row-by-row read gives: shapes interleaved,
more shapes than are kept, repeats within a node, a node seen twice, and parts merged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.fleet import columns
from harness.fleet.columns import NodeMetrics, SeriesBuilder, rows_of
from harness.fleet.stats import SeriesKey, group

FOLDED = frozenset({"repeat"})
SKUS = ("8x H100", "8x H200")
# (check, name, unit, labels): a few series, two of them the same once `repeat` is folded
SERIES = [("nccl", "nccl.busbw", "GB/s", {"op": "all_reduce"}),
          ("nccl", "nccl.busbw", "GB/s", {"op": "all_gather"}),
          ("fio", "fio.iops", "IOPS", {"job": "r", "repeat": 0}),
          ("fio", "fio.iops", "IOPS", {"job": "r", "repeat": 1}),
          ("gemm", "gpu.tflops", "TFLOPS", {"gpu": 3}),
          ("gemm", "gpu.tflops", "TFLOPS", {})]


def node_metrics(picks: list[tuple[int, float]]) -> NodeMetrics:
    """Metrics by check, in the order picked (a check may come twice, as results.json allows)."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for i, value in picks:
        check, name, unit, labels = SERIES[i]
        m: dict[str, Any] = {"name": name, "value": value, "unit": unit}
        if labels:
            m["labels"] = labels
        if out and out[-1][0] == check:
            out[-1][1].append(m)
        else:
            out.append((check, [m]))
    return out


def reference(nodes: list[tuple[str, str, NodeMetrics]]) -> dict[SeriesKey, dict[str, float]]:
    """stats.group of every row, the plain algorithm."""
    samples = []
    for node, sku, metrics in nodes:
        for check, name, unit, labels, value in rows_of(metrics):
            lab = tuple(sorted((k, str(v)) for k, v in labels.items() if k not in FOLDED))
            samples.append((SeriesKey(sku, check, name, unit, lab), node, value))
    return group(samples)


def as_dicts(b: SeriesBuilder) -> dict[SeriesKey, dict[str, float]]:
    table = b.table()
    return {k: table[k] for k in table}


shapes = st.lists(st.lists(st.tuples(st.integers(0, len(SERIES) - 1),
                                     st.floats(-1e6, 1e6, allow_nan=False)), max_size=6),
                  min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 14), st.integers(0, 1), st.integers(0, 11),
                          st.floats(0.5, 2.0)), min_size=1, max_size=40),
       shapes, st.integers(1, 5))
def test_blocks_give_the_columns_of_the_plain_rule(arrivals, shape_list, split):
    """Nodes of random shapes (picked from a few, so most repeat one), in random order, some named
    twice; then the same nodes as parts of `split` builders merged: every value as stats.group has it,
    each series in the order its nodes first came."""
    nodes = []
    for node, sku, shape, scale in arrivals:
        picks = shape_list[shape % len(shape_list)]
        nodes.append((f"n{node}", SKUS[sku], node_metrics([(i, v * scale) for i, v in picks])))
    b = SeriesBuilder()
    for node, sku, metrics in nodes:
        b.add_metrics(node, sku, metrics, FOLDED)
    want = reference(nodes)
    got = as_dicts(b)
    assert got == want
    names = [n for n, _, _ in nodes]
    came = list(dict.fromkeys(names))  # each series in the order its nodes first came
    assert all(list(got[k]) == [n for n in came if n in want[k]] for k in want)
    if len(set(names)) != len(names):
        return  # parts hold distinct nodes (the pool reads such a fleet in-process)
    merged, size = SeriesBuilder(), -(-len(nodes) // split)
    for i in range(0, len(nodes), size):
        part = SeriesBuilder()
        for node, sku, metrics in nodes[i:i + size]:
            part.add_metrics(node, sku, metrics, FOLDED)
        merged.merge(part.parts())
    assert as_dicts(merged) == want and list(merged.table()) == list(b.table())


def test_same_shaped_nodes_share_one_block_and_repeats_average_in_order():
    b = SeriesBuilder()
    for n in range(5):
        b.add_metrics(f"n{n}", SKUS[0], node_metrics([(2, 10.0 + n), (3, 20.0 + n), (0, 1.0)]), FOLDED)
    assert len(b._blocks) == 1 and len(b._blocks[0].nodes) == 5
    table = b.table()
    (iops,) = [k for k in table if k.metric == "fio.iops"]
    assert table[iops] == {f"n{n}": (10.0 + n + 20.0 + n) / 2 for n in range(5)}


def test_a_node_seen_twice_averages_across_both_though_the_first_sat_in_a_block():
    b = SeriesBuilder()
    b.add_metrics("a", SKUS[0], node_metrics([(0, 1.0), (4, 7.0)]), FOLDED)
    b.add_metrics("b", SKUS[0], node_metrics([(0, 5.0), (4, 9.0)]), FOLDED)
    b.add_metrics("a", SKUS[0], node_metrics([(0, 3.0)]), FOLDED)
    table = b.table()
    (bw,) = [k for k in table if k.metric == "nccl.busbw"]
    (tf,) = [k for k in table if k.metric == "gpu.tflops"]
    assert table[bw] == {"a": 2.0, "b": 5.0} and table[tf] == {"a": 7.0, "b": 9.0}


def test_more_shapes_than_are_kept_go_row_by_row(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(columns, "MAX_SHAPES", 2)
    b = SeriesBuilder()
    nodes = [(f"n{i}", SKUS[0], node_metrics([(i % 4, float(i)), (5, 2.0 * i)])) for i in range(12)]
    for node, sku, metrics in nodes:
        b.add_metrics(node, sku, metrics, FOLDED)
    assert len(b._blocks) == 2
    assert as_dicts(b) == reference(nodes)
