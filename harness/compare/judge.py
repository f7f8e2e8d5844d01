"""The judge: every rule and every finding against a check's metrics, in one pure function.

`judge(rules, metrics, findings)` is the only place verdicts are made; the runner calls it once
per check with the profile's and the suite's rules, the kind's own rules (`KindHooks.own_rules`,
the telemetry's) and the kind's findings (model.Finding), and takes the status from its result.
It never touches the machine. Reductions (min/max/mean/sum) fold all matching metrics into one
value first; the bands are rules.band's.

A number that is not finite (NaN, inf; a deviation or a sum that overflows, e.g. 1e308 measured
against a reference of 10) is never judged: that evaluation is an error, measured/bounds that are
not finite are left out (results.json is strict JSON), and the check is ERRORED, never FAILED.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from harness import siblings
from harness.compare.rules import OwnRule, Rule, band, describe_band, sibling_rule
from harness.config.models import Expectation
from harness.model import Evaluation, Finding, Metric, Outcome, Status, join_labels
from harness.numfmt import digits_for, fmt_value


def _reduce(how: str, values: Sequence[float]) -> float:
    if how == "min":
        return min(values)
    if how == "max":
        return max(values)
    if how == "sum":
        return math.fsum(values)
    return math.fsum(values) / len(values)


def _judge(e: Expectation, source: str, measured: float, unit: str,
           labels: Mapping[str, str | int]) -> Evaluation:
    low, high = band(e)
    if unit != e.unit:
        return _error(e, source, f"metric {e.metric} is in {unit}, expectation in {e.unit}", labels)
    if not math.isfinite(measured):
        return _error(e, source, f"measured {e.metric} is not a finite number ({measured})", labels)
    ok = (low is None or measured >= low) and (high is None or measured <= high)
    d = digits_for(measured, (low, high), unit)
    want = describe_band(low, high, e.unit, d)
    if ok:
        outcome = Outcome.XPASS if e.xfail else Outcome.PASS
        msg = f"measured {fmt_value(measured, unit, d)}, within {want}"
        if e.xfail:
            msg += f"; marked known issue ({e.xfail}) but passed"
    else:
        if e.xfail:
            outcome = Outcome.XFAIL
        else:
            outcome = Outcome.FAIL if e.severity == "fail" else Outcome.WARN
        msg = f"measured {fmt_value(measured, unit, d)}, expected {want}"
        if e.reference is not None:
            msg += f" (reference {fmt_value(e.reference, unit, d)})"
        if e.xfail:
            msg += f"; known issue: {e.xfail}"
    return Evaluation(metric=e.metric, labels=dict(labels), outcome=outcome, severity=e.severity,
                      measured=measured, unit=unit, reference=e.reference, low=low, high=high,
                      reduce=e.reduce, message=msg, xfail=e.xfail, source=source)


def _error(e: Expectation, source: str, msg: str, labels: Mapping[str, str | int]) -> Evaluation:
    low, high = band(e)
    return Evaluation(metric=e.metric, labels=dict(labels), outcome=Outcome.ERROR, severity=e.severity,
                      measured=None, unit=e.unit, reference=e.reference, low=low, high=high,
                      reduce=e.reduce, message=msg, xfail=e.xfail, source=source)


def _selector_text(e: Expectation) -> str:
    labels = join_labels(sorted(e.labels.items()))
    return f"{e.metric}{{{labels}}}" if labels else e.metric


def evaluate(rules: Iterable[Rule], metrics: Sequence[Metric]) -> tuple[Evaluation, ...]:
    """Judge every rule against the metrics it selects. A rule that selects nothing is an error,
    unless it is `if_measured` (then it has no evaluation)."""
    out: list[Evaluation] = []
    for rule in rules:
        e = rule.expectation
        chosen = [m for m in metrics if m.name == e.metric and m.matches(e.labels)]
        if not chosen and e.if_measured:
            continue
        if not chosen:
            out.append(_error(e, rule.source, f"no metric {_selector_text(e)} was measured", e.labels))
            continue
        if e.sibling is not None:
            out.extend(_siblings(rule, chosen))
            continue
        if e.reduce == "each":
            out.extend(_judge(e, rule.source, m.value, m.unit, m.labels) for m in chosen)
            continue
        units = {m.unit for m in chosen}
        if len(units) > 1:
            out.append(_error(e, rule.source, f"cannot reduce {e.metric} across units "
                              f"{sorted(units)}", e.labels))
            continue
        try:
            value = _reduce(e.reduce, [m.value for m in chosen])
        except OverflowError:  # math.fsum of values near the float limit
            out.append(_error(e, rule.source, f"the {e.reduce} of {e.metric} over {len(chosen)} metrics "
                              "is not a finite number", e.labels))
            continue
        labels = {**e.labels, "reduce": f"{e.reduce} of {len(chosen)}"}
        out.append(_judge(e, rule.source, value, units.pop(), labels))
    return tuple(out)


def _siblings(rule: Rule, chosen: Sequence[Metric]) -> list[Evaluation]:
    e, sib = rule.expectation, sibling_rule(rule.expectation)
    units = {m.unit for m in chosen}
    if sib.offset is not None and units != {e.unit}:
        return [_error(e, rule.source, f"cannot add {e.unit} to the median of {e.metric} in "
                       f"{', '.join(sorted(units))}", e.labels)]
    return list(siblings.judge(sib, chosen, rule.source))



def status_of(evaluations: Sequence[Evaluation]) -> Status:
    """A valid check's status from its evaluations: fail > error > warn > pass; with no evaluation
    at all it is RECORDED (measured, nothing to judge), never PASSED."""
    if not evaluations:
        return Status.RECORDED
    outcomes = {e.outcome for e in evaluations}
    if Outcome.FAIL in outcomes:
        return Status.FAILED
    if Outcome.ERROR in outcomes:
        return Status.ERRORED
    if outcomes & {Outcome.WARN, Outcome.XPASS}:
        return Status.WARNED
    return Status.PASSED


@dataclass(frozen=True)
class Judgement:
    """A check's evaluations, and why some could not be made (a number that is not finite)."""

    evaluations: tuple[Evaluation, ...]
    problems: tuple[str, ...] = ()

    @property
    def status(self) -> Status:
        """ERRORED when something could not be judged, else status_of(evaluations)."""
        return Status.ERRORED if self.problems else status_of(self.evaluations)


def judge(rules: Iterable[OwnRule], metrics: Sequence[Metric],
          findings: Iterable[Finding] = ()) -> Judgement:
    """Every rule (a Rule, or a kind's SiblingRule) against the metrics, in order, then every
    finding as an evaluation. Nothing that is not a finite number survives into an evaluation."""
    out: list[Evaluation] = []
    for r in rules:
        out += siblings.judge(r, metrics) if isinstance(r, siblings.SiblingRule) else evaluate([r], metrics)
    out += [_of_finding(f) for f in findings]
    checked: list[Evaluation] = []
    problems: list[str] = []
    for ev in out:
        fixed, problem = _finite_or_error(ev)
        checked.append(fixed)
        if problem:
            problems.append(problem)
    return Judgement(tuple(checked), tuple(problems))


def _of_finding(f: Finding) -> Evaluation:
    return Evaluation(metric=f.metric, labels=dict(f.labels), outcome=f.outcome, severity=f.severity,
                      measured=f.measured, unit=f.unit, reference=f.reference, low=f.low, high=f.high,
                      reduce=f.reduce, message=f.message, source=f.source)


def _bad(x: float | None) -> bool:
    return x is not None and not math.isfinite(x)


def _finite_or_error(ev: Evaluation) -> tuple[Evaluation, str | None]:
    """The evaluation unchanged when every number in it is finite; else an ERROR without the
    numbers that are not, and a problem line saying which."""
    try:
        delta = ev.delta_pct
    except (OverflowError, ZeroDivisionError):
        delta = math.inf
    if not any(_bad(x) for x in (ev.measured, ev.reference, ev.low, ev.high, delta)):
        return ev, None
    where = join_labels(sorted(ev.labels.items()))
    if _bad(ev.measured):
        why = f"measured value is not a finite number ({ev.measured!r})"
    elif _bad(ev.reference) or _bad(ev.low) or _bad(ev.high):
        why = (f"expected band is not a finite number (reference {ev.reference!r}, "
               f"{ev.low!r}..{ev.high!r})")
    else:
        why = (f"measured {fmt_value(ev.measured or 0.0, ev.unit)} is too far from the reference "
               f"{fmt_value(ev.reference or 0.0, ev.unit)} to judge (the deviation is not a finite number)")
    measured = None if _bad(ev.measured) or _bad(delta) else ev.measured

    def keep(x: float | None) -> float | None:
        return None if _bad(x) else x

    fixed = replace(ev, outcome=Outcome.ERROR, measured=measured, reference=keep(ev.reference),
                    low=keep(ev.low), high=keep(ev.high), message=f"not judged: {why}")
    return fixed, f"{ev.metric}{{{where}}}: {why}"


def finite_metrics(metrics: Sequence[Metric]) -> tuple[list[Metric], list[str]]:
    """Metrics with a finite value, and a problem for each that has none: NaN or inf cannot be
    judged, and results.json (strict JSON) cannot hold them."""
    good, problems = [], []
    for m in metrics:
        if isinstance(m.value, (int, float)) and math.isfinite(m.value):
            good.append(m)
        else:
            labels = join_labels(m.labels)
            problems.append(f"{m.name}{{{labels}}} is not a finite number ({m.value!r})")
    return good, problems
