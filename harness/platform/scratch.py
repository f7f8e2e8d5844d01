"""Scratch directories a check creates for its tools' files, announced to the run's ledger.

A check normally removes its scratch directory itself; after a SIGKILL it cannot, so the
ledger (platform/ledger.py) records each one in RUN_DIR/.running and `reap_stale()` removes
it on the next run or --resume. Only directories made here (named harness-*, recorded by device
and inode) are ever removed.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
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


def remove_stale(path: Path, dev: int, ino: int) -> str | None:
    """Remove a scratch directory left by a dead run; a note saying so, or None.

    Only the very directory that was recorded: named harness-*, a real directory of this
    user's, on the same device and inode (nothing put in its place since)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not path.name.startswith(PREFIX) or not stat.S_ISDIR(st.st_mode) \
            or (st.st_dev, st.st_ino) != (dev, ino) or st.st_uid != os.geteuid():
        return None
    shutil.rmtree(path, ignore_errors=True)
    return f"removed leftover scratch directory {path}" + (" (partly)" if path.exists() else "")
