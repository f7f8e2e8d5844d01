"""The pure comparison: bands, bounds, zero references, reductions, missing metrics, xfail."""

from __future__ import annotations

import json
import math

import pytest

from harness import siblings
from harness.compare.judge import evaluate, judge, status_of
from harness.compare.rules import Rule, applicable, band
from harness.config.models import Expectation
from harness.model import Evaluation, Finding, Metric, Outcome, Status


def exp(**kw) -> Expectation:
    kw.setdefault("metric", "fio.bw")
    kw.setdefault("unit", "GB/s")
    return Expectation.model_validate(kw)


def bw(value: float, **labels) -> Metric:
    return Metric("fio.bw", value, "GB/s", labels)


def one(e: Expectation, metrics) -> tuple:
    return evaluate([Rule(e, "test")], metrics)


@pytest.mark.parametrize("measured, outcome", [(9.0, Outcome.PASS), (8.0, Outcome.PASS),
                                               (7.99, Outcome.FAIL), (12.0, Outcome.PASS)])
def test_lower_tolerance_is_a_fraction_of_reference(measured, outcome):
    (ev,) = one(exp(reference=10, lower=0.2), [bw(measured)])
    assert ev.outcome is outcome
    assert ev.low == pytest.approx(8.0) and ev.high is None


def test_two_sided_band_and_delta():
    e = exp(metric="fio.clat_p99", unit="us", reference=100, lower=0.5, upper=0.1)
    (ev,) = one(e, [Metric("fio.clat_p99", 111, "us")])
    assert ev.outcome is Outcome.FAIL
    assert (ev.low, ev.high) == (50, pytest.approx(110))
    assert ev.delta_pct == pytest.approx(11.0)
    assert "measured 111 us, expected [50, 110] us (reference 100 us)" in ev.message


def test_absolute_min_and_max_narrow_the_band():
    assert band(exp(reference=10, lower=0.5, min=7)) == (7, None)
    assert band(exp(reference=10, upper=0.5, max=12)) == (None, 12)
    assert band(exp(min=1, max=2)) == (1, 2)


def test_zero_reference_takes_absolute_tolerances():
    e = exp(metric="gpu.errors", unit="count", reference=0, upper=0)
    assert band(e) == (None, 0)
    assert one(e, [Metric("gpu.errors", 0, "count")])[0].outcome is Outcome.PASS
    assert one(e, [Metric("gpu.errors", 1, "count")])[0].outcome is Outcome.FAIL
    e2 = exp(metric="gpu.errors", unit="count", reference=0, upper=3)
    assert one(e2, [Metric("gpu.errors", 3, "count")])[0].outcome is Outcome.PASS
    assert one(e2, [Metric("gpu.errors", 4, "count")])[0].delta_pct is None


def test_negative_reference_band_is_symmetric_in_magnitude():
    assert band(exp(reference=-10, lower=0.1, upper=0.1)) == (-11, -9)


def test_each_judges_every_matching_series():
    evs = one(exp(labels={"rw": "read"}, min=1.0),
              [bw(2.0, rw="read", job="a"), bw(0.5, rw="read", job="b"), bw(0.1, rw="write", job="a")])
    assert [e.outcome for e in evs] == [Outcome.PASS, Outcome.FAIL]
    assert evs[1].labels == {"job": "b", "rw": "read"}


@pytest.mark.parametrize("how, value", [("min", 1.0), ("max", 3.0), ("mean", 2.0), ("sum", 6.0)])
def test_reductions(how, value):
    (ev,) = one(exp(reduce=how, min=0), [bw(1.0, gpu=0), bw(2.0, gpu=1), bw(3.0, gpu=2)])
    assert ev.measured == pytest.approx(value)
    assert ev.labels["reduce"] == f"{how} of 3"


def test_missing_metric_is_an_error_not_a_failure():
    (ev,) = one(exp(labels={"job": "nope"}, min=1), [bw(5.0, job="seq")])
    assert ev.outcome is Outcome.ERROR
    assert "no metric fio.bw{job=nope} was measured" in ev.message
    assert status_of([ev]) is Status.ERRORED


def test_if_measured_rule_is_silent_when_its_variant_did_not_run_and_judged_when_it_did():
    rule = Expectation(metric="gpu_burn.tflops", labels={"dtype": "bf16"}, min=711, unit="TFLOPS",
                       if_measured=True)
    gpu_burn_binary = [Metric("gpu_burn.tflops", 0.786, "TFLOPS", {"gpu": 1})]  # no dtype label
    assert evaluate([Rule(rule, "h200")], gpu_burn_binary) == ()
    slow = [Metric("gpu_burn.tflops", 650.0, "TFLOPS", {"gpu": 0, "dtype": "bf16"}),
            Metric("gpu_burn.tflops", 780.0, "TFLOPS", {"gpu": 1, "dtype": "bf16"})]
    assert [e.outcome for e in evaluate([Rule(rule, "h200")], slow)] == [Outcome.FAIL, Outcome.PASS]


def test_profile_sibling_expectations_ratio_and_offset():
    tflops = [Metric("gpu_burn.tflops", v, "TFLOPS", {"gpu": i, "dtype": "bf16"})
              for i, v in enumerate([790, 785, 792, 700, 788, 791, 789, 786])]
    slow = Expectation(metric="gpu_burn.tflops", labels={"dtype": "bf16"}, unit="TFLOPS",
                       sibling={"min_ratio": 0.95})
    (ev,) = evaluate([Rule(slow, "h200")], tflops)
    assert ev.outcome is Outcome.FAIL and ev.labels["gpu"] == 3 and ev.source == "h200"
    assert ev.low == pytest.approx(0.95 * 788.5) and "11.2 % below the median 788 TFLOPS" in ev.message
    hot = Expectation(metric="gpu.temp_max", unit="C", sibling={"max_above": 10}, severity="warn")
    temps = [Metric("gpu.temp_max", v, "C", {"gpu": i}) for i, v in enumerate([70, 71, 83, 72])]
    (ev,) = evaluate([Rule(hot, "p")], temps)
    assert ev.outcome is Outcome.WARN and ev.labels == {"gpu": 2} and ev.high == 81.5
    assert status_of([ev]) is Status.WARNED
    # too few siblings: nothing to judge; nothing measured at all: an error, as for any rule
    assert evaluate([Rule(hot, "p")], temps[:2]) == ()
    (missing,) = evaluate([Rule(hot, "p")], [])
    assert missing.outcome is Outcome.ERROR
    # an offset in another unit than the metric's cannot be added to its median
    fahrenheit = [Metric("gpu.temp_max", 160.0 + i, "F", {"gpu": i}) for i in range(3)]
    (bad_unit,) = evaluate([Rule(hot, "p")], fahrenheit)
    assert bad_unit.outcome is Outcome.ERROR and "cannot add C" in bad_unit.message


@pytest.mark.parametrize("fields, why", [
    ({"sibling": {"min_ratio": 0.9, "max_above": 10}}, "exactly one of"),
    ({"sibling": {}}, "exactly one of"),
    ({"sibling": {"min_ratio": 0.9}, "min": 700}, "no reference, lower, upper, min or max"),
    ({"sibling": {"min_ratio": 1.2}}, "1.2 is a fraction, so it means 120%"),
    ({"sibling": {"max_ratio": 1.1}, "reduce": "min"}, "no reduce"),
    ({"sibling": {"max_ratio": 1.1}, "xfail": "ticket"}, "cannot be a known issue"),
])
def test_sibling_expectations_are_validated(fields, why):
    with pytest.raises(ValueError, match=why):
        Expectation.model_validate({"metric": "gpu_burn.tflops", "unit": "TFLOPS", **fields})


def test_label_values_compare_as_text():
    m = Metric("nccl.busbw", 400.0, "GB/s", {"size": 8589934592})
    (ev,) = one(exp(metric="nccl.busbw", labels={"size": "8589934592"}, min=300), [m])
    assert ev.outcome is Outcome.PASS


def test_warn_severity_and_xfail_xpass():
    (w,) = one(exp(min=5, severity="warn"), [bw(1.0)])
    assert w.outcome is Outcome.WARN and status_of([w]) is Status.WARNED
    (xf,) = one(exp(min=5, xfail="vendor bug 123"), [bw(1.0)])
    assert xf.outcome is Outcome.XFAIL and "known issue: vendor bug 123" in xf.message
    assert status_of([xf]) is Status.PASSED
    (xp,) = one(exp(min=5, xfail="vendor bug 123"), [bw(9.0)])
    assert xp.outcome is Outcome.XPASS and status_of([xp]) is Status.WARNED


def test_unit_mismatch_and_nan_are_errors():
    (u,) = one(exp(min=1), [Metric("fio.bw", 5.0, "IOPS")])
    assert u.outcome is Outcome.ERROR and "is in IOPS" in u.message
    (n,) = one(exp(min=1), [bw(math.nan)])
    assert n.outcome is Outcome.ERROR and "not a finite number" in n.message


def test_status_precedence():
    def ev(o: Outcome):
        return one(exp(min=1), [bw(5.0)])[0].__class__(
            metric="m", labels={}, outcome=o, severity="fail", measured=1.0, unit="GB/s", reference=None,
            low=None, high=None, reduce="each", message="")
    assert status_of([ev(Outcome.PASS), ev(Outcome.ERROR), ev(Outcome.FAIL)]) is Status.FAILED
    assert status_of([ev(Outcome.PASS), ev(Outcome.ERROR)]) is Status.ERRORED
    assert status_of([ev(Outcome.PASS), ev(Outcome.XFAIL)]) is Status.PASSED
    assert status_of([]) is Status.RECORDED  # measured, nothing to judge: never a pass


def test_applicable_filters_by_metric_and_check_id():
    rules = [Rule(exp(min=1), "p"), Rule(exp(min=1, check="other"), "p"),
             Rule(exp(metric="gpu.temp_max", unit="C", max=90), "p")]
    got = applicable(rules, "fio-quick", ["fio.bw", "fio.iops"])
    assert [r.expectation.check for r in got] == [None]


# ---------------------------------------------------------------- one judge, nothing non-finite (#20)

def strict_json(evs) -> str:
    return json.dumps([e.to_dict() for e in evs], allow_nan=False)


def test_issue_20_absurd_finite_measurement_is_not_judged_and_stays_writable():
    """1e308 GB/s against 10 GB/s +-50%: the deviation overflows; an error, never a failure."""
    j = judge([Rule(exp(reference=10, lower=0.5, upper=0.5), "suite s")], [bw(1e308)])
    (ev,) = j.evaluations
    assert ev.outcome is Outcome.ERROR and ev.measured is None and (ev.low, ev.high) == (5.0, 15.0)
    assert ev.message == ("not judged: measured 1.00 × 10^308 GB/s is too far from the reference 10 GB/s to "
                          "judge (the deviation is not a finite number)")
    assert j.problems == ("fio.bw{}: " + ev.message.removeprefix("not judged: "),)
    assert j.status is Status.ERRORED
    strict_json(j.evaluations)


@pytest.mark.parametrize("value", [1e308, -1e308, 5e-324, 0.0, 10.0, 1e-300])
def test_tiny_and_huge_finite_values_are_judged_or_errored_never_unwritable(value):
    j = judge([Rule(exp(reference=10, lower=0.5, upper=0.5), "s")], [bw(value)])
    (ev,) = j.evaluations
    strict_json(j.evaluations)
    if abs(value) > 1e300:
        assert ev.outcome is Outcome.ERROR and j.status is Status.ERRORED
    else:
        assert ev.outcome is (Outcome.PASS if value == 10.0 else Outcome.FAIL)
        assert j.problems == ()


def test_a_band_that_overflows_is_an_error_not_a_pass():
    j = judge([Rule(exp(reference=1e308, upper=1.0, lower=0.5), "s")], [bw(1e308)])
    (ev,) = j.evaluations
    assert ev.outcome is Outcome.ERROR and ev.high is None and ev.low == 5e307
    assert "expected band is not a finite number" in ev.message and j.status is Status.ERRORED
    strict_json(j.evaluations)


@pytest.mark.parametrize("how", ["sum", "mean"])
def test_a_reduction_that_overflows_is_an_error(how):
    (ev,) = judge([Rule(exp(reduce=how, min=1), "s")], [bw(1e308, dev="a"), bw(1e308, dev="b")]).evaluations
    assert ev.outcome is Outcome.ERROR and ev.measured is None
    assert ev.message == f"the {how} of fio.bw over 2 metrics is not a finite number"


def test_siblings_whose_median_overflows_are_not_judged():
    rule = siblings.SiblingRule("fio.bw", ("dev",), 0.1)
    j = judge([rule], [bw(1.7e308, dev=d) for d in "abc"] + [bw(1.6e308, dev="d")])
    assert j.evaluations and {e.outcome for e in j.evaluations} == {Outcome.ERROR}
    assert j.status is Status.ERRORED
    strict_json(j.evaluations)


def test_findings_become_evaluations_after_the_rules_and_non_finite_ones_errors():
    found = [Finding(metric="gpu.lost", labels={"gpu": 1}, outcome=Outcome.FAIL, measured=1.0, high=0.0,
                     message="GPU 1 lost", source="telemetry"),
             Finding(metric="gpu.temp_margin", outcome=Outcome.WARN, severity="warn", measured=math.nan,
                     unit="C", message="hot", source="power")]
    j = judge([Rule(exp(min=1), "s")], [bw(5.0)], found)
    rule, lost, hot = j.evaluations
    assert (rule.source, rule.outcome) == ("s", Outcome.PASS)
    assert (lost.metric, lost.labels, lost.outcome, lost.high, lost.xfail) == (
        "gpu.lost", {"gpu": 1}, Outcome.FAIL, 0.0, None)
    assert hot.outcome is Outcome.ERROR and hot.measured is None
    assert j.problems == ("gpu.temp_margin{}: measured value is not a finite number (nan)",)


def test_a_finding_cannot_claim_a_known_issue():
    with pytest.raises(ValueError, match="xfail/xpass come from rules"):
        Finding(metric="m", outcome=Outcome.XFAIL, message="")


def test_evaluation_is_built_by_keyword_only():
    with pytest.raises(TypeError):
        Evaluation("m", {}, Outcome.PASS, "fail", 1.0, "GB/s", None, None, None, "each", "")  # type: ignore[misc]


def test_a_vanishing_measurement_reads_as_a_power_of_ten_not_as_zero():
    """1e-308 GB/s read 'measured 0.000000000000000 kB/s': as if nothing had been measured."""
    from harness.numfmt import fmt_num, fmt_value

    (ev,) = one(exp(min=1), [bw(1e-308)])
    assert ev.outcome is Outcome.FAIL
    assert "measured 1.00 × 10^-302 kB/s, expected >= 1 GB/s" in ev.message
    assert fmt_num(5e-324) == "4.94 × 10^-324" and fmt_num(-2.5e-20) == "-2.50 × 10^-20"
    assert fmt_num(0.000412) == "0.000412" and fmt_value(1e-12, "GB/s") == "0.00000100 kB/s"
