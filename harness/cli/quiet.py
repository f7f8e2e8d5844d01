"""`harness run --quiet`: one line of output, for a Slurm prolog/epilog or HealthCheckProgram.

The run itself is unchanged (results.json, report.html and the exit code are written as usual);
what it would print is swallowed, and the line is made from the RunRecord it wrote:
    harness: REJECTED: 3 passed, 1 failed | FAILED gpu-bw: gpu.h2d_bw{gpu=3} 12.1 GB/s, expected >= 50 GB/s
    | report /path/report.html (2.4 s)
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import TextIO

from harness.errors import printable
from harness.model import CheckResult, Evaluation, RunRecord
from harness.report.fmt import fmt_status, rule_line
from harness.report.outputs import HTML_NAME
from harness.run.finish import errors_of
from harness.run.session import Finished

MAX_LINE = 500
_COUNTED = (("passed", "passed"), ("recorded", "recorded"), ("warned", "warned"), ("failed", "failed"),
            ("errored", "errored"), ("skipped", "skipped"), ("not_run", "not run"))


def _one_line(text: str) -> str:
    """One part of the line: whitespace runs (a tool's newline) as one space, other control
    characters escaped (printable), and '|' as '\\|', so a tool's text cannot end the part and
    add one of its own (' | FAILED gpu-burn: GPU 3 FAULTY' reads ' \\| FAILED ...')."""
    return printable(" ".join(text.split())).replace("|", "\\|")


def fault(ev: Evaluation) -> str:
    """One failing rule: what was measured against what was expected, in words ('gpu.count 7 of 8',
    'gpu.persistence_mode{gpu=3} off, expected on')."""
    return rule_line(ev)


def problem(check: CheckResult) -> str:
    """'FAILED id: <first failing rule> (+N more)', or the check's own message when none failed."""
    want = ("fail",) if check.status.value == "failed" else ("error", "fail")
    bad = [e for e in check.evaluations if e.outcome.value in want]
    text = fault(bad[0]) + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else "") if bad else check.message
    return f"{fmt_status(check.status.value)} {check.id}: {text}"


def quiet_line(record: RunRecord, report: Path | None, seconds: float) -> str:
    """The run as one line of at most MAX_LINE characters, the report's path always whole (pure)."""
    c = record.counts
    counts = [f"{c[k]} {word}" for k, word in _COUNTED if c[k] or k == "passed"]
    parts = [f"harness: {record.verdict}: {', '.join(counts)}"]
    if record.interrupted:
        parts.append("interrupted")
    parts += [problem(chk) for chk in record.checks if chk.status.value in ("failed", "errored")]
    if record.verdict == "UNTESTED":
        parts += [f"UNTESTED {why}" for why in record.untested]
    head = " | ".join(_one_line(p) for p in parts)
    tail = (f" | report {printable(str(report))}" if report else "") + f" ({seconds:.1f} s)"
    if len(head) + len(tail) > MAX_LINE:
        head = head[:max(0, MAX_LINE - len(tail) - 3)] + "..."
    return (head + tail)[:MAX_LINE]


def run_quietly(launch: Callable[[], Finished], out: TextIO | None = None) -> int:
    """Call `launch` with its output swallowed; print one line; return its exit code."""
    t0 = time.monotonic()
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        done = launch()
    seconds = time.monotonic() - t0
    if done.record is None:
        line = f"harness: exit {done.code} ({seconds:.1f} s)"
    else:
        report = done.run_dir / HTML_NAME if done.run_dir else None
        line = quiet_line(done.record, report if report and report.is_file() else None, seconds)
        for err in errors_of(done.record):  # the harness's own failures, also where errors go
            print(f"error: {_one_line(err)}", file=sys.stderr)
    print(line, file=out or sys.stdout, flush=True)
    return done.code
