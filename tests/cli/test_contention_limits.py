"""Issue #25 item 4, the thresholds: a suite (or one check) sets the contention gate's thresholds
under `contention:`, validated with units where they have one; the limits in force are recorded
in results.json beside the evidence; a bad value is bad input at its file:line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write

from harness.run import contention as cn

SUITE = """\
name: limits
defaults:
  contention: {{timeout: 1s{defaults}}}
checks:
  - id: load
    kind: command
    params:
      argv: [echo, "17"]
      metrics:
        - {{name: prolog.tmp_free, unit: B, better: higher, regex: '(?P<value>[0-9]+)'}}
{check}"""


# this shared test machine's own load is let through (the gate's own tests hold the defaults)
SHARED = ", runnable_per_cpu: 1000, cpu_some: 100%, mem_some: 100%, steal: 100%"


def run(tmp_path: Path, defaults: str = "", check: str = "") -> tuple[int, str, dict]:
    out = tmp_path / "out"
    r = harness("run", str(write(tmp_path / "s.yaml", SUITE.format(defaults=defaults, check=check))),
                "--profile", "generic", "--output", str(out), "--history", "off")
    doc = results(run_dirs(out)[0]) if out.exists() and run_dirs(out) else {}
    return r.returncode, r.stdout + r.stderr, doc


def test_a_suite_threshold_is_the_one_in_force_and_recorded(tmp_path: Path, contention_gate: None):
    """No node has 100% of its memory available: at that threshold the check is contended (the
    default, 3%, lets this machine measure), and results.json records the limits judged against."""
    code, out, doc = run(tmp_path, defaults=", mem_available: 100%, foreign_io: 200 MB/s" + SHARED)
    assert code == 3, out
    (c,) = doc["checks"]
    assert c["status"] == "errored" and c["message"].startswith("contended: memory: "), c["message"]
    assert "% of memory available" in c["message"] and "cpu:" not in c["message"]
    limits = c["details"]["contention"]["limits"]
    assert limits["mem_available"] == 1.0 and limits["foreign_io_bps"] == 200e6
    assert limits["io_some"] == 0.5  # the default where the suite says nothing
    assert c["details"]["contention"]["window_s"] == cn.WINDOW_S  # near a limit: the whole window read


def test_a_check_overrides_the_suite(tmp_path: Path, contention_gate: None):
    code, out, doc = run(tmp_path, defaults=", mem_available: 100%" + SHARED,
                         check="    contention: {mem_available: 0}\n")
    assert code == 4, out  # measured, nothing judged it: UNTESTED, not contended
    (c,) = doc["checks"]
    assert c["status"] == "recorded" and c["details"]["contention"]["limits"]["mem_available"] == 0
    # every reading far below these limits: the first look was enough; it began as the run did
    # (nodeload.first_look), so it is as long as the run's start-up, never under START_LOOK_S
    assert cn.START_LOOK_S <= c["details"]["contention"]["window_s"] < cn.WINDOW_S


@pytest.mark.parametrize("bad,words", [
    ("steal: 3", "3 is a fraction, so it means 300%"),
    ("foreign_io: 50 W", "is in W, not GB/s"),
    ("runnable_per_cpu: -1", "greater than 0"),
    ("io_pressure: 0.5", "io_pressure"),  # not a threshold of the gate
])
def test_a_bad_threshold_is_bad_input_at_its_line(tmp_path: Path, bad: str, words: str):
    code, out, _ = run(tmp_path, defaults=", " + bad)
    assert code == 2, out
    assert "s.yaml:3:" in out and words in out, out
