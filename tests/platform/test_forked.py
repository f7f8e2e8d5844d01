"""platform.forked: a child that never returns into its parent's code, its exit code, and a wait
that is bounded whether the child ends, hangs, ignores SIGTERM or there is no pidfd."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from harness.platform import forked


@pytest.fixture
def allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest may keep a thread of its own alive; test_no_fork_beside_another_thread holds the rule."""
    monkeypatch.setattr(forked, "forkable", lambda: True)


def no_child_left() -> None:
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def test_the_work_runs_in_the_child_and_its_code_comes_back(tmp_path: Path, allowed):
    mark = tmp_path / "pid"
    child = forked.start(lambda: mark.write_text(str(os.getpid())))
    assert child is not None
    assert child.end(30) == 0
    assert int(mark.read_text()) == child.pid != os.getpid()
    no_child_left()


def test_work_that_raises_exits_1_and_never_returns_here(tmp_path: Path, allowed):
    def work() -> None:
        raise SystemExit(0)  # not even SystemExit(0) makes a success, or returns into pytest

    for fn in (lambda: 1 / 0, work):
        child = forked.start(fn)
        assert child is not None and child.end(30) == 1
    no_child_left()


def test_a_hung_child_is_stopped_and_unwinds_on_sigterm(tmp_path: Path, allowed):
    mark = tmp_path / "unwound"

    def work() -> None:
        try:
            time.sleep(60)
        finally:
            mark.write_text("yes")  # what an atomic write's cleanup does

    child = forked.start(work)
    assert child is not None
    assert child.wait(0.2) is None  # still running: left running
    t0 = time.monotonic()
    assert child.end(0.2, term_s=10) is None
    assert time.monotonic() - t0 < 10 and mark.read_text() == "yes"
    no_child_left()


def test_a_child_that_ignores_sigterm_is_killed(allowed):
    import signal

    def work() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(60)

    child = forked.start(work)
    assert child is not None
    t0 = time.monotonic()
    assert child.end(0.1, term_s=0.3) is None
    assert time.monotonic() - t0 < 10
    no_child_left()


def test_the_wait_polls_where_there_is_no_pidfd(monkeypatch: pytest.MonkeyPatch, allowed):
    monkeypatch.delattr(os, "pidfd_open")
    child = forked.start(lambda: time.sleep(0.2))
    assert child is not None
    assert child.wait(0.0) is None
    assert child.wait(30) == 0
    assert child.wait(1) == -1  # reaped already: not waited on again
    no_child_left()


def test_no_fork_beside_another_thread():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        assert not forked.forkable()
        assert forked.start(lambda: None) is None
    finally:
        stop.set()
        t.join(5)
