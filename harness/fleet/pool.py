"""A large fleet's nodes read in a pool of processes, in chunks, merged in manifest order.

Each worker reads a chunk of nodes as collect.stream does (collect.node_outcome: the bounded,
compiled read and the judgement), and builds what the report keeps of them (analysis.FleetBuilder:
the junit suites, the directions the expectations imply, the series columns); the parent merges
the chunks in order, so the report is the one the in-process stream gives. Memory stays flat: a
worker holds one chunk's runs at a time, at most two chunks a worker are in flight, and what comes
back is columns (12 bytes a value) and outcomes without their runs.

A fleet of fewer than POOL_MIN nodes, a machine with one CPU, or a manifest that names a node twice
is read in-process: starting workers costs more than it saves there.
"""

from __future__ import annotations

import gc
import os
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from harness.fleet import analysis, collect
from harness.fleet.layout import Manifest, SeenJob

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

POOL_MIN = 400  # nodes read in-process below this
CHUNK = 50  # nodes a task
_job: tuple[Path, Manifest, Mapping[str, SeenJob], bool] | None = None  # the fork's copy of the work


def workers(manifest: Manifest) -> int:
    """Processes to read the fleet with: 1 (in-process), or min(CPUs, chunks)."""
    nodes = manifest.nodes
    if len(nodes) < POOL_MIN or len(set(nodes)) != len(nodes):
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, -(-len(nodes) // CHUNK)))


def _chunk(nodes: Sequence[str]) -> analysis.Part:
    assert _job is not None
    fleet_dir, manifest, seen, junit = _job
    b = analysis.FleetBuilder(junit=junit)
    for node in nodes:
        b.add(*collect.node_outcome(fleet_dir, manifest, seen, node))
    return b.part()


@contextmanager
def no_collector() -> Iterator[None]:
    """Python's cyclic garbage collector off while nodes are read. A node's documents hold no cycle
    (reference counts free them as each node is let go), but the collector's passes over every
    object allocated meanwhile cost as much as the reading itself (1,000 SuperBench-shaped nodes:
    json.loads 2.8 -> 1.4 ms a node, the compiled pass 2.0 -> 1.4, the rows 0.86 -> 0.22)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def build(fleet_dir: Path, manifest: Manifest, seen: Mapping[str, SeenJob],
          junit: bool = True) -> analysis.FleetBuilder:
    """A FleetBuilder holding every node of the fleet, read by `workers(manifest)` processes."""
    n = workers(manifest)
    with no_collector():
        pooled = _pooled(fleet_dir, manifest, seen, junit, n) if n > 1 else None
        if pooled is not None:
            return pooled
        b = analysis.FleetBuilder(junit=junit)
        for outcome, metrics in collect.stream(fleet_dir, manifest, seen):
            b.add(outcome, metrics)
        return b


def _pooled(fleet_dir: Path, manifest: Manifest, seen: Mapping[str, SeenJob], junit: bool,
            n: int) -> analysis.FleetBuilder | None:
    """The fleet read by `n` forked workers; None when a worker died or none could start."""
    # start-up: a small fleet never loads the process machinery
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    global _job
    _job = (fleet_dir, manifest, seen, junit)
    b = analysis.FleetBuilder(junit=junit)
    try:
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork")) as ex:
            for part in _in_order(ex, _chunks(manifest.nodes), window=2 * n):
                b.merge(part)
    except (BrokenProcessPool, OSError):
        return None
    finally:
        _job = None
    return b


def _chunks(nodes: Sequence[str]) -> Iterator[Sequence[str]]:
    for i in range(0, len(nodes), CHUNK):
        yield nodes[i:i + CHUNK]


def _in_order(ex: ProcessPoolExecutor, chunks: Iterator[Sequence[str]],
              window: int) -> Iterator[analysis.Part]:
    """Each chunk's part, in order, with at most `window` chunks submitted and not yet merged."""
    pending: deque[Future[analysis.Part]] = deque()
    for chunk in chunks:
        pending.append(ex.submit(_chunk, chunk))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()
