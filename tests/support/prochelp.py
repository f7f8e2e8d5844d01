"""Waiting, bounded, for a process the test does not own to be gone (a setsid child a tool left)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def gone(pid: int) -> bool:
    """True when `pid` is no more, or only a zombie (its parent has not reaped it yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def assert_ends(pid: int, within_s: float, what: str) -> None:
    """Fail with `what` unless `pid` is gone within `within_s` seconds; kill it either way."""
    deadline = time.monotonic() + within_s
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert gone(pid), what
    finally:
        if not gone(pid):
            os.kill(pid, 9)
