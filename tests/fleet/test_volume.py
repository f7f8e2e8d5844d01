"""A Kubernetes results volume is read as a Slurm fleet's node files are: a node's folder (or a run
in it) reached through a symlink is never followed, and a symlinked node folder is one ERRORED node
with its reason, not another directory's runs passed off as the node's (issue #26.2).

As root, with the link planted by the unprivileged user 'nobody' in a volume anyone may write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from clihelp import ROOT
from fleet_samples import record
from trusthelp import link, shared_dir, uid

from harness import results
from harness.fleet import layout

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="plants a link as another user: needs root")


@pytest.fixture()
def volume() -> Iterator[Path]:
    """A results volume anyone may write in (a shared scratch), removed afterwards."""
    with shared_dir("harness-volume-") as d:
        yield d


def _run(base: Path, node: str, bw: float) -> Path:
    run_dir = base / f"{node}-20261129T100000Z"
    run_dir.mkdir(parents=True)
    results.write(run_dir, record(node, bw))
    return run_dir


@as_root
def test_a_symlinked_node_folder_planted_by_another_user_is_refused_by_name(volume: Path, tmp_path: Path):
    _run(volume / "gpu001", "gpu001", 100.0)
    private = tmp_path / "root-only"  # root's own runs elsewhere: an accepted one
    _run(private, "gpu002", 100.0)
    private.chmod(0o700)
    link(volume, "gpu002", private)
    assert (volume / "gpu002").lstat().st_uid == uid()
    r = subprocess.run([sys.executable, "-m", "harness", "fleet", "report", str(volume)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stdout + r.stderr  # one node ERRORED
    fleet = json.loads((volume / "fleet.json").read_text())
    nodes = {n["node"]: n for n in fleet["nodes"]}
    assert set(nodes) == {"gpu001", "gpu002"}
    assert nodes["gpu001"]["status"] == "ACCEPTED"
    assert nodes["gpu002"]["status"] == "ERRORED" and not nodes["gpu002"].get("run_dir")
    why = f"{volume / 'gpu002'} is a symlink, not the node's own folder"
    assert why in nodes["gpu002"]["reason"] and why in r.stdout


def test_a_symlinked_run_or_results_file_in_a_node_folder_is_not_a_run(tmp_path: Path) -> None:
    elsewhere = _run(tmp_path / "elsewhere", "gpu001", 100.0)
    node = tmp_path / "volume" / "gpu001"
    node.mkdir(parents=True)
    (node / "gpu001-20261130T100000Z").symlink_to(elsewhere)
    linked = node / "gpu001-20261201T100000Z"
    linked.mkdir()
    (linked / "results.json").symlink_to(elsewhere / "results.json")
    assert layout.run_dirs(tmp_path / "volume", "gpu001", volume=True) == []
    assert layout.volume_manifest(tmp_path / "volume") is None  # no node: nothing that is its own
    own = _run(node, "gpu001", 100.0)
    assert layout.run_dirs(tmp_path / "volume", "gpu001", volume=True) == [own]
    manifest = layout.volume_manifest(tmp_path / "volume")
    assert manifest is not None and manifest.nodes == ("gpu001",) and manifest.suite_name == "fleet-test"
