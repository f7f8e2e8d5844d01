"""Ctrl-C and SIGTERM mid-run: children gone, finished results kept, report written, 130/143."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clihelp import ROOT, results, run_dirs, write

SUITE = """\
name: slow
checks:
  - id: first
    kind: command
    params: {argv: [/bin/true]}
  - id: long
    kind: fio
    params:
      jobs: [{name: randread_4k, rw: randread, bs: 4k, iodepth: 4, size: 16M, runtime: 60}]
  - id: after
    kind: inventory
"""


def _fio_children(pid_marker: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            argv0 = cmd.split(" ", 1)[0]
            if Path(argv0).name == "fio" and pid_marker in cmd:
                out.append(int(d.name))
    return out


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_mid_check(tmp_path: Path, sig: int, code: int):
    suite = write(tmp_path / "slow.yaml", SUITE)
    out = tmp_path / "reports"
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", str(suite), "--profile", "generic",
                          "--output", str(out)], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait until fio of this run is running
            if out.exists() and run_dirs(out) and _fio_children(str(run_dirs(out)[0])):
                break
            time.sleep(0.1)
        else:
            pytest.fail("fio never started")
        time.sleep(0.5)
        os.kill(p.pid, sig)
        stdout, stderr = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code, stdout + stderr
    (run_dir,) = run_dirs(out)
    assert _fio_children(str(run_dir)) == []
    doc = results(run_dir)
    status = {c["id"]: (c["status"], c["message"]) for c in doc["checks"]}
    name = "SIGINT" if sig == signal.SIGINT else "SIGTERM"
    assert status["first"][0] == "passed"
    assert status["long"] == ("not_run", f"interrupted by {name} while running")
    assert status["after"] == ("not_run", f"not run: interrupted by {name}")
    assert doc["interrupted"] is True and doc["verdict"] == "INCOMPLETE"
    assert (run_dir / "report.html").exists() and (run_dir / "junit.xml").exists()
    assert "INCOMPLETE" in stdout
