"""Issue #30: a large fleet is read in a pool of processes, in chunks merged in manifest order; the
outputs are the very ones of the in-process stream (fleet.json, junit.xml, fleet.html, Prometheus,
the series' floats), broken and tampered nodes included, and a small fleet never starts a worker."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from typing import Any

import pytest
from streamfleet import make_fleet, report_outputs

from harness.fleet import collect, commands, dispatch, pool
from harness.fleet.layout import load_manifest


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(dispatch, "utcnow", lambda: "2026-11-30T00:00:00Z")
    root = tmp_path / "fleet"
    make_fleet(root, 24)
    return root


def _force_pool(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(pool, "POOL_MIN", 2)
    monkeypatch.setattr(pool, "CHUNK", chunk)
    monkeypatch.setattr(pool.os, "sched_getaffinity", lambda _pid: {0, 1})


@pytest.mark.parametrize("chunk", [1, 4, 7])
def test_a_pooled_read_gives_the_outputs_of_the_in_process_one(fleet: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch, chunk: int):
    alone = report_outputs(fleet, tmp_path / "alone")
    series = dict(commands.analyse_dir(fleet, poll=False).series)
    _force_pool(monkeypatch, chunk)
    assert pool.workers(load_manifest(fleet)) == 2
    calls: list[int] = []
    real = pool._pooled

    def counting(*a: Any) -> Any:
        calls.append(1)
        return real(*a)

    monkeypatch.setattr(pool, "_pooled", counting)
    assert report_outputs(fleet, tmp_path / "pooled") == alone
    assert dict(commands.analyse_dir(fleet, poll=False).series) == series
    assert calls == [1, 1]  # the pool did read them


def test_a_small_fleet_is_read_in_process(fleet: Path, monkeypatch: pytest.MonkeyPatch):
    assert pool.workers(load_manifest(fleet)) == 1  # 29 nodes: below POOL_MIN

    def refused(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a worker started for a small fleet")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", refused)
    rep = commands.analyse_dir(fleet, poll=False)
    assert len(rep.nodes) == 29


def test_a_dead_worker_falls_back_to_the_in_process_read(fleet: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    alone = report_outputs(fleet, tmp_path / "alone")
    _force_pool(monkeypatch, 5)
    real = collect.node_outcome

    def dying(*a: Any) -> Any:
        import os
        if a[-1] == "n010" and os.getpid() != parent:
            os._exit(9)  # a worker killed (the OOM killer, say) mid-chunk
        return real(*a)

    parent = __import__("os").getpid()
    monkeypatch.setattr(collect, "node_outcome", dying)
    assert report_outputs(fleet, tmp_path / "pooled") == alone


def test_the_heatmap_and_junit_are_written_a_node_at_a_time(fleet: Path):
    """Memory flat in the nodes: a heatmap row and a node's junit suite are each built as they are
    written, never the whole heatmap or file as one string (a macro would build it whole)."""
    from harness.fleet import report as fleet_report

    rep = commands.analyse_dir(fleet, poll=False)
    chunks = list(fleet_report.html_chunks(rep))
    assert sum(c.count('<g transform="translate(0,') for c in chunks) >= 20  # the heatmap's rows
    assert max(c.count('<g transform="translate(0,') for c in chunks) == 1
    parts = list(fleet_report.junit_chunks(rep))
    assert max(p.count("<testsuite ") for p in parts) == 1 and len(parts) >= len(rep.nodes)
    assert "".join(parts) == fleet_report.render_junit(rep)
