"""The runner judges once per check (compare.judge) and survives what a kind does wrong: an exception
of any type, numbers that are not finite in its metrics, findings or details. Real runner, real
run directory; the kinds are small stand-ins registered for the suite only."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from harness.checks.base import CheckContext, CheckKind, CheckOutput, MetricSpec, Params, PlannedCommand
from harness.checks.registry import kinds as registered
from harness.config.loader import load_profile, load_suite
from harness.model import Finding, Metric, Outcome, RunRecord, Status
from harness.run import plan
from harness.run.progress import PlainProgress
from harness.run.runner import RunContext, Runner


class _NoParams(Params):
    pass


def _kind(name: str, run: Any) -> CheckKind:
    return CheckKind(name, name, _NoParams, {"t.value": MetricSpec("GB/s", "higher")}, run,
                     lambda p, inv: [PlannedCommand((name,))])


def _raise(exc: BaseException) -> CheckKind:
    def run(params: _NoParams, ctx: CheckContext) -> CheckOutput:
        raise exc

    return _kind("boom", run)


def _returns(out: CheckOutput) -> CheckKind:
    return _kind("odd", lambda params, ctx: out)


def run_suite(tmp_path: Path, first: CheckKind, expect: str = "") -> tuple[RunRecord, Path]:
    """A suite of `first` then a real `command` check, run by the real runner."""
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"""\
name: t
checks:
  - id: first
    kind: {first.name}
    {expect}
  - id: after
    kind: command
    params:
      argv: [echo, "bw: 10"]
      metrics:
        - {{name: app.bw, unit: GB/s, regex: 'bw: (?P<value>\\S+)'}}
    expect:
      - {{metric: app.bw, unit: GB/s, min: 5}}
""")
    loaded = load_suite(suite, {**registered(), first.name: first})
    profile = load_profile("generic")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ctx = RunContext(run_dir=run_dir, suite_info={"name": "t"}, profile_info={"name": "generic"},
                     inventory={"host": {"hostname": "n1"}}, progress=PlainProgress(io.StringIO()))
    record = Runner(plan.build(loaded, profile), ctx).run()
    return record, run_dir


def strict(run_dir: Path) -> dict[str, Any]:
    """results.json, refusing NaN and Infinity the way a strict JSON reader does."""
    def refuse(name: str) -> None:
        raise AssertionError(f"results.json holds {name}")

    return json.loads((run_dir / "results.json").read_text(), parse_constant=refuse)


@pytest.mark.parametrize("exc", [RuntimeError("kaputt\nsecond line"), KeyError("gpu"),
                                 ZeroDivisionError("by zero"), AssertionError("bug")])
def test_any_exception_in_a_kind_errors_that_check_and_the_next_check_runs(tmp_path: Path, exc: Exception):
    record, run_dir = run_suite(tmp_path, _raise(exc))
    first, after = record.checks
    assert first.status is Status.ERRORED and after.status is Status.PASSED
    assert first.message.startswith(f"internal error: {type(exc).__name__}: ")
    assert first.message.endswith("(traceback in harness.log)") and "\n" not in first.message
    log = (run_dir / "harness.log").read_text()
    assert "Traceback (most recent call last)" in log and f"{type(exc).__name__}" in log
    assert strict(run_dir)["verdict"] == "ERRORED"


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)])
def test_keyboard_interrupt_and_system_exit_are_not_swallowed(tmp_path: Path, exc: BaseException):
    with pytest.raises(type(exc)):
        run_suite(tmp_path, _raise(exc))


def test_a_finding_that_is_not_finite_errors_the_check_instead_of_failing_it(tmp_path: Path):
    out = CheckOutput(findings=(
        Finding(metric="t.value", outcome=Outcome.FAIL, measured=math.inf, unit="GB/s", message="too fast"),
        Finding(metric="t.value", outcome=Outcome.FAIL, measured=1.0, low=math.nan, unit="GB/s", message="x"),
    ), metrics=(Metric("t.value", 1.0, "GB/s"),))
    record, run_dir = run_suite(tmp_path, _returns(out))
    first = record.checks[0]
    assert first.status is Status.ERRORED and first.message.startswith("not judged: t.value{}: ")
    assert {e.outcome for e in first.evaluations} == {Outcome.ERROR}
    assert [e.measured for e in first.evaluations] == [None, 1.0]
    checks = strict(run_dir)["checks"]
    assert checks[0]["status"] == "errored" and checks[1]["status"] == "passed"


def test_metrics_that_are_not_finite_are_dropped_with_a_problem(tmp_path: Path):
    out = CheckOutput(metrics=(Metric("t.value", math.nan, "GB/s", {"gpu": 0}),
                               Metric("t.value", 3.0, "GB/s", {"gpu": 1})))
    record, run_dir = run_suite(tmp_path, _returns(out))
    first = record.checks[0]
    assert first.status is Status.ERRORED
    assert first.problems == ("t.value{gpu=0} is not a finite number (nan)",)
    assert [m.labels["gpu"] for m in first.metrics] == [1]
    assert strict(run_dir)["checks"][0]["metrics"][0]["value"] == 3.0


def test_details_that_strict_json_cannot_hold_are_written_plain(tmp_path: Path):
    out = CheckOutput(metrics=(Metric("t.value", 3.0, "GB/s"),),
                      details={"peak": math.inf, "rows": ({"x": -math.inf}, 1.5), "n": math.nan,
                               "file": tmp_path / "x.json", 3: True})
    record, run_dir = run_suite(tmp_path, _returns(out))
    assert record.checks[0].status is Status.RECORDED  # details are not judged; no rule: recorded
    saved = strict(run_dir)["checks"][0]["details"]
    saved.pop("contention")  # the runner's record of competing load, beside the kind's details
    assert saved == {"peak": None, "rows": [{"x": None}, 1.5], "n": None, "file": str(tmp_path / "x.json"),
                     "3": True}
    on_disk = json.loads((run_dir / "checks" / "first.json").read_text(), parse_constant=float)
    assert on_disk["details"]["peak"] is None


def test_the_kinds_own_rules_are_judged_by_the_runner_with_the_suites(tmp_path: Path):
    """A suite rule and the kind's findings end in one list, rules first; a failed finding fails."""
    out = CheckOutput(metrics=(Metric("t.value", 3.0, "GB/s"),),
                      findings=(Finding(metric="t.value", outcome=Outcome.FAIL, measured=3.0, unit="GB/s",
                                        message="the tool said FAULTY", source="tool"),))
    record, _ = run_suite(tmp_path, _returns(out),
                          "expect:\n      - {metric: t.value, unit: GB/s, min: 1}")
    first = record.checks[0]
    assert first.status is Status.FAILED
    assert [(e.source, e.outcome) for e in first.evaluations] == [("suite t", Outcome.PASS),
                                                                 ("tool", Outcome.FAIL)]
