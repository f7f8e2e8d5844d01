"""Live progress of a fleet's jobs: a rich status line on a terminal, plain lines otherwise.

Plain mode prints a line when a node's job changes state and a count line when the counts
change, so a CI log shows every transition once and nothing while nothing happens.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, TextIO

from harness.fleet.layout import SeenJob
from harness.model import EXIT_CODES

BUCKETS = ("pending", "running", "done", "failed")
REPORTED = frozenset(code for code in EXIT_CODES.values() if code)  # a verdict that is not 0


def bucket(s: SeenJob) -> str:
    """pending | running | done | failed for one job (failed: ended other than COMPLETED)."""
    if not s.job.started:
        return "pending"
    if not s.job.finished:
        return "running"
    # harness exits 1 for a REJECTED node, 3 for an ERRORED or INCOMPLETE one and 4 for an UNTESTED one
    # (model.EXIT_CODES): the job "failed" but the node reported
    if s.job.state == "COMPLETED" or (s.job.state == "FAILED" and s.job.exit_code in REPORTED and not s.note):
        return "done"
    return "failed"


def tally(seen: Mapping[str, SeenJob], total: int) -> dict[str, int]:
    c = dict.fromkeys(BUCKETS, 0)
    for s in seen.values():
        c[bucket(s)] += 1
    c["pending"] += total - len(seen)  # submitted, not polled yet
    return c


def summary(c: Mapping[str, int], total: int) -> str:
    return f"{total} node(s): " + ", ".join(f"{c[b]} {b}" for b in BUCKETS)


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%H:%M:%S")


class PlainFleetProgress:
    """One timestamped line per job transition and per change of the counts."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.out = stream or sys.stderr
        self.total = total
        self.last: dict[str, str] = {}
        self.last_counts: dict[str, int] = {}

    def _p(self, text: str) -> None:
        print(f"{_stamp()} {text}", file=self.out, flush=True)

    def note(self, text: str) -> None:
        self._p(text)

    def update(self, seen: Mapping[str, SeenJob]) -> None:
        self.counts = tally(seen, self.total)
        for node, s in sorted(seen.items()):
            text = s.job.describe() + (f" - {s.note}" if s.note else "")
            if self.last.get(node) != text:
                self.last[node] = text
                self._p(f"  {node}: job {s.job.job_id} {text}")
        c = tally(seen, self.total)
        if c != self.last_counts:
            self.last_counts = c
            self._p(summary(c, self.total))

    def close(self) -> None:
        pass


class RichFleetProgress:
    """A live line with the counts and the latest transition."""

    def __init__(self, total: int) -> None:
        from rich.console import Console  # start-up: rich loads only for a live display
        from rich.live import Live

        self.total = total
        self.console = Console(stderr=True)
        self.counts: dict[str, int] = dict.fromkeys(BUCKETS, 0)
        self.counts["pending"] = total
        self.latest = ""
        self.last: dict[str, str] = {}
        self.live = Live(console=self.console, refresh_per_second=4, transient=True,
                         get_renderable=self._render)
        self.live.start()

    def _render(self) -> Any:
        from rich.text import Text  # start-up: rich loads only for a live display

        t = Text()
        colours = {"pending": "yellow", "running": "cyan", "done": "green", "failed": "red"}
        t.append(f"fleet {self.total} node(s): ", style="bold")
        for b in BUCKETS:
            t.append(f"{self.counts[b]} {b}  ", style=colours[b])
        if self.latest:
            t.append(f"\n  {self.latest}", style="dim")
        return t

    def note(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False)

    def update(self, seen: Mapping[str, SeenJob]) -> None:
        self.counts = tally(seen, self.total)
        for node, s in sorted(seen.items()):
            text = s.job.describe()
            if self.last.get(node) != text:
                self.last[node] = text
                self.latest = f"{node}: job {s.job.job_id} {text}"
                if s.job.finished:
                    self.console.print(f"  {node}: {text}" + (f" - {s.note}" if s.note else ""),
                                       highlight=False, markup=False)

    def close(self) -> None:
        self.live.stop()


def choose(total: int, stream: TextIO | None = None) -> PlainFleetProgress | RichFleetProgress:
    s = stream or sys.stderr
    return RichFleetProgress(total) if s.isatty() else PlainFleetProgress(total, s)
