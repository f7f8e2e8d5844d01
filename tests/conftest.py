"""Shared test set-up: each test gets its own run lock file and its own default history store.

`harness run` takes a node-wide lock; test runs of several people on one machine (and tests
that start runs in parallel on purpose) must not refuse each other through the real one. The
node's default history store (/var/lib/harness or ~/.local/state/harness) is never written by a
test: HARNESS_STATE_DIR points it at a temporary folder, for the session (module-scoped fixtures)
and then for each test. The contention gate only records (HARNESS_CONTENTION=record): engineers
share the test machines, whose competing load would make any measuring test ERRORED "contended";
the gate's own tests (tests/run/test_contention.py) turn it on with the `contention_gate` fixture.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_run_lock(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.mktemp("lock") / "harness.lock"
    monkeypatch.setenv("HARNESS_LOCK_FILE", str(path))
    return path


@pytest.fixture(autouse=True, scope="session")
def _contention_records_only() -> Iterator[None]:
    old = os.environ.get("HARNESS_CONTENTION")
    os.environ["HARNESS_CONTENTION"] = "record"
    yield
    if old is None:
        os.environ.pop("HARNESS_CONTENTION", None)
    else:
        os.environ["HARNESS_CONTENTION"] = old


@pytest.fixture
def contention_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The contention gate as a node runs it: waits, then refuses a contended measurement."""
    monkeypatch.setenv("HARNESS_CONTENTION", "gate")


@pytest.fixture(autouse=True, scope="session")
def _session_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("state")
    old = os.environ.get("HARNESS_STATE_DIR")
    os.environ["HARNESS_STATE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("HARNESS_STATE_DIR", None)
    else:
        os.environ["HARNESS_STATE_DIR"] = old


@pytest.fixture(autouse=True)
def state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
              _session_state_dir: Path) -> Path:
    """This test's HARNESS_STATE_DIR: where the default history store lives."""
    path = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("HARNESS_STATE_DIR", str(path))
    return path
