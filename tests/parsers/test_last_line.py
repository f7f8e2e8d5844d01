"""parsers.base.last_line: the one "last non-empty line of a tool's output"."""

from __future__ import annotations

from harness.parsers.base import last_line


def test_the_last_non_empty_line_stripped_and_cut() -> None:
    assert last_line("first\n  FAILED: no device  \n\n \t\n") == "FAILED: no device"
    assert last_line("x" * 500) == "x" * 300 and last_line("x" * 500, 200) == "x" * 200
    assert last_line("a\r\nb\r\n") == "b"


def test_no_text_is_empty() -> None:
    assert last_line("") == "" and last_line("\n \n\t") == ""
