"""The /dev/shm edge for `harness observe`: size and use of the shared-memory filesystem a
process sees (a container's own, often 64 MiB, through /proc/PID/root)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class ShmUsage:
    size: int  # bytes
    used: int  # bytes


def usage_of(path: Path) -> Optional[ShmUsage]:
    """statvfs of `path` (df); None when it is absent or not a filesystem we may read."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    size = st.f_blocks * st.f_frsize
    return ShmUsage(size=size, used=size - st.f_bfree * st.f_frsize) if size > 0 else None


def path_for(pid: Optional[int], root: Path = Path("/")) -> Path:
    """The /dev/shm that `pid` sees (its mount namespace), or the node's own."""
    return root / "proc" / str(pid) / "root" / "dev" / "shm" if pid is not None else root / "dev" / "shm"
