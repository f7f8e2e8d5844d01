"""The explicit registry of parse kinds, reachable as `harness parse KIND FILE`."""

from __future__ import annotations

from collections.abc import Callable

from harness.parsers.base import ParseResult

Parser = Callable[[str], ParseResult]


def parsers() -> dict[str, Parser]:
    """Every parse kind by name."""
    from harness.parsers import fio

    return {"fio": fio.parse}
