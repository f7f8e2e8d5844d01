"""dcgmi diag tables whose test result continues on the next row (issue #20).

`| Targeted Power | Pass - GPUs: 0, 2, 3 |` followed by `|  | Fail - GPU: 1 |` is one test's
cell: GPU 1 failed, the others passed. Real samples: a DCGM 3.3.9 run on 4x A10G (the issue's
example) and an 8-GPU `-r 2` fragment from stas00/ml-engineering; the fragment has no table
around it, so the test puts the real header and border of the A10G run around it (stated there).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import harness

from harness.compare.judge import evaluate
from harness.compare.rules import Rule
from harness.config.models import Expectation
from harness.model import Outcome
from harness.parsers import dcgm

DATA = Path(__file__).parents[1] / "data" / "dcgmi"
A10G = "diag_r3_table_dcgm3.3.9_4x_a10g_targeted_power_fail_gpu1_continuation_row.txt"
FRAGMENT = "diag_r2_table_FRAGMENT_8gpu_gpu_memory_fail_gpu0_thermal_ml_engineering.txt"


def results(text: str) -> tuple[dcgm.ParseResult, dict[tuple[str, int | None], float]]:
    r = dcgm.parse(text)
    return r, {(m.labels["test"], m.labels.get("gpu")): m.value for m in r.metrics}


def wrapped(rows: str) -> str:
    """Rows inside the real A10G run's header and bottom border (a constructed table)."""
    lines = (DATA / A10G).read_text().splitlines()
    section = "+-----  Hardware  ----------+" + "-" * 48 + "+"
    return "\n".join([*lines[:4], section, rows.rstrip("\n"), lines[-1]]) + "\n"


def test_continuation_row_is_the_failed_gpu_not_lost():
    r, res = results((DATA / A10G).read_text())
    assert r.valid and r.problems == ()
    assert {g: v for (t, g), v in res.items() if t == "Targeted Power"} == {0: 1.0, 1: 0.0, 2: 1.0, 3: 1.0}
    assert r.details["failures"] == [
        "Targeted Power GPU 1: Fail: GPU 1 Max power of 224.1 did not reach desired power minimum "
        "target_power_min_ratio of 224.2 for GPU 1 Verify that the clock speeds and GPU utilization "
        "are high."]
    assert res[("Targeted Stress", None)] == 1.0 and res[("Memory Bandwidth", None)] == 1.0
    assert r.details["skipped"] == ["EUD Test"]
    # Info rows and their continuations are neither results nor failure reasons
    assert not any("299.5" in f for f in r.details["failures"])


def test_the_failed_gpu_fails_the_rule_and_is_named():
    r, _ = results((DATA / A10G).read_text())
    rule = Rule(Expectation(metric="dcgm.result", min=1, unit="count"), "t")
    bad = [e for e in evaluate([rule], r.metrics) if e.outcome is Outcome.FAIL]
    assert bad and {e.labels.get("gpu") for e in bad} == {1}


def test_real_fragment_of_eight_gpus_with_gpu0_failing():
    rows = (DATA / FRAGMENT).read_text()
    rows = rows.replace("| ts.\n", "| ts." + " " * 43 + "|\n")  # the row the page cut
    r, res = results(wrapped(rows))
    assert r.valid, r.problems
    assert res == {("GPU Memory", g): (0.0 if g == 0 else 1.0) for g in range(8)}
    assert r.details["failures"][0].startswith("GPU Memory GPU 0: Fail: GPU 0 Thermal violations totaling")
    assert r.details["failures"][0].endswith("and any other components.")


def test_the_fragment_as_published_is_not_a_complete_run():
    r = dcgm.parse((DATA / FRAGMENT).read_text())
    assert not r.valid and r.metrics == ()


@pytest.mark.parametrize("rows,want", [
    # a second continuation and a warning on another GPU
    ("| Diagnostic | Pass - GPUs: 0 |\n|  | Fail - GPU: 1 |\n|  | Warn - GPU: 2 |\n",
     {0: 1.0, 1: 0.0, 2: 0.0}),
    # a message row whose wrapped text happens to start like a result stays a message
    ("| Diagnostic | Fail - GPU: 3 |\n| Warning | GPU 3 went wrong; verdict: |\n|  | Pass - soon |\n",
     {3: 0.0}),
    # a continuation row before any test is ignored, never credited to nothing
    ("|  | Fail - GPU: 1 |\n| Diagnostic | Pass - All |\n", {None: 1.0}),
])
def test_continuation_edge_cases(rows, want):
    _, res = results(wrapped(rows))
    assert {g: v for (t, g), v in res.items() if t == "Diagnostic"} == want


def test_error_before_any_test_is_the_sections_failure():
    rows = ("|-----  Deployment  --------+------------------------------------------------|\n"
            "| Error                     | GPU 3 has uncorrectable memory errors and row  |\n"
            "|                           |  remappings are pending                        |\n")
    r, res = results(wrapped(rows))
    assert res == {("Deployment", 3): 0.0}
    assert r.details["failures"] == ["Deployment GPU 3: Fail: GPU 3 has uncorrectable memory errors "
                                     "and row remappings are pending"]


def test_cli_names_the_failed_gpu():
    out = harness("parse", "dcgmi-diag", str(DATA / A10G))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    got = {m["labels"].get("gpu"): m["value"] for m in doc["metrics"]
           if m["labels"]["test"] == "Targeted Power"}
    assert got == {0: 1.0, 1: 0.0, 2: 1.0, 3: 1.0}
