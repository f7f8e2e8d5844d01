"""The node's run lock: a second run refuses while the first lives; a crashed run never blocks."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write
from faulthelp import alive, ledger_groups, procs_with, sigkill, start, wait_for

from harness.platform.runlock import RunLock, RunLocked

SLEEPY = """\
name: sleepy
checks:
  - id: nap
    kind: command
    params: {{argv: [python3, -c, "import time; time.sleep(120)", "{marker}"]}}
"""


def sleepy(tmp_path: Path) -> tuple[Path, str]:
    """The sleepy suite, with a marker no other test run (even a concurrent one) shares."""
    marker = f"sleepy-marker:{tmp_path}"
    return write(tmp_path / "sleepy.yaml", SLEEPY.format(marker=marker)), marker
QUICK = """\
name: quick
checks:
  - id: ok
    kind: command
    params: {argv: [/bin/true]}
    expect: [{metric: command.duration, max: 3600, unit: s}]
"""


def test_lock_in_process(tmp_path: Path):
    path = tmp_path / "l.lock"
    with RunLock(path) as first:
        assert first.acquire("2024-05-01T10:00:00Z") is None
        first.set_run_dir(tmp_path / "run1")
        with pytest.raises(RunLocked) as e:
            RunLock(path).acquire("2024-05-01T10:00:01Z")
        msg = str(e.value)
        assert f"harness PID {os.getpid()}, started 2024-05-01T10:00:00Z, run dir {tmp_path / 'run1'}" in msg
        assert "\n" not in msg
    assert path.read_text() == ""  # a clean release leaves nothing for the next run to clean
    with RunLock(path) as again:
        assert again.acquire("2024-05-01T10:00:02Z") is None


def test_second_run_refuses_and_a_killed_run_does_not_block(tmp_path: Path, _own_run_lock: Path):
    slow, marker = sleepy(tmp_path)
    quick = write(tmp_path / "quick.yaml", QUICK)
    out = tmp_path / "reports"
    first = start("run", str(slow), "--profile", "generic", "--output", str(out))
    try:
        wait_for(lambda: run_dirs(out) if out.exists() else [], 60, "the run directory")
        (run1,) = run_dirs(out)
        wait_for(lambda: set(procs_with(marker, "python3")) & set(ledger_groups(run1)), 60,
                 "the first run's check to start and be recorded")
        holder = json.loads(_own_run_lock.read_text())
        assert holder["pid"] == first.pid and holder["run_dir"] == str(run1)

        r = harness("run", str(quick), "--profile", "generic", "--output", str(out))
        assert r.returncode == 3, r.stdout + r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in r.stderr
        assert re.search(rf"another run is in progress on this node: harness PID {first.pid}, "
                         rf"started 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ, run dir {re.escape(str(run1))}",
                         lines[0]), lines[0]
        assert run_dirs(out) == [run1]  # the refused run wrote nothing

        # planning and validating measure nothing: they do not take the lock
        assert harness("run", str(quick), "--profile", "generic", "--dry-run").returncode == 0
        assert harness("validate", str(quick)).returncode == 0

        sleeper = procs_with(marker, "python3")
    finally:
        sigkill(first)
    assert sleeper and all(alive(pid) for pid in sleeper)  # orphaned by the SIGKILL

    r = harness("run", str(quick), "--profile", "generic", "--output", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"note: killed 1 leftover process(es) of `python3 -c import time; time.sleep(120)` " \
           f"(process group {sleeper[0]}) from {run1}" in r.stderr
    assert not any(alive(pid) for pid in sleeper)
    run2 = next(d for d in run_dirs(out) if d != run1)
    assert results(run2)["verdict"] == "ACCEPTED"
    assert "killed 1 leftover" in (run2 / "harness.log").read_text()


def test_sigterm_releases_the_lock(tmp_path: Path):
    slow, marker = sleepy(tmp_path)
    out = tmp_path / "reports"
    first = start("run", str(slow), "--profile", "generic", "--output", str(out))
    try:
        wait_for(lambda: procs_with(marker, "python3", under=first.pid), 60, "the first run's check")
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 143
    quick = write(tmp_path / "quick.yaml", QUICK)
    r = harness("run", str(quick), "--profile", "generic", "--output", str(out))
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr
