"""`harness run --quiet`: one line of output, for a Slurm prolog/epilog or HealthCheckProgram.

The run itself is unchanged (results.json, report.html and the exit code are written as usual);
only what it prints is gathered and folded into one line:
    harness: REJECTED: 2 passed, ... | FAILED tmp-space: ... | report /path/report.html (2.4 s)
"""

from __future__ import annotations

import io
import re
import sys
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from typing import TextIO

MAX_LINE = 500
_VERDICT = re.compile(r"^(ACCEPTED|REJECTED|ERRORED|INCOMPLETE|UNTESTED): ")
_PROBLEM = re.compile(r"^  (FAILED|ERRORED|UNTESTED) ")


def one_line(printed: str, code: int, seconds: float) -> str:
    """The run's printed summary as one line (pure)."""
    lines = printed.splitlines()
    verdict = next((ln for ln in lines if _VERDICT.match(ln)), f"exit {code}")
    problems = [ln.strip() for ln in lines if _PROBLEM.match(ln)]
    report = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("report:")), "")
    parts = [f"harness: {verdict}", *problems] + ([f"report {report}"] if report else [])
    text = " | ".join(parts) + f" ({seconds:.1f} s)"
    return text if len(text) <= MAX_LINE else text[:MAX_LINE - 3] + "..."


def run_quietly(launch: Callable[[], int], out: TextIO | None = None) -> int:
    """Call `launch` with stdout and stderr gathered; print one line; return its exit code."""
    gathered = io.StringIO()
    t0 = time.monotonic()
    with redirect_stdout(gathered), redirect_stderr(io.StringIO()):
        code = launch()
    print(one_line(gathered.getvalue(), code, time.monotonic() - t0), file=out or sys.stdout, flush=True)
    return code
