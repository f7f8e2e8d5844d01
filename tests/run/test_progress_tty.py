"""The live progress display on a real pseudo-terminal, and plain lines elsewhere."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from clihelp import ROOT, write

from harness.model import CheckResult, Metric, Status
from harness.run.progress import PlainProgress, choose

SUITE = """\
name: tty
checks:
  - id: sleepy
    kind: command
    params:
      argv: [python3, -c, "import time; time.sleep(1.5); print('rate 7.5')"]
      metrics:
        - {name: app.rate, unit: GB/s, regex: 'rate (?P<value>[0-9.]+)'}
    expect: [{metric: app.rate, min: 1, unit: GB/s}]
"""


def test_run_on_a_terminal_shows_live_progress(tmp_path: Path):
    suite = write(tmp_path / "tty.yaml", SUITE)
    leader, follower = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", str(suite), "--profile", "generic",
                          "--output", str(tmp_path / "r")], cwd=ROOT, stdin=follower, stdout=follower,
                         stderr=follower, env={**os.environ, "COLUMNS": "120", "TERM": "xterm"})
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif p.poll() is not None:
            break
    p.wait(timeout=30)
    os.close(leader)
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode(errors="replace"))
    assert p.returncode == 0, screen
    assert "[1/1] sleepy (command)" in screen  # the live line, drawn while the check ran
    assert "PASSED   sleepy" in screen and "app.rate 7.50 GB/s" in screen
    assert "ACCEPTED: 1 passed" in screen


def test_plain_progress_lines_are_timestamped():
    buf = io.StringIO()
    prog = choose(buf)
    assert isinstance(prog, PlainProgress)
    prog.start("s", "generic", 1, "/tmp/x")
    prog.check_started(1, "fio", "fio", 60, 20)
    prog.check_finished(CheckResult("fio", "fio", Status.PASSED, duration_s=2.0,
                                    metrics=(Metric("fio.bw", 1.25, "GB/s", {"rw": "read"}),)))
    lines = buf.getvalue().splitlines()
    assert lines[1].endswith("[1/1] fio (fio) started (timeout 60 s, about 20 s)")
    assert lines[2].endswith("fio: PASSED in 2.0 s - fio.bw[read]=1.25 GB/s")
    assert all(line[2] == ":" and line[5] == ":" for line in lines)
