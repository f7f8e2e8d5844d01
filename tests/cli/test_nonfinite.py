"""Issue #20 through the real command line: whatever number a tool prints, `harness run` ends with a
verdict, exit 0 or 3, strict-JSON results and no traceback; an absurd number is never a rejection."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

from clihelp import harness, run_dirs
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

SUITE = """\
name: nonfinite
checks:
  - id: tool
    kind: command
    params:
      argv: [echo, "bw: {value}"]
      metrics:
        - {{name: app.bw, unit: GB/s, regex: 'bw: (?P<value>\\S+)'}}
    expect:
      - {{metric: app.bw, unit: GB/s, {rule}}}
  - id: after
    kind: command
    params:
      argv: [echo, "bw: 10"]
      metrics:
        - {{name: app.bw, unit: GB/s, regex: 'bw: (?P<value>\\S+)'}}
    expect:
      - {{metric: app.bw, unit: GB/s, min: 5}}
"""


def _strict(path: Path) -> dict[str, Any]:
    def refuse(name: str) -> None:
        raise AssertionError(f"{path} holds {name}")

    return json.loads(path.read_text(), parse_constant=refuse)


def run(tmp: Path, value: str, band: str = "", rule: str = "") -> tuple[int, dict[str, Any], str]:
    suite = tmp / "suite.yaml"
    suite.write_text(SUITE.format(value=value, rule=rule or f"reference: 10{band}"))
    res = harness("run", str(suite), "--profile", "generic", "--output", str(tmp / "out"), timeout=120)
    text = res.stdout + res.stderr
    assert "Traceback" not in text, text
    (run_dir,) = run_dirs(tmp / "out")
    record = _strict(run_dir / "results.json")
    for check in (run_dir / "checks").glob("*.json"):
        _strict(check)
    return res.returncode, record, text


def test_issue_20_absurd_bandwidth_errors_the_check_and_the_run_goes_on(tmp_path: Path):
    """`bw: 1e308` against 10 GB/s +-50% was a traceback, exit 1 and results.json left "pending"."""
    code, record, text = run(tmp_path, "1e308", ", lower: 0.5, upper: 0.5")
    assert code == 3 and record["verdict"] == "ERRORED"
    tool, after = record["checks"]
    assert tool["status"] == "errored" and after["status"] == "passed"
    assert tool["message"] == ("not judged: app.bw{}: measured 1.00 × 10^308 GB/s is too far from the "
                               "reference 10 GB/s to judge (the deviation is not a finite number)")
    assert tool["metrics"][0]["value"] == 1e308 and tool["evaluations"][0]["measured"] is None
    assert "ERRORED tool: not judged" in text


def _printed(x: float) -> str:
    return repr(x)  # 'inf', 'nan', '-1e+308', '5e-324': what a tool might print


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.one_of(st.sampled_from([1e308, -1e308, math.inf, -math.inf, math.nan, 5e-324, 1.8e306]),
                       st.floats(allow_nan=True, allow_infinity=True)))
@example(value=1e308)
@example(value=math.nan)
@example(value=5e-324)
def test_any_number_a_tool_prints_ends_in_a_verdict_never_a_rejection(value: float):
    """The suite's bounds are the largest floats (+-1.7976931348623157e308), so every finite value
    passes (at +-1.7e308, a drawn 1.70000000000003e308 failed, rightly); NaN and inf make the check
    ERRORED. (A band around a reference that a finite value overflows is the test above: a tolerance
    above 1 must be written as a percent, and none reaches 1.7e309 %.)"""
    judgeable = math.isfinite(value)
    with tempfile.TemporaryDirectory() as tmp:
        code, record, _ = run(Path(tmp), _printed(value),
                              rule="min: -1.7976931348623157e+308, max: 1.7976931348623157e+308")
    tool = record["checks"][0]
    assert code != 1 and record["checks"][1]["status"] == "passed"
    if judgeable:
        assert (code, record["verdict"], tool["status"]) == (0, "ACCEPTED", "passed")
    else:
        assert (code, record["verdict"], tool["status"]) == (3, "ERRORED", "errored")
        assert "not a finite number" in tool["message"]
