"""Ctrl-C and SIGTERM mid-run: children gone, finished results kept, report written, 130/143."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from clihelp import results, run_dirs, write
from faulthelp import procs_with, start, wait_for

SUITE = """\
name: slow
checks:
  - id: first
    kind: command
    params: {argv: [/bin/true]}
    expect: [{metric: command.duration, max: 3600, unit: s}]
  - id: long
    kind: fio
    params:
      jobs: [{name: randread_4k, rw: randread, bs: 4k, iodepth: 4, size: 16M, runtime: 60}]
  - id: after
    kind: inventory
"""


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_mid_check(tmp_path: Path, sig: int, code: int):
    suite = write(tmp_path / "slow.yaml", SUITE)
    out = tmp_path / "reports"
    p = start("run", str(suite), "--profile", "generic", "--output", str(out))
    try:
        wait_for(lambda: out.exists() and run_dirs(out) and procs_with(str(run_dirs(out)[0]), "fio"), 60,
                 "fio of this run", step=0.1)
        time.sleep(0.5)
        os.kill(p.pid, sig)
        stdout, stderr = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code, stdout + stderr
    (run_dir,) = run_dirs(out)
    assert procs_with(str(run_dir), "fio") == []
    doc = results(run_dir)
    status = {c["id"]: (c["status"], c["message"]) for c in doc["checks"]}
    name = "SIGINT" if sig == signal.SIGINT else "SIGTERM"
    assert status["first"][0] == "passed"
    assert status["long"] == ("not_run", f"interrupted by {name} while running")
    assert status["after"] == ("not_run", f"not run: interrupted by {name}")
    assert doc["interrupted"] is True and doc["verdict"] == "INCOMPLETE"
    assert (run_dir / "report.html").exists() and (run_dir / "junit.xml").exists()
    assert "INCOMPLETE" in stdout
