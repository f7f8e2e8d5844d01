"""The verdict (harness.model.verdict_of and RunRecord.verdict): every combination, and old files."""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from harness import results
from harness.model import EXIT_CODES, JUDGED, MEASURED, VERDICTS, CheckResult, RunRecord, Status, verdict_of

RANK = {v: i for i, v in enumerate(VERDICTS)}  # worst first


@given(st.integers(0, 3), st.integers(0, 3), st.booleans(), st.booleans())
def test_verdict_of_is_the_worst_that_applies(failed: int, errored: int, unfinished: bool, untested: bool):
    v = verdict_of(failed, errored, unfinished, untested=untested)
    applies = [name for name, on in (("REJECTED", failed), ("ERRORED", errored), ("INCOMPLETE", unfinished),
                                     ("UNTESTED", untested)) if on]
    assert v == (min(applies, key=RANK.__getitem__) if applies else "ACCEPTED")
    assert (v == "ACCEPTED") == (not applies)


def test_verdicts_rank_and_exit_codes():
    assert VERDICTS == ("REJECTED", "ERRORED", "INCOMPLETE", "UNTESTED", "ACCEPTED")
    assert EXIT_CODES == {"ACCEPTED": 0, "REJECTED": 1, "ERRORED": 3, "INCOMPLETE": 3, "UNTESTED": 4}
    assert set(EXIT_CODES) == set(VERDICTS)
    assert 2 not in EXIT_CODES.values()  # invalid input keeps its own code
    assert set(JUDGED) < set(MEASURED) and Status.RECORDED in MEASURED and Status.RECORDED not in JUDGED


def _record(checks, interrupted: bool = False) -> RunRecord:
    return RunRecord("r1", "n1", {"name": "s"}, {"name": "p"}, "2026-01-01T00:00:00Z",
                     "2026-01-01T00:01:00Z", 60.0, {}, tuple(checks), "0", interrupted=interrupted)


STATUS = st.sampled_from(list(Status))


@given(st.lists(st.tuples(STATUS, st.booleans()), max_size=6), st.booleans())
def test_the_record_verdict_for_every_mix_of_statuses(mix, interrupted):
    checks = [CheckResult(f"c{i}", "k", s, expected_by="profile p expects it: m >= 1" if exp else "")
              for i, (s, exp) in enumerate(mix)]
    rec = _record(checks, interrupted)
    statuses = [s for s, _ in mix]
    judged = any(s in (Status.PASSED, Status.WARNED, Status.FAILED) for s in statuses)
    expected_skip = any(s is Status.SKIPPED and exp for s, exp in mix)
    if Status.FAILED in statuses:
        want = "REJECTED"
    elif Status.ERRORED in statuses:
        want = "ERRORED"
    elif interrupted or Status.NOT_RUN in statuses:
        want = "INCOMPLETE"
    elif not judged or expected_skip:
        want = "UNTESTED"
    else:
        want = "ACCEPTED"
    assert rec.verdict == want
    assert bool(rec.untested) == (not judged or expected_skip)
    assert sum(rec.counts.values()) == len(checks)
    assert rec.counts["recorded"] == statuses.count(Status.RECORDED)


def test_untested_says_why():
    skipped = CheckResult("gpu-health", "gpu_health", Status.SKIPPED, "no NVIDIA GPU")
    recorded = CheckResult("fio", "fio", Status.RECORDED, "ok")
    assert _record([]).untested == ("no check judged anything: no checks",)
    assert _record([skipped, recorded]).untested == ("no check judged anything (1 recorded, 1 skipped)",)
    expected = replace(skipped, expected_by="profile h100 (hardware) expects it: gpu.count 8..8 count")
    passed = CheckResult("inventory", "inventory", Status.PASSED)
    assert _record([passed, expected]).untested == (
        "gpu-health skipped (no NVIDIA GPU), but profile h100 (hardware) expects it: gpu.count 8..8 count",)
    assert _record([passed, skipped, recorded]).verdict == "ACCEPTED"
    # expected_by on a check that did not skip changes nothing: it measured
    assert _record([replace(passed, expected_by="profile p expects it: x")]).verdict == "ACCEPTED"


def test_a_results_file_from_before_recorded_and_untested_still_loads(tmp_path):
    """Format version 1 stays readable: files written before this change have no `expected_by`
    and no `recorded` count; readers recompute the verdict from the checks."""
    rec = _record([CheckResult("inventory", "inventory", Status.PASSED),
                   CheckResult("gpu", "gpu_health", Status.SKIPPED, "no NVIDIA GPU")])
    doc = rec.to_dict()
    for c in doc["checks"]:
        del c["expected_by"]
    del doc["counts"]["recorded"]
    (tmp_path / "results.json").write_text(json.dumps(doc))
    assert results.validate(doc) == []
    back = results.load(tmp_path)
    assert back.verdict == "ACCEPTED" and all(c.expected_by == "" for c in back.checks)
    assert back.counts["recorded"] == 0


def test_the_schema_knows_the_new_words():
    schema = results.json_schema()
    assert schema["properties"]["verdict"]["enum"] == list(VERDICTS)
    text = json.dumps(schema)
    assert '"recorded"' in text and '"expected_by"' in text
    doc = _record([CheckResult("fio", "fio", Status.RECORDED)]).to_dict()
    assert doc["verdict"] == "UNTESTED" and results.validate(doc) == []
    doc["checks"][0]["status"] = "accepted-ish"
    assert results.validate(doc)  # an unknown status is still refused
