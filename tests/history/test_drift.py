"""Drift rules: the pure judgement, several recorded runs with a drifting metric and a GPU swap,
and `harness run` failing on drift against history (exit 1, results.json, report, junit)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from clihelp import QUICK_FIO, harness, results, run_dirs, write
from historyhelp import acceptance, derive, gpus, load, quick_runs

from harness import results as harness_results
from harness.config.driftrules import DriftRule
from harness.history.drift import RunPoint, SeriesKey, SourcedRule, evaluate
from harness.history.record import annotate, import_runs
from harness.history.store import SqliteStore
from harness.model import Metric, Outcome, RunRecord

K = SeriesKey("fio", "fio.iops", (("job", "randread_4k"), ("rw", "read")))


def _rule(**kw: object) -> SourcedRule:
    return SourcedRule(DriftRule.model_validate({"metric": "fio.iops", **kw}), "profile p")


def test_drift_compares_with_the_golive_and_the_previous_run_it_is_given():
    golive = RunPoint("r1", "2026-01-01T00:00:00Z", "ACCEPTED", {K: 1000.0})
    previous = RunPoint("r2", "2026-04-01T00:00:00Z", "REJECTED", {K: 960.0})
    rules = [_rule(vs="golive", max_drop_pct=5), _rule(vs="previous", max_drop_pct=5, severity="fail")]
    out = evaluate(rules, {K: (930.0, "IOPS")}, "2026-07-01T00:00:00Z", golive, previous)
    golive, prev = out.evaluations
    assert (golive.reference, golive.outcome, golive.low) == (1000.0, Outcome.WARN, 950.0)
    assert golive.message.startswith("drifted: -7.0% since go-live (r1, 2026-01-01, 181 days ago")
    assert golive.labels == {"job": "randread_4k", "rw": "read", "vs": "go-live", "check": "fio"}
    assert (prev.reference, prev.outcome) == (960.0, Outcome.PASS)  # -3.1% of 960 is within 5%
    assert prev.source == "drift: profile p" and out.notes == ()


def test_rise_growth_and_rate_limits_and_what_is_not_judged():
    wear = SeriesKey("nvme", "nvme.percentage_used", (("device", "nvme0n1"),))
    past = RunPoint("q1", "2026-01-01T00:00:00Z", "ACCEPTED", {wear: 4.0})
    rate = SourcedRule(DriftRule(metric="nvme.percentage_used", vs="previous", max_growth_per_90d=2), "s")
    # 3 points in 2 days: the rate is taken over at least 30 days (2 per 90 days allows 0.67 here)
    (ev,) = evaluate([rate], {wear: (7.0, "%")}, "2026-01-03T00:00:00Z", None, past).evaluations
    assert ev.outcome == Outcome.WARN and ev.high == pytest.approx(4.0 + 2 * 30 / 90)
    (ev,) = evaluate([rate], {wear: (5.0, "%")}, "2026-04-01T00:00:00Z", None, past).evaluations
    assert ev.outcome == Outcome.PASS and ev.high == pytest.approx(6.0)
    grow = SourcedRule(DriftRule(metric="nvme.percentage_used", max_growth=0, severity="fail"), "s")
    (ev,) = evaluate([grow], {wear: (5.0, "%")}, "2026-04-01T00:00:00Z", None, past).evaluations
    assert ev.outcome == Outcome.FAIL and "growth ≤ 0 %" in ev.message
    rise = SourcedRule(DriftRule(metric="nvme.percentage_used", max_rise_pct=10), "s")
    (ev,) = evaluate([rise], {wear: (4.3, "%")}, "2026-04-01T00:00:00Z", None, past).evaluations
    assert ev.outcome == Outcome.PASS and ev.high == pytest.approx(4.4)
    out = evaluate([_rule(max_drop_pct=5), rate], {wear: (5.0, "%")}, "2026-04-01T00:00:00Z", None, None)
    assert out.evaluations == ()
    assert out.notes == ("fio.iops: no such metric measured in this run",
                         "nvme/nvme.percentage_used{device=nvme0n1}: no previous run yet to compare with")
    other = RunPoint("q0", "2026-01-01T00:00:00Z", "ACCEPTED", {K: 1.0})  # another check only: no pair
    (note,) = evaluate([rate], {wear: (5.0, "%")}, "2026-04-01T00:00:00Z", None, other).notes
    assert "the previous run (q0) did not run check nvme" in note


def test_a_missing_reference_says_why():
    """No go-live, another check, other parameters, a swapped part: each says so in words."""
    rule = SourcedRule(DriftRule(metric="fio.iops", vs="golive", max_drop_pct=5), "s")
    now = replace(K, params="p-4k")

    def note(golive: RunPoint | None, key: SeriesKey = now) -> str:
        (n,) = evaluate([rule], {key: (9.0, "IOPS")}, "2026-04-01T00:00:00Z", golive, None).notes
        return n

    assert "no go-live yet to compare with" in note(None) and "harness history pin" in note(None)
    other_check = RunPoint("g", "2026-01-01T00:00:00Z", "ACCEPTED", {}, "acceptance", {"burn": "x"})
    assert "the go-live (g, suite acceptance) did not run check fio" in note(other_check)
    other_bs = RunPoint("g", "2026-01-01T00:00:00Z", "ACCEPTED", {replace(K, params="p-1m"): 5.0},
                        "acceptance", {"fio": "p-1m"})
    assert "ran check fio with parameters that measure something else" in note(other_bs)
    gpu = SeriesKey("burn", "fio.iops", (("gpu", "3"),), "SER-NEW", "p-4k")
    swapped = RunPoint("g", "2026-01-01T00:00:00Z", "ACCEPTED", {replace(gpu, part="SER-OLD"): 5.0},
                       "acceptance", {"burn": "p-4k"})
    assert "measured this on another part: swapped since" in note(swapped, gpu)
    # a go-live recorded before digests left run lengths out: said so, not "something else"
    new = replace(K, params="m1:0123456789abcdef")
    old = RunPoint("g", "2026-01-01T00:00:00Z", "ACCEPTED", {replace(K, params="fedcba9876543210"): 5.0},
                   "acceptance", {"fio": "fedcba9876543210"})
    assert "recorded by an older harness whose series counted run lengths" in note(old, new)


def test_a_rule_needs_a_limit():
    with pytest.raises(ValueError, match="give a limit"):
        DriftRule(metric="fio.iops")


# ---------------------------------------------------------------- several recorded runs

@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> RunRecord:
    (run_dir,) = quick_runs(tmp_path_factory.mktemp("drift"), 1)
    return load(run_dir)


def _tflops(per_gpu: dict[int, float]):
    return lambda rec: [Metric("gpu.tflops", v, "TFLOPS", {"gpu": i}) for i, v in per_gpu.items()] + [
        Metric("nvme.percentage_used", {"q0": 1, "g": 2, "q1": 3, "q2": 4, "now": 9}[rec.run_id], "%",
               {"device": "nvme0n1"})]


@pytest.mark.parametrize(("golive_id", "now_id"), [
    ("vm-20260105T000000Z-ffffff", "vm-20260105T000000Z-000000"),
    ("vm-20260105T000000Z-000000", "vm-20260105T000000Z-ffffff")])
def test_a_go_live_recorded_in_the_same_second_is_earlier_whatever_its_random_suffix(
        real: RunRecord, tmp_path: Path, golive_id: str, now_id: str):
    """Two fast runs in one second: the stored one is the earlier (it was ordered by the run id's
    random suffix, and half the time the quarterly found no go-live)."""
    second = "2026-01-05T00:00:00Z"
    golive = acceptance(derive(real, golive_id, second, gpu_list=gpus()))
    now = derive(real, now_id, second, gpu_list=gpus(), scale={"fio.iops": 0.5})
    rule = SourcedRule(DriftRule.model_validate({"metric": "fio.iops", "labels": {"job": "randread_4k"},
                                                 "vs": "golive", "max_drop_pct": 5}), "suite")
    with SqliteStore(tmp_path / "h.sqlite") as store:
        store.record(golive)
        new = annotate(now, store, [rule])
        assert new.history["golive"]["run_id"] == golive_id and new.history["node"]["runs_before"] == 1
        (ev,) = [e for e in new.checks[-1].evaluations if e.metric == "fio.iops"]
        assert ev.outcome == Outcome.WARN and "-50.0% since go-live" in ev.message
        store.record(new)  # annotated again once stored (a re-render): the order is kept
        again = annotate(now, store, [rule])
        assert again.history["golive"]["run_id"] == golive_id and again.history["node"]["runs_before"] == 1


@pytest.mark.parametrize(("golive_id", "now_id"), [
    ("vm-20260105T000000Z-ffffff", "vm-20260105T000000Z-000000"),
    ("vm-20260105T000000Z-000000", "vm-20260105T000000Z-ffffff")])
def test_history_import_keeps_the_given_order_of_runs_in_one_second(
        real: RunRecord, tmp_path: Path, golive_id: str, now_id: str):
    """`history import GOLIVE NOW` of two runs that started in the same second stores them in that
    order, whatever their ids' random suffixes (they were sorted by run id), so the later one is
    judged against the go-live."""
    second = "2026-01-05T00:00:00Z"
    golive = acceptance(derive(real, golive_id, second, gpu_list=gpus()))
    now = derive(real, now_id, second, gpu_list=gpus(), scale={"fio.iops": 0.5})
    dirs = [tmp_path / "golive", tmp_path / "now"]
    for d, rec in zip(dirs, (golive, now), strict=True):
        d.mkdir()
        harness_results.write(d, rec)
    rule = SourcedRule(DriftRule.model_validate({"metric": "fio.iops", "labels": {"job": "randread_4k"},
                                                 "vs": "golive", "max_drop_pct": 5}), "suite")
    with SqliteStore(tmp_path / "h.sqlite") as store:
        rows = import_runs(store, dirs)
        assert [r.run_id for r in rows] == [golive_id, now_id]
        judged = annotate(now, store, [rule])
    assert judged.history["golive"]["run_id"] == golive_id and judged.history["node"]["runs_before"] == 1


def test_drift_over_recorded_quarters_with_a_gpu_swap(real: RunRecord, tmp_path: Path):
    base = {i: 800.0 + i for i in range(8)}
    runs = [derive(real, "q0", "2025-12-15T00:00:00Z", gpu_list=gpus(), scale={"fio.iops": 2.0},
                   extra=_tflops(base), errored_check=True),  # errored: never the go-live
            acceptance(derive(real, "g", "2026-01-05T00:00:00Z", gpu_list=gpus(), extra=_tflops(base))),
            derive(real, "q1", "2026-04-05T00:00:00Z", gpu_list=gpus(), scale={"fio.iops": 0.97},
                   extra=_tflops(base)),
            derive(real, "q2", "2026-07-05T00:00:00Z", gpu_list=gpus(), scale={"fio.iops": 0.95},
                   extra=_tflops(base))]
    now = derive(real, "now", "2026-10-05T00:00:00Z", gpu_list=gpus(swapped=[3]), scale={"fio.iops": 0.90},
                 extra=_tflops({**{i: v * 0.99 for i, v in base.items()}, 3: 700.0}))
    rules = [SourcedRule(DriftRule.model_validate(r), "profile h200-site") for r in (
        {"metric": "fio.iops", "labels": {"job": "randread_4k"}, "vs": "golive", "max_drop_pct": 5},
        {"metric": "fio.iops", "labels": {"job": "randread_4k"}, "vs": "previous", "max_drop_pct": 8},
        {"metric": "gpu.tflops", "vs": "golive", "max_drop_pct": 5},
        {"metric": "nvme.percentage_used", "vs": "previous", "max_growth_per_90d": 2, "severity": "fail"})]
    with SqliteStore(tmp_path / "h.sqlite") as store:
        for r in runs:
            store.record(r)
        new = annotate(now, store, rules)
    drift = new.checks[-1]
    assert (drift.id, drift.kind, drift.status.value) == ("drift", "drift", "failed")
    by = {(e.metric, e.labels.get("vs"), e.labels.get("gpu")): e for e in drift.evaluations}
    iops = by[("fio.iops", "go-live", None)]
    assert iops.reference == pytest.approx(next(
        m.value for c in real.checks for m in c.metrics if m.name == "fio.iops"
        and m.labels["job"] == "randread_4k"))  # run g, not the rejected q0
    assert iops.outcome == Outcome.WARN and "-10.0% since go-live (g, 2026-01-05" in iops.message
    assert by[("fio.iops", "previous", None)].outcome == Outcome.PASS  # -5.3% from q2
    assert by[("gpu.tflops", "go-live", "0")].outcome == Outcome.PASS  # -1%
    assert ("gpu.tflops", "go-live", "3") not in by  # a new part has no go-live value
    assert any("part 1753724099003" in n for n in drift.details["notes"])
    wear = by[("nvme.percentage_used", "previous", None)]
    assert wear.outcome == Outcome.FAIL and wear.reference == 4.0 and wear.measured == 9.0
    assert new.verdict == "REJECTED"

    h = new.history
    assert h["golive"]["run_id"] == "g" and h["previous"]["run_id"] == "q2"
    assert h["node"]["runs_before"] == 4
    (swap,) = [c for c in h["changes"] if c["kind"] == "gpu_swap"]
    assert swap["old"] == ["1753724031850"] and swap["new"] == ["1753724099003"]
    assert {d["metric"] for d in h["drifted"]} == {"fio.iops", "nvme.percentage_used"}
    trend = next(t for t in h["trends"] if t["metric"] == "fio.iops" and t["labels"]["job"] == "randread_4k")
    assert [p["run_id"] for p in trend["points"]] == ["q0", "g", "q1", "q2", "now"]
    assert trend["golive"]["run_id"] == "g" and trend["previous"]["run_id"] == "q2"
    gpu3 = [t for t in h["trends"] if t["metric"] == "gpu.tflops" and t["labels"].get("gpu") == "3"]
    assert [t["part"] for t in gpu3] == ["1753724099003"] and len(gpu3[0]["points"]) == 1


# ---------------------------------------------------------------- end to end

DRIFT_SUITE = QUICK_FIO + """\
drift:
  - {metric: fio.iops, labels: {job: randread_4k}, vs: golive, max_drop_pct: 20, severity: fail}
  - {metric: host.cpu_cores, vs: previous, max_drop_pct: 1}
"""


def test_run_fails_on_drift_against_an_imported_golive_run(real: RunRecord, tmp_path: Path):
    store = tmp_path / "hist" / "h.sqlite"
    golden_dir = tmp_path / "golden"
    golden_dir.mkdir()
    fast = acceptance(derive(real, "golden-run", "2025-01-01T00:00:00Z", system_serial=None,
                             scale={"fio.iops": 10.0}))  # as if the disk had been ten times faster
    (golden_dir / "results.json").write_text(json.dumps(fast.to_dict()))
    r = harness("history", "import", str(golden_dir), "--history", str(store))
    assert r.returncode == 0, r.stderr
    assert "imported 1 run(s)" in r.stdout

    suite = write(tmp_path / "drift.yaml", DRIFT_SUITE)
    out = tmp_path / "reports"
    r = harness("run", str(suite), "--profile", "generic", "--output", str(out), "--history", str(store))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED drift:" in r.stdout and "since go-live (golden-run, 2025-01-01" in r.stdout
    (run_dir,) = run_dirs(out)
    doc = results(run_dir)
    drift = next(c for c in doc["checks"] if c["id"] == "drift")
    assert drift["status"] == "failed"
    outcomes = {(e["metric"], e["outcome"]) for e in drift["evaluations"]}
    assert outcomes == {("fio.iops", "fail"), ("host.cpu_cores", "pass")}
    assert doc["history"]["golive"]["run_id"] == "golden-run"
    assert not (out / "history.sqlite").exists()  # the store is never under --output
    html = (run_dir / "report.html").read_text()
    assert "History and trends" in html and '<svg class="trend"' in html and "Inspection sign-off" in html
    suite_el = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    assert suite_el is not None and suite_el.get("failures") == "1"

    (run_dir / "report.html").unlink()
    assert harness("report", str(run_dir)).returncode == 0  # re-rendered from results.json alone
    assert "History and trends" in (run_dir / "report.html").read_text()


def test_profile_drift_rules_merge_through_extends_and_are_validated(tmp_path: Path):
    from harness.checks.registry import kinds
    from harness.config import load_profile, load_suite, validate_paths
    from harness.history.record import rules_of

    write(tmp_path / "base.yaml", "name: base\ndrift:\n"
          "  - {metric: fio.iops, vs: golive, max_drop_pct: 5}\n"
          "  - {metric: fio.bw, vs: golive, max_drop_pct: 5}\n")
    child = write(tmp_path / "child.yaml", "name: child\nextends: base\ndrift:\n"
                  "  - {metric: fio.iops, vs: golive, max_drop_pct: 2, severity: fail}\n"
                  "  - {metric: gpu.retired_pages, vs: previous, max_growth: 0}\n")
    prof = load_profile(child).profile
    assert [(r.metric, r.max_drop_pct, r.severity) for r in prof.drift] == [
        ("fio.iops", 2, "fail"), ("fio.bw", 5, "warn"), ("gpu.retired_pages", None, "warn")]
    suite = load_suite(write(tmp_path / "s.yaml", DRIFT_SUITE), kinds()).suite
    merged = rules_of(suite, prof)
    assert [(r.rule.metric, r.source) for r in merged] == [
        ("fio.iops", "suite quick"), ("host.cpu_cores", "suite quick"), ("fio.iops", "profile child"),
        ("fio.bw", "profile child"), ("gpu.retired_pages", "profile child")]
    assert merged[0].rule.vs == "golive" and merged[2].rule.labels == {}  # different labels: both kept

    bad = write(tmp_path / "bad.yaml", "name: bad\ndrift:\n  - {metric: fio.iopz, max_drop_pct: 5}\n"
                "  - {metric: fio.bw, vs: lastyear, max_drop_pct: 5}\n  - {metric: fio.bw}\n")
    problems = [str(p) for p in validate_paths([bad], kinds())]
    assert any(p.startswith(f"{bad}:3:") and "unknown metric 'fio.iopz'" in p for p in problems), problems
    assert any(p.startswith(f"{bad}:4:") for p in problems), problems
    assert any(p.startswith(f"{bad}:5:") and "give a limit" in p for p in problems), problems


def test_series_follow_the_serial_of_the_part_they_measure():
    from harness.history.drift import key_for
    from harness.history.identity import identity_of

    ident = identity_of({"gpus": gpus(swapped=[5])})
    k = key_for("gpu-burn", Metric("gpu.tflops", 700.0, "TFLOPS", {"gpu": 5, "repeat": 2}), ident)
    assert (k.part, k.labels) == ("1753724099005", (("gpu", "5"),))
    nv = key_for("nvme-health", Metric("nvme.percentage_used", 3, "%", {"device": "nvme0", "serial": "S6X"}),
                 ident)
    assert nv.part == "S6X"
    assert key_for("fio", Metric("fio.iops", 1.0, "IOPS", {"job": "a"}), ident).part is None
