"""Where rows come from: a run directory, a fleet directory or a Kubernetes results volume (each
node's latest run, as the fleet report reads it: harness.fleet.layout) or the history store (every
recorded run, or one node's).

A source is a function returning a fresh iterator, so a writer can read it twice (once for the
label columns, once for the rows) without holding a fleet's rows in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from harness import results
from harness.errors import UsageError
from harness.export.rows import Row, record_rows, stored_rows
from harness.fleet import layout
from harness.fleet.collect import load_record
from harness.history.store import Store

Source = Callable[[], Iterator[Row]]


def kind_of(path: Path) -> str:
    """'run' for a run directory, 'fleet' for a fleet directory or a results volume; UsageError for
    anything else."""
    if (path / results.RESULTS).is_file():
        return "run"
    if (path / layout.MANIFEST).is_file() or layout.volume_manifest(path) is not None:
        return "fleet"
    raise UsageError(f"{path}: neither a run directory (no {results.RESULTS}) nor a fleet directory "
                     f"(no {layout.MANIFEST}) nor a results volume (no <node>/<run>/{results.RESULTS})")


def run_source(run_dir: Path) -> Source:
    """The rows of one run (its results.json is read and validated now, so errors come first)."""
    record = results.load(run_dir)
    return lambda: record_rows(record)


def fleet_source(fleet_dir: Path, problems: list[str]) -> Source:
    """Each node's latest run, named as the fleet names it (a results volume's nodes are its folders,
    never followed through a symlink); a node without a readable run adds a line to `problems` (once)."""
    manifest = layout.load_manifest(fleet_dir)
    volume = layout.is_volume(manifest)
    dirs = {n: d[-1] for n in manifest.nodes if (d := layout.run_dirs(fleet_dir, n, volume))}
    for n in manifest.nodes:
        if n not in dirs:  # a volume's symlinked node folder: the reason it is refused
            job = manifest.jobs.get(n)
            why = job.submit_error if volume and job is not None and job.submit_error else ""
            problems.append(f"{n}: {why or 'no run directory'}")
    reported: set[str] = set()

    def rows() -> Iterator[Row]:
        for node, run_dir in dirs.items():
            record, problem = load_record(run_dir)
            if record is None:
                if node not in reported:
                    reported.add(node)
                    problems.append(f"{node}: {problem or 'unreadable results.json'}")
                continue
            yield from record_rows(record, node)

    return rows


def history_source(store: Store, node: str | None) -> Source:
    """Every run in the store, or the runs of NODE (hostname, serial or id), oldest first per node."""
    if node is not None:
        found = store.find_node(node)
        if found is None:
            raise UsageError(f"no node {node!r} in the history store")
        nodes = [found]
    else:
        nodes = store.nodes()

    def rows() -> Iterator[Row]:
        for n in nodes:
            runs = store.runs(n.node_id)
            metrics = store.metrics([r.run_id for r in runs])
            for r in runs:
                yield from stored_rows(r.hostname, r.identity.system_serial, r.run_id, r.started, r.suite,
                                       r.profile, r.verdict, metrics[r.run_id])

    return rows


def path_source(path: Path, problems: list[str]) -> Source:
    """A run or a fleet directory, whichever `path` is."""
    if not path.is_dir():
        raise UsageError(f"{path}: no such directory")
    return run_source(path) if kind_of(path) == "run" else fleet_source(path, problems)
