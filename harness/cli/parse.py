"""`harness parse KIND FILE`: a saved tool output file through one parser, as JSON.

The file is read bounded (a regular file of at most PARSE_LIMIT bytes, opened without blocking),
so /dev/zero or a FIFO is one error line, never a hang.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

from harness import fsutil
from harness.errors import ConfigError, ConfigProblem, UsageError

PARSE_LIMIT = 64 * 1024 * 1024  # bytes `harness parse` reads at most (saved tool output is far smaller)


def parse_file(kind: str, file: Path) -> dict[str, Any]:
    """`harness parse KIND FILE` as a dict. FILE must be a regular file of at most PARSE_LIMIT bytes:
    /dev/zero would be read until memory ran out, and a FIFO would block forever."""
    from harness.parsers.registry import parsers  # start-up: the parsers load only for `harness parse`

    table = parsers()
    if kind not in table:
        import difflib  # start-up: only when the kind is unknown

        near = difflib.get_close_matches(kind, table, n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise UsageError(f"unknown parse kind '{kind}'{hint}; known: {', '.join(sorted(table))}")
    text = read_bounded(file, PARSE_LIMIT).decode("utf-8", errors="replace")
    return table[kind](text).to_dict()


def read_bounded(file: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; ConfigError (exit 2) for anything else
    (fsutil.read_bounded: opened without blocking, checked once open)."""
    def refuse(why: str) -> ConfigError:
        return ConfigError([ConfigProblem(str(file), 1, 1, why)])

    try:
        return fsutil.read_bounded(file, limit)
    except fsutil.TooLarge as e:
        if e.errno == errno.EFBIG:
            raise refuse(_too_big(limit)) from e
        raise refuse(f"{e.strerror}: give a file of saved tool output") from e
    except OSError as e:
        raise refuse(f"cannot read: {e.strerror}") from e


def _too_big(limit: int) -> str:
    return (f"larger than {limit // (1024 * 1024)} MiB: not saved tool output "
            "(harness parse reads at most that)")
