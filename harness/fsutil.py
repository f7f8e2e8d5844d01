"""Atomic file writes: write a temporary file beside the target, fsync, rename over it."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harness.errors import StorageError


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` so readers see the old file or the new one, never half."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        why = "no space left on device" if e.errno == errno.ENOSPC else (e.strerror or str(e))
        raise StorageError(f"{path}: cannot write: {why}") from e


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=False, allow_nan=False) + "\n")
