"""`harness export` of a Kubernetes results volume (VOLUME/<node>/<run>/results.json, as `harness
fleet report` reads it: harness.fleet.layout): each node's latest run, and neither a symlinked node
folder nor a symlinked run in a node's folder is followed."""

from __future__ import annotations

import csv
from pathlib import Path

from clihelp import harness
from fleet_samples import record as node_record

from harness import results


def _run(base: Path, node: str, when: str, bw: float) -> Path:
    d = base / f"{node}-{when}"
    d.mkdir(parents=True)
    results.write(d, node_record(node, bw))
    return d


def test_a_results_volume_exports_each_nodes_latest_own_run(tmp_path: Path):
    volume = tmp_path / "volume"
    for n in ("gpu001", "gpu002"):
        _run(volume / n, n, "20261128T100000Z", 10.0)
        _run(volume / n, n, "20261129T100000Z", 100.0)
    elsewhere = tmp_path / "elsewhere"
    _run(elsewhere / "gpu001", "gpu001", "20261201T100000Z", 7.0)
    linked = elsewhere / "gpu001" / "gpu001-20261201T100000Z"
    (volume / "gpu001" / "gpu001-20261130T100000Z").symlink_to(linked)  # a newer run that is a link
    (volume / "gpu003").symlink_to(elsewhere / "gpu001")  # a node's folder that is a link: refused
    out = tmp_path / "volume.csv"
    r = harness("export", str(volume), "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = list(csv.DictReader(out.open()))
    assert sorted({row["node"] for row in rows}) == ["gpu001", "gpu002"]
    bw = {(row["node"], float(row["value"])) for row in rows if row["metric"] == "app.bw"}
    assert bw == {("gpu001", 100.0), ("gpu002", 100.0)}  # the latest own run: not 10, not the linked 7
    assert f"warning: gpu003: {volume / 'gpu003'} is a symlink, not the node's own folder" in r.stderr


def test_a_directory_that_is_neither_says_what_was_looked_for(tmp_path: Path):
    empty = tmp_path / "empty"
    (empty / "gpu001").mkdir(parents=True)
    r = harness("export", str(empty), "-o", str(tmp_path / "x.csv"))
    assert r.returncode == 2 and "nor a results volume" in r.stderr, r.stdout + r.stderr
    assert not (tmp_path / "x.csv").exists()
