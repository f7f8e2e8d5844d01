"""Shared test set-up: each test gets its own run lock file.

`harness run` takes a node-wide lock; test runs of several people on one machine (and tests
that start runs in parallel on purpose) must not refuse each other through the real one.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_run_lock(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.mktemp("lock") / "harness.lock"
    monkeypatch.setenv("HARNESS_LOCK_FILE", str(path))
    return path
