"""The `command` kind: extraction by regex and JSON path (pure), and real runs."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.command import KIND, CommandParams, extract_metrics
from harness.errors import ToolMissing


def params(**kw) -> CommandParams:
    kw.setdefault("argv", ["true"])
    return CommandParams.model_validate(kw)


def ctx(tmp_path: Path) -> CheckContext:
    return CheckContext("cmd", tmp_path, 30, False, False, {}, logging.getLogger("test"))


def test_regex_named_groups_become_labels():
    p = params(metrics=[{"name": "disk.bw", "unit": "GB/s",
                         "regex": r"^(?P<dev>\w+): (?P<value>[\d.]+) GB/s$"}])
    metrics, problems = extract_metrics(p, "sda: 1.5 GB/s\nnoise\nsdb: 2.25 GB/s\n", "")
    assert problems == []
    assert [(m.labels["dev"], m.value, m.unit) for m in metrics] == [("sda", 1.5, "GB/s"),
                                                                      ("sdb", 2.25, "GB/s")]


def test_json_path_wildcard_and_text_around():
    p = params(metrics=[{"name": "app.iops", "unit": "IOPS", "json_path": "jobs[*].iops",
                         "labels": {"suite": "x"}}])
    metrics, problems = extract_metrics(p, 'note: starting\n{"jobs": [{"iops": 10}, {"iops": "2,000"}]}\nbye',
                                        "")
    assert problems == []
    assert [(m.value, m.labels) for m in metrics] == [(10.0, {"key": "0", "suite": "x"}),
                                                      (2000.0, {"key": "1", "suite": "x"})]


def test_required_metric_missing_or_not_a_number_is_a_problem():
    p = params(metrics=[{"name": "a.b", "unit": "count", "regex": r"n=(?P<value>\S+)"},
                        {"name": "a.c", "unit": "count", "json_path": "x.y"}])
    metrics, problems = extract_metrics(p, "n=abc", "")
    assert metrics == []
    assert "a.b: 'abc' is not a number" in problems
    assert any("a.c: no JSON document" in p for p in problems)


@pytest.mark.parametrize("bad, msg", [
    ({"name": "a.b", "unit": "GB/s", "regex": "(unclosed"}, "bad regex"),
    ({"name": "a.b", "unit": "GB/s", "regex": "no group"}, "named group 'value'"),
    ({"name": "a.b", "unit": "MB/s", "regex": "(?P<value>.)"}, "unknown unit"),
    ({"name": "a.b", "unit": "GB/s"}, "exactly one of regex or json_path"),
    ({"name": "nodots", "unit": "GB/s", "regex": "(?P<value>.)"}, "pattern"),
])
def test_extractor_validation(bad, msg):
    with pytest.raises(ValidationError, match=msg):
        params(metrics=[bad])


def test_real_run_extracts_and_records(tmp_path: Path):
    p = params(argv=[sys.executable, "-c", "print('throughput 12.5 GB/s')"],
               metrics=[{"name": "app.bw", "unit": "GB/s", "regex": r"throughput (?P<value>[\d.]+)"}])
    c = ctx(tmp_path)
    out = KIND.run(p, c)
    assert out.problems == ()
    assert out.metrics[0].value == 12.5
    assert out.metrics[-1].name == "command.duration" and out.metrics[-1].unit == "s"
    (tr,) = c.tool_runs
    assert (tmp_path / tr.stdout_file).read_text() == "throughput 12.5 GB/s\n"


def test_the_summary_words_numbers_as_the_one_formatter(tmp_path: Path):
    """'prolog.tmp_free=7.563e+10 B' read as 70.4 GiB; a latency in us as ms."""
    p = params(argv=[sys.executable, "-c", "print(75630000000, 36960)"],
               metrics=[{"name": "app.free", "unit": "B", "regex": r"^(?P<value>\d+)"},
                        {"name": "app.lat", "unit": "us", "regex": r" (?P<value>\d+)$"}])
    out = KIND.run(p, ctx(tmp_path))
    assert out.summary.split(" in ")[0] == "exit 0"
    assert out.summary.endswith(": app.free 70.4 GiB; app.lat 37.0 ms"), out.summary
    assert "e+" not in out.summary


def test_unexpected_exit_status_is_a_problem_with_output(tmp_path: Path):
    p = params(argv=[sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(4)"])
    out = KIND.run(p, ctx(tmp_path))
    assert len(out.problems) == 1 and "exit 4 (expected [0]): boom" in out.problems[0]


def test_missing_program(tmp_path: Path):
    with pytest.raises(ToolMissing, match="no-such-program-xyz not found"):
        KIND.run(params(argv=["no-such-program-xyz"]), ctx(tmp_path))


def test_declared_metrics_carry_units():
    p = params(metrics=[{"name": "app.lat", "unit": "us", "better": "lower", "regex": "(?P<value>.)"}])
    specs = KIND.metric_specs(p)
    assert specs["app.lat"].unit == "us" and specs["app.lat"].better == "lower"
    assert "command.duration" in specs


@pytest.mark.parametrize("field, value, msg", [
    ("env", {"A=B": "1"}, "'A=B' is not one"),
    ("env", {"": "1"}, "'' is not one"),
    ("env", {"1X": "1"}, "'1X' is not one"),
    ("env", {"X\0Y": "1"}, "is not one"),
    ("env", {"OK": "a\0b"}, "OK: the value holds a NUL byte"),
    ("argv", ["true", "a\0b"], r"argv\[1\] holds a NUL byte"),
    ("argv", [""], r"the program \(argv\[0\]\) is empty"),
])
def test_env_and_argv_that_cannot_reach_a_program_are_refused(field, value, msg):
    with pytest.raises(ValidationError, match=msg):
        params(**{field: value})
    assert params(env={"_OK_1": "x y=z"}).env == {"_OK_1": "x y=z"}
