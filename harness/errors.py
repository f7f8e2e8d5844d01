"""The one exception root and its typed subclasses.

Every error the harness raises on purpose derives from HarnessError. The CLI turns
them into exit codes in one place (cli.py); anything else is a bug and shows a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass


def printable(text: str) -> str:
    """`text` safe to print on a terminal: every character that is not printable (newline, ESC,
    NUL, C1 controls, bidi overrides) escaped as \\n, \\xNN or \\uNNNN. Text from a tool or a run
    file goes through this before it reaches a terminal, so it cannot move the cursor or repaint."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif ch in "\n\t\r":
            out.append(repr(ch)[1:-1])
        else:
            n = ord(ch)
            out.append(f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")
    return "".join(out)


class HarnessError(Exception):
    """Root of every deliberate harness error."""


@dataclass(frozen=True)
class ConfigProblem:
    """One problem in a suite or profile, located in its file."""

    file: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        if not self.file:
            return printable(self.message)
        return printable(f"{self.file}:{self.line}:{self.col}: {self.message}")


class ConfigError(HarnessError):
    """Invalid suite, profile or arguments (exit 2). Carries every problem found."""

    def __init__(self, problems: Sequence[ConfigProblem] | str) -> None:
        if isinstance(problems, str):
            problems = [ConfigProblem("", 0, 0, problems)]
        self.problems: tuple[ConfigProblem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class RecordError(ConfigError):
    """A run file (results.json, checks/ID.json, a saved series) that holds a value it cannot: someone
    edited it, or it is not the harness's. One line naming the file and the field (exit 2)."""

    def __init__(self, path: str | os.PathLike[str], field: str, message: str, more: int = 0) -> None:
        self.path, self.field = str(path), field
        text = f"{path}: {field + ': ' if field else ''}{message}"
        super().__init__([ConfigProblem("", 0, 0, text + (f" (and {more} more)" if more > 0 else ""))])


class UsageError(ConfigError):
    """Invalid command-line arguments (exit 2)."""

    def __init__(self, message: str) -> None:
        HarnessError.__init__(self, message)
        self.problems = ()

    def __str__(self) -> str:
        return str(self.args[0])


class ToolError(HarnessError):
    """A tool failed to run to completion: the environment's fault, never the hardware's."""

    def __init__(self, message: str, argv: Sequence[str] = (), rc: int | None = None,
                 output_tail: str = "") -> None:
        super().__init__(message)
        self.argv = tuple(argv)
        self.rc = rc
        self.output_tail = output_tail


class ToolMissing(ToolError):
    """The executable is not installed."""


class ToolTimeout(ToolError):
    """The tool ran past its timeout and its process group was killed."""


class GuardRefusal(HarnessError):
    """The data-loss guard refused to let a check write to a device."""


class SkipCheck(HarnessError):
    """The check cannot apply on this machine (e.g. no NVIDIA GPU); carries the reason."""


class StorageError(HarnessError):
    """Results could not be written (disk full, permission denied)."""


class Interrupted(HarnessError):
    """SIGINT or SIGTERM arrived; carries the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum
