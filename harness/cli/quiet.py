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
NPD_MAX = 80  # node-problem-detector's default max_output_length (bytes, after trimming spaces)
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


def left_out_parts(record: RunRecord) -> list[str]:
    """'UNTESTED left out by --skip, though expected: gpu-burn, ib-ports' and 'left out by --only:
    fio-quick' (nothing expects it), per option, in the order the options left checks out."""
    parts = []
    for option in dict.fromkeys(lo.option for lo in record.left_out):
        mine = [lo for lo in record.left_out if lo.option == option]
        wanted = [lo.id for lo in mine if lo.expected_by]
        others = [lo.id for lo in mine if not lo.expected_by]
        if wanted:  # the verdict word leads only where these make the verdict
            lead = "UNTESTED " if record.verdict == "UNTESTED" else ""
            parts.append(f"{lead}left out by {option}, though expected: {', '.join(wanted)}")
        if others:
            parts.append(f"left out by {option}: {', '.join(others)}")
    return parts


def quiet_line(record: RunRecord, report: Path | None, seconds: float) -> str:
    """The run as one line of at most MAX_LINE characters, the report's path always whole (pure)."""
    c = record.counts
    counts = [f"{c[k]} {word}" for k, word in _COUNTED if c[k] or k == "passed"]
    parts = [f"harness: {record.verdict}: {', '.join(counts)}"]
    if record.interrupted:
        parts.append("interrupted")
    parts += [problem(chk) for chk in record.checks if chk.status.value in ("failed", "errored")]
    if record.verdict == "UNTESTED":  # checks left out are listed by option below, shorter
        listed = {lo.text for lo in record.left_out}
        parts += [f"UNTESTED {why}" for why in record.untested if why not in listed]
    parts += left_out_parts(record)
    head = " | ".join(_one_line(p) for p in parts)
    tail = (f" | report {printable(str(report))}" if report else "") + f" ({seconds:.1f} s)"
    if len(head) + len(tail) > MAX_LINE:
        head = head[:max(0, MAX_LINE - len(tail) - 3)] + "..."
    return (head + tail)[:MAX_LINE]


def npd_line(record: RunRecord | None, code: int, limit: int = NPD_MAX) -> str:
    """The run for node-problem-detector's condition message: the verdict and the first problem, at
    most `limit` UTF-8 bytes (NPD cuts bytes). The exit code already is NPD's status: 0 OK,
    1 NonOK (REJECTED), anything else (ERRORED, UNTESTED, invalid input, interrupted) Unknown."""
    if record is None:
        text = f"harness: exit {code}"
    else:
        parts = [f"harness {record.verdict}"]
        parts += [problem(chk) for chk in record.checks if chk.status.value in ("failed", "errored")]
        if record.verdict == "UNTESTED":
            parts += [f"UNTESTED {why}" for why in record.untested]
        if len(parts) == 1:
            c = record.counts
            parts.append(", ".join(f"{c[k]} {word}" for k, word in _COUNTED if c[k] or k == "passed"))
        text = " | ".join(_one_line(p) for p in parts)
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit - 3].decode("utf-8", errors="ignore") + "..."


def run_quietly(launch: Callable[[], Finished], out: TextIO | None = None, npd: bool = False) -> int:
    """Call `launch` with its output swallowed; print one line (node-problem-detector's, with
    `npd`); return its exit code."""
    t0 = time.monotonic()
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        done = launch()
    seconds = time.monotonic() - t0
    if npd:
        line = npd_line(done.record, done.code)
    elif done.record is None:
        line = f"harness: exit {done.code} ({seconds:.1f} s)"
    else:
        report = done.run_dir / HTML_NAME if done.run_dir else None
        line = quiet_line(done.record, report if report and report.is_file() else None, seconds)
        for err in errors_of(done.record):  # the harness's own failures, also where errors go
            print(f"error: {_one_line(err)}", file=sys.stderr)
    print(line, file=out or sys.stdout, flush=True)
    return done.code
