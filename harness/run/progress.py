"""Progress: a live rich display on a terminal, plain timestamped lines otherwise (CI logs).

Text from tools (a check's message, a note) is escaped (harness.errors.printable) before it is
shown: an ESC or NUL in a tool's output cannot move the cursor or repaint a line."""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone
from typing import Any, Protocol, TextIO

from harness.errors import printable
from harness.model import CheckResult, RunRecord, Status
from harness.numfmt import fmt_duration
from harness.report.fmt import fmt_status

# Each status's colour on a terminal: recorded (measured, nothing judged) is not a pass, so not green.
STATUS_COLOURS: dict[Status, str] = {
    Status.PASSED: "green", Status.RECORDED: "blue", Status.WARNED: "yellow", Status.FAILED: "red",
    Status.ERRORED: "magenta", Status.SKIPPED: "white", Status.NOT_RUN: "white",
}


class Progress(Protocol):
    def start(self, suite: str, profile: str, total: int, run_dir: str) -> None: ...
    def check_started(self, index: int, check_id: str, kind: str, timeout_s: float,
                      estimate_s: float | None) -> None: ...
    def note(self, text: str) -> None: ...
    def check_finished(self, result: CheckResult) -> None: ...
    def finish(self, record: RunRecord) -> None: ...


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%H:%M:%S")


def _last_numbers(result: CheckResult, n: int = 3) -> str:
    if result.message:
        return result.message
    parts = []
    for m in result.metrics[:n]:
        lab = ",".join(f"{v}" for v in m.labels.values())
        parts.append(f"{m.name}{'[' + lab + ']' if lab else ''}={m.value:.4g} {m.unit}")
    return "; ".join(parts)


class PlainProgress:
    """One timestamped line per event."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.out = stream or sys.stderr
        self.total = 0

    def _p(self, text: str) -> None:
        print(f"{_stamp()} {printable(text)}", file=self.out, flush=True)

    def start(self, suite: str, profile: str, total: int, run_dir: str) -> None:
        self.total = total
        self._p(f"suite {suite}, profile {profile}, {total} check(s) -> {run_dir}")

    def check_started(self, index: int, check_id: str, kind: str, timeout_s: float,
                      estimate_s: float | None) -> None:
        est = f", about {estimate_s:.0f} s" if estimate_s else ""
        self._p(f"[{index}/{self.total}] {check_id} ({kind}) started (timeout {timeout_s:g} s{est})")

    def note(self, text: str) -> None:
        self._p(f"    {text}")

    def check_finished(self, result: CheckResult) -> None:
        self._p(f"    {result.id}: {fmt_status(result.status.value)} in {fmt_duration(result.duration_s)}"
                + (f" - {_last_numbers(result)}" if _last_numbers(result) else ""))

    def finish(self, record: RunRecord) -> None:
        pass


class RichProgress:
    """A live panel: current check, elapsed and remaining, and the last numbers."""

    def __init__(self) -> None:
        from rich.console import Console  # start-up: rich loads only for a live display
        from rich.live import Live

        self.total = 0
        self.current: dict[str, Any] = {}
        self.last = ""
        self.console = Console(stderr=True)
        self.live = Live(console=self.console, refresh_per_second=4, transient=True,
                         get_renderable=self._render)

    def _render(self) -> Any:
        from rich.text import Text  # start-up: rich loads only for a live display

        if not self.current:
            return Text("")
        c = self.current
        elapsed = time.monotonic() - c["t0"]
        remain = (f", ~{max(0.0, c['estimate'] - elapsed):.0f} s left" if c["estimate"]
                  else f", timeout {c['timeout']:g} s")
        t = Text()
        t.append(f"[{c['index']}/{self.total}] ", style="bold")
        t.append(f"{c['id']} ({c['kind']}) ", style="cyan")
        t.append(f"{elapsed:.0f} s elapsed{remain}")
        if c.get("note"):
            t.append(f"\n  {c['note']}", style="dim")
        if self.last:
            t.append(f"\n  last: {self.last}", style="dim")
        return t

    def start(self, suite: str, profile: str, total: int, run_dir: str) -> None:
        self.total = total
        self.console.print(printable(f"suite {suite}, profile {profile}, {total} check(s) -> {run_dir}"),
                           highlight=False, markup=False)
        self.live.start()

    def check_started(self, index: int, check_id: str, kind: str, timeout_s: float,
                      estimate_s: float | None) -> None:
        self.current = {"index": index, "id": check_id, "kind": kind, "timeout": timeout_s,
                        "estimate": estimate_s, "t0": time.monotonic()}

    def note(self, text: str) -> None:
        self.current["note"] = printable(text)

    def check_finished(self, result: CheckResult) -> None:
        from rich.text import Text  # start-up: rich loads only for a live display

        colour = STATUS_COLOURS[result.status]

        self.last = printable(_last_numbers(result))
        line = Text("  ")
        line.append(f"{fmt_status(result.status.value):8}", style=colour)
        line.append(f" {result.id} ({result.duration_s:.1f} s) {self.last}")
        self.console.print(line, highlight=False)
        self.current = {}

    def finish(self, record: RunRecord) -> None:
        self.live.stop()


def choose(stream: TextIO | None = None) -> Progress:
    """Rich on a terminal, plain lines elsewhere."""
    s = stream or sys.stderr
    if s.isatty():
        return RichProgress()
    return PlainProgress(s)
