"""Read small files from /sys and /proc: the one reader every platform module uses.

A file that cannot be read (absent, permission, a driver's EIO) is None, never an exception:
the callers treat an unknown value as unknown.
"""

from __future__ import annotations

from pathlib import Path

SYS = Path("/sys")
PROC = Path("/proc")


def read(path: Path | str) -> str | None:
    """The file's text as it is (undecodable bytes replaced), or None when it cannot be read."""
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def read_value(path: Path | str) -> str | None:
    """A one-value sysfs/procfs file, whitespace stripped, or None when it cannot be read."""
    text = read(path)
    return None if text is None else text.strip()
