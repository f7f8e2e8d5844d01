"""Scratch directories a check creates for its tools' files, announced to the run's ledger.

A check normally removes its scratch directory itself; after a SIGKILL it cannot, so the
ledger (platform/ledger.py) records each one in RUN_DIR/.running and `reap_stale()` removes
it on the next run or --resume. Only directories made here (named harness-*) are ever removed.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

PREFIX = "harness-"

_watchers: list[Callable[[Path, bool], None]] = []


def watch(fn: Callable[[Path, bool], None]) -> None:
    _watchers.append(fn)


def unwatch(fn: Callable[[Path, bool], None]) -> None:
    if fn in _watchers:
        _watchers.remove(fn)


@contextmanager
def scratch_dir(name: str, parent: Path | None, log: logging.Logger) -> Iterator[Path]:
    """A fresh directory `harness-NAME-XXXX` under parent (or $TMPDIR), removed on exit."""
    work = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{name}-", dir=parent))
    for fn in list(_watchers):
        fn(work, True)
    try:
        yield work
    finally:
        try:
            shutil.rmtree(work)
        except OSError as e:
            log.warning("could not remove scratch directory %s: %s", work, e)
        for fn in list(_watchers):
            fn(work, False)


def remove_stale(path: Path) -> str | None:
    """Remove a scratch directory left by a dead run; a note saying so, or None."""
    if not path.name.startswith(PREFIX) or path.is_symlink() or not path.is_dir():
        return None
    shutil.rmtree(path, ignore_errors=True)
    return f"removed leftover scratch directory {path}" + (" (partly)" if path.exists() else "")
