"""The live display's status colours: each status its own, and recorded (nothing judged) never green."""

from __future__ import annotations

import io

from rich.console import Console

from harness.model import CheckResult, Status
from harness.run.progress import STATUS_COLOURS, RichProgress


def test_each_status_has_its_colour_and_recorded_is_not_a_pass() -> None:
    assert set(STATUS_COLOURS) == set(Status)
    judged = [STATUS_COLOURS[s] for s in (Status.PASSED, Status.RECORDED, Status.WARNED, Status.FAILED,
                                          Status.ERRORED)]
    assert len(set(judged)) == len(judged) and "white" not in judged


def shown(status: Status) -> str:
    """The line the live display prints when a check ends with `status`, ANSI codes kept."""
    prog = RichProgress()
    buf = io.StringIO()
    prog.console = Console(file=buf, force_terminal=True, color_system="standard", width=100)
    prog.check_finished(CheckResult("probe", "command", status, duration_s=1.0))
    return buf.getvalue()


def test_the_live_display_prints_recorded_in_its_own_colour() -> None:
    assert "\x1b[34mRECORDED" in shown(Status.RECORDED)  # blue
    assert "\x1b[32mPASSED" in shown(Status.PASSED)  # green
    assert "\x1b[31mFAILED" in shown(Status.FAILED)  # red
