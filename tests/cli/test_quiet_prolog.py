"""NHC-style quick mode: `harness run prolog --quiet` prints one line and exits non-zero on failure."""

from __future__ import annotations

from pathlib import Path

from clihelp import harness, run_dirs, write

from harness.cli.quiet import one_line

LENIENT = "name: lenient\nhardware:\n  memory_min_bytes: 1048576\nexpectations: []\n"


def env(tmp_path: Path) -> dict[str, str]:
    return {"HARNESS_LOCK_FILE": str(tmp_path / "harness.lock")}  # not the node's lock: tests run in parallel


def test_prolog_suite_one_line_and_exit_0(tmp_path: Path):
    profile = write(tmp_path / "lenient.yaml", LENIENT)
    out = tmp_path / "prolog"
    r = harness("run", "prolog", "--quiet", "--history", "off", "--profile", str(profile),
                "--output", str(out), env=env(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    (line,) = r.stdout.splitlines()
    (run_dir,) = run_dirs(out)
    assert line.startswith("harness: ACCEPTED: ") and f"report {run_dir / 'report.html'}" in line
    assert r.stderr == ""
    assert (run_dir / "results.json").is_file()  # the run is written as usual


def test_a_failing_gate_prints_the_failure_and_exits_1(tmp_path: Path):
    suite = write(tmp_path / "gate.yaml", "name: gate\nchecks:\n  - id: tmp-space\n    kind: command\n"
                  "    params:\n      argv: [df, -B1, --output=avail, /tmp]\n      metrics:\n"
                  "        - {name: prolog.tmp_free, unit: B, regex: '(?P<value>[0-9]+)\\s*$'}\n"
                  "    expect:\n      - {metric: prolog.tmp_free, min: 1.0e+18, unit: B}\n")
    profile = write(tmp_path / "lenient.yaml", LENIENT)
    r = harness("run", str(suite), "-q", "--history", "off", "--profile", str(profile), "--output",
                str(tmp_path / "o"), env=env(tmp_path))
    assert r.returncode == 1
    (line,) = r.stdout.splitlines()
    assert line.startswith("harness: REJECTED: 0 passed") and " | FAILED tmp-space: " in line


def test_one_line_is_bounded_and_survives_odd_output():
    printed = ("note: x\nREJECTED: 0 passed, 2 failed\n  FAILED a: " + "y" * 900
               + "\n  ERRORED b: z\nreport: /r\n")
    line = one_line(printed, 1, 2.04)
    assert line.startswith("harness: REJECTED: 0 passed, 2 failed | FAILED a: yyy") and len(line) == 500
    assert one_line("", 2, 0.0) == "harness: exit 2 (0.0 s)"


def test_a_gate_whose_tool_is_missing_says_errored_and_exits_3(tmp_path: Path):
    """No hardware verdict: Slurm still drains on any non-zero prolog status, but the line and
    the code tell the operator to fix the node's software, not to RMA it."""
    suite = write(tmp_path / "gate.yaml", "name: gate\nchecks:\n  - id: probe\n    kind: command\n"
                  "    params: {argv: [no-such-health-probe]}\n")
    profile = write(tmp_path / "lenient.yaml", LENIENT)
    r = harness("run", str(suite), "-q", "--history", "off", "--profile", str(profile), "--output",
                str(tmp_path / "o"), env=env(tmp_path))
    assert r.returncode == 3, r.stdout + r.stderr
    (line,) = r.stdout.splitlines()
    assert line.startswith("harness: ERRORED: 0 passed, 0 recorded, 0 warned, 0 failed, 1 errored")
    assert " | ERRORED probe: no-such-health-probe not found on PATH" in line


def test_a_gate_that_judges_nothing_says_untested_and_exits_4(tmp_path: Path):
    """A probe that ran but has no rule is recorded, not passed: the gate must not call that a pass."""
    suite = write(tmp_path / "gate.yaml", "name: gate\nchecks:\n  - id: probe\n    kind: command\n"
                  "    params: {argv: [/bin/true]}\n")
    profile = write(tmp_path / "lenient.yaml", LENIENT)
    r = harness("run", str(suite), "-q", "--history", "off", "--profile", str(profile), "--output",
                str(tmp_path / "o"), env=env(tmp_path))
    assert r.returncode == 4, r.stdout + r.stderr
    (line,) = r.stdout.splitlines()
    assert line.startswith("harness: UNTESTED: 0 passed, 1 recorded, ")
    assert " | UNTESTED no check judged anything (1 recorded) | report " in line
