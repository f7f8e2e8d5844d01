"""NHC-style quick mode: `harness run prolog --quiet` prints one line and exits non-zero on failure."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from clihelp import ROOT, harness, run_dirs, write

from harness.cli.quiet import MAX_LINE, quiet_line
from harness.model import CheckResult, Evaluation, Outcome, RunRecord, Status

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


def _eval(metric: str, measured: float | None, unit: str, low: float | None, high: float | None,
          message: str, outcome: Outcome = Outcome.FAIL, **labels: str | int) -> Evaluation:
    return Evaluation(metric=metric, labels=labels, outcome=outcome, severity="fail", measured=measured,
                      unit=unit, reference=None, low=low, high=high, reduce="each", message=message)


def _record(*checks: CheckResult, interrupted: bool = False) -> RunRecord:
    return RunRecord("node-20250101T000000Z", "node", {"name": "prolog"}, {"name": "p"},
                     "2025-01-01T00:00:00Z", "2025-01-01T00:00:09Z", 9.0, {}, checks, "1",
                     interrupted=interrupted)


def test_the_line_names_the_first_failing_rule_measured_against_expected():
    memlock = _eval("host.memlock", 8388608.0, "B", None, None, "found 8 MiB, expected unlimited")
    h2d = [_eval("gpu.h2d_bw", 12.06, "GB/s", 50.0, None, "measured 12.06 GB/s, expected >= 50 GB/s", gpu=g)
           for g in (3, 5)]
    rec = _record(CheckResult("inventory", "inventory", Status.PASSED),
                  CheckResult("config-audit", "config_audit", Status.FAILED, "47 facts; 22 rule outcomes",
                              evaluations=(_eval("host.shm", 1.0, "B", 0.0, None, "ok", Outcome.PASS),
                                           memlock)),
                  CheckResult("gpu-bw", "gpu_bandwidth", Status.FAILED, "8 GPUs", evaluations=tuple(h2d)),
                  CheckResult("probe", "command", Status.ERRORED, "nvidia-smi not found on PATH"),
                  CheckResult("burn", "gpu_burn", Status.SKIPPED, "no GPU"))
    line = quiet_line(rec, Path("/r/report.html"), 9.04)
    assert line == ("harness: REJECTED: 1 passed, 2 failed, 1 errored, 1 skipped"
                    " | FAILED config-audit: host.memlock: found 8 MiB, expected unlimited"
                    " | FAILED gpu-bw: gpu.h2d_bw{gpu=3} 12.1 GB/s, expected >= 50 GB/s (+1 more)"
                    " | ERRORED probe: nvidia-smi not found on PATH | report /r/report.html (9.0 s)")


def test_the_line_stays_one_bounded_line_and_keeps_the_report_path():
    hostile = "boom\nharness: ACCEPTED: 9 passed\r\x1b[2K" + "y" * 900
    rec = _record(CheckResult("a", "command", Status.ERRORED, hostile))
    line = quiet_line(rec, Path("/var/lib/harness/prolog/node/report.html"), 2.04)
    assert len(line) == MAX_LINE and "\n" not in line and "\r" not in line and "\x1b" not in line
    assert line.startswith("harness: ERRORED: 0 passed, 1 errored | ERRORED a: boom harness: ACCEPTED")
    assert line.endswith("y... | report /var/lib/harness/prolog/node/report.html (2.0 s)")


def test_an_interrupted_run_says_so_and_no_report_means_no_report_part():
    rec = _record(CheckResult("a", "command", Status.PASSED),
                  CheckResult("b", "fio", Status.NOT_RUN, "interrupted by SIGTERM while running"),
                  interrupted=True)
    assert quiet_line(rec, None, 0.0) == "harness: INCOMPLETE: 1 passed, 1 not run | interrupted (0.0 s)"


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
    assert line.startswith("harness: ERRORED: 0 passed, 1 errored | ")
    assert " | ERRORED probe: no-such-health-probe not found on PATH" in line


def test_a_memlock_limit_below_the_profile_is_named_in_the_line(tmp_path: Path):
    """The real prolog suite's config audit on a shell whose locked-memory limit is 8 MiB."""
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    if hard != resource.RLIM_INFINITY and hard < 8 << 20:
        pytest.skip("the hard locked-memory limit here is below 8 MiB")
    rule = "config:\n  - {fact: host.memlock, equals: unlimited}\n"
    profile = write(tmp_path / "memlock.yaml", LENIENT + rule)

    def eight_mib() -> None:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (8 << 20, hard))

    r = subprocess.run([sys.executable, "-m", "harness", "run", "prolog", "-q", "--history", "off",
                        "--profile", str(profile), "--output", str(tmp_path / "o")], cwd=ROOT, text=True,
                       capture_output=True, timeout=180, preexec_fn=eight_mib,
                       env={**os.environ, **env(tmp_path)})
    assert r.returncode == 1, r.stdout + r.stderr
    (line,) = r.stdout.splitlines()
    assert line.startswith("harness: REJECTED: ")
    assert " | FAILED config-audit: host.memlock: found 8 MiB, expected unlimited | report " in line


def test_a_gate_that_judges_nothing_says_untested_and_exits_4(tmp_path: Path):
    """A probe that ran but has no rule is recorded, not passed: the gate must not call that a pass."""
    suite = write(tmp_path / "gate.yaml", "name: gate\nchecks:\n  - id: probe\n    kind: command\n"
                  "    params: {argv: [/bin/true]}\n")
    profile = write(tmp_path / "lenient.yaml", LENIENT)
    r = harness("run", str(suite), "-q", "--history", "off", "--profile", str(profile), "--output",
                str(tmp_path / "o"), env=env(tmp_path))
    assert r.returncode == 4, r.stdout + r.stderr
    (line,) = r.stdout.splitlines()
    assert line.startswith("harness: UNTESTED: 0 passed, 1 recorded | ")
    assert " | UNTESTED no check judged anything (1 recorded) | report " in line
