"""A fleet directory: good nodes and bad ones (an edited results.json or raw text), its manifest and jobs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleet_samples import record

from harness import results
from harness.fleet import layout
from harness.fleet.layout import Manifest, NodeJob, SeenJob
from harness.fleet.slurmtext import JobInfo

Edit = Callable[[dict[str, Any]], None]


def node_run_dir(fleet: Path, node: str) -> Path:
    return layout.node_dir(fleet, node) / f"{node}-20261129T100000Z"


def make_fleet(fleet: Path, bad: dict[str, Edit | str]) -> None:
    """Four good nodes and the `bad` ones: an edit of a valid results.json, or raw text."""
    nodes = [*(f"n{i}" for i in range(4)), *bad]
    for node in nodes:
        d = node_run_dir(fleet, node)
        d.mkdir(parents=True)
        results.write(d, record(node, 100.0))
        change = bad.get(node)
        if isinstance(change, str):
            (d / "results.json").write_text(change)
        elif change is not None:
            doc = json.loads((d / "results.json").read_text())
            change(doc)
            (d / "results.json").write_text(json.dumps(doc))
    jobs = {n: NodeJob(n, str(i)) for i, n in enumerate(nodes, 1)}
    layout.save_manifest(fleet, Manifest("/s.yaml", "tamper", None, tuple(nodes), "2026-11-29T10:00:00Z",
                                         jobs))
    layout.save_jobs(fleet, {n: SeenJob(JobInfo(j.job_id or "", "COMPLETED", "", n, "h", 0, 0),
                                        "2026-11-29T10:01:00Z") for n, j in jobs.items()})
