"""Compiled report templates kept between runs: compiling them costs ~0.1 s of every run.

The cache lives in the output directory (beside history.sqlite), so a run writes nothing
outside it. Loading compiled code from a directory others can write to would let them run
code as the harness, so the directory must be ours and private (0700); else there is no cache.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

DIRNAME = ".template-cache"


def private_dir(parent: Path) -> Path | None:
    """parent/.template-cache, created 0700; None unless it is a directory we own that no one
    else can write to (not a symlink)."""
    path = parent / DIRNAME
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = path.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return None
    return path


def bytecode_cache(parent: Path | None) -> Any:
    """A jinja2 bytecode cache under `parent`, or None. Failures to read or write it are ignored."""
    if parent is None:
        return None
    directory = private_dir(parent)
    if directory is None:
        return None
    import jinja2  # start-up: Jinja2 loads only when a report is rendered

    class _Quiet(jinja2.FileSystemBytecodeCache):
        def dump_bytecode(self, bucket: Any) -> None:
            try:
                super().dump_bytecode(bucket)
            except OSError:
                pass

        def load_bytecode(self, bucket: Any) -> None:
            try:
                super().load_bytecode(bucket)
            except (OSError, EOFError, ValueError):
                bucket.reset()

    return _Quiet(str(directory))
