"""A large fleet's fleet.html is rendered by a forked child beside fleet.json and junit.xml
(report.write, platform.forked): the files are those the parent alone writes, and a child that
fails, overruns or cannot start leaves the rendering to the parent, with no child or temporary
file left behind."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fleet_samples import outcome, record

from harness.fleet import report as fleet_report
from harness.fleet.analysis import analyse
from harness.fleet.collect import NodeStatus
from harness.platform import forked

NAMES = ("fleet.json", "junit.xml", "fleet.html")


def sample(n: int = 30):
    outs = [outcome(f"n{i:02d}", record(f"n{i}", 100.0 + i % 3)) for i in range(n)]
    outs[3] = outcome("n03", record("n03", 55.0))  # an outlier
    outs[4] = outcome("n04", record("n04", 20.0))  # fails
    outs.append(outcome("n99", None, NodeStatus.ERRORED, "job 7 ended NODE_FAIL"))
    return analyse(outs, suite="acceptance", profile="lenient", submitted="2026-11-29T10:00:00Z",
                   generated="2026-11-29T10:05:00Z")


def files(d: Path) -> dict[str, bytes]:
    return {n: (d / n).read_bytes() for n in NAMES}


def renderers(monkeypatch: pytest.MonkeyPatch, log: Path, child: str = "") -> None:
    """html_chunks logs the pid that renders; in the child it may fail or hang."""
    real, parent = fleet_report.html_chunks, os.getpid()

    def html_chunks(rep):
        with log.open("a") as f:
            f.write(f"{os.getpid()}\n")
        if os.getpid() != parent and child == "fail":
            raise RuntimeError("the child's rendering broke")
        if os.getpid() != parent and child == "hang":
            time.sleep(60)
        return real(rep)

    monkeypatch.setattr(fleet_report, "html_chunks", html_chunks)


def pids(log: Path) -> list[int]:
    return [int(x) for x in log.read_text().split()]


def no_child_left() -> None:
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


@pytest.fixture
def alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """The files the parent writes alone (fewer nodes than ASIDE_MIN)."""
    d = tmp_path / "alone"
    d.mkdir()
    monkeypatch.setattr(fleet_report, "ASIDE_MIN", 10**9)
    fleet_report.write(d, sample())
    return files(d)


def forking(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork allowed although pytest may keep another thread alive (test_no_fork_beside_another_thread
    holds the real rule); the child is bounded by ASIDE_TIMEOUT_S all the same."""
    monkeypatch.setattr(fleet_report, "ASIDE_MIN", 1)
    monkeypatch.setattr(forked, "forkable", lambda: True)
    monkeypatch.setattr(fleet_report, "ASIDE_TIMEOUT_S", 30.0)


def test_the_child_renders_the_same_html(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alone):
    forking(monkeypatch)
    renderers(monkeypatch, tmp_path / "log")
    d = tmp_path / "aside"
    d.mkdir()
    fleet_report.write(d, sample())
    assert pids(tmp_path / "log") != [os.getpid()] and len(pids(tmp_path / "log")) == 1
    assert files(d) == alone
    assert sorted(p.name for p in d.iterdir()) == sorted(NAMES)
    no_child_left()


@pytest.mark.parametrize("how", ["fail", "hang"])
def test_a_child_that_fails_or_hangs_leaves_it_to_the_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            alone, how: str):
    forking(monkeypatch)
    monkeypatch.setattr(fleet_report, "ASIDE_TIMEOUT_S", 0.5)
    renderers(monkeypatch, tmp_path / "log", child=how)
    d = tmp_path / "aside"
    d.mkdir()
    fleet_report.write(d, sample())
    seen = pids(tmp_path / "log")
    assert len(seen) == 2 and seen[0] != os.getpid() and seen[1] == os.getpid()
    assert files(d) == alone
    assert sorted(p.name for p in d.iterdir()) == sorted(NAMES)  # no temporary file left
    no_child_left()


def test_the_child_is_stopped_when_the_parent_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    forking(monkeypatch)
    renderers(monkeypatch, tmp_path / "log", child="hang")

    def broken(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fleet_report, "atomic_write_json", broken)
    with pytest.raises(OSError, match="No space"):
        fleet_report.write(tmp_path, sample())
    assert list(tmp_path.glob("fleet*")) == [] and not (tmp_path / "junit.xml").exists()
    no_child_left()


def test_no_fork_beside_another_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alone):
    import threading

    monkeypatch.setattr(fleet_report, "ASIDE_MIN", 1)
    renderers(monkeypatch, tmp_path / "log")
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not forked.forkable()
        fleet_report.write(tmp_path, sample())
    finally:
        stop.set()
        t.join()
    assert pids(tmp_path / "log") == [os.getpid()]
    assert files(tmp_path) == alone
