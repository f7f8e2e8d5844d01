"""`harness parse KIND FILE`: a saved tool output file through one parser, as JSON.

The file is read bounded (a regular file of at most PARSE_LIMIT bytes, opened without blocking),
so /dev/zero or a FIFO is one error line, never a hang.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

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
    """The bytes of a regular file of at most `limit` bytes; ConfigError (exit 2) for anything else.
    Opened without blocking (a FIFO with no writer would wait forever) and checked once open."""
    def refuse(why: str) -> ConfigError:
        return ConfigError([ConfigProblem(str(file), 1, 1, why)])

    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise refuse(f"cannot read: {e.strerror}") from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        mode = st.st_mode
        if not stat.S_ISREG(mode):
            what = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket")
            raise refuse(f"is {what}, not a regular file: give a file of saved tool output")
        if st.st_size > limit:
            raise refuse(_too_big(limit))
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise refuse(f"cannot read: {e.strerror}") from e
    if len(data) > limit:  # it grew while read
        raise refuse(_too_big(limit))
    return data


def _too_big(limit: int) -> str:
    return (f"larger than {limit // (1024 * 1024)} MiB: not saved tool output "
            "(harness parse reads at most that)")
