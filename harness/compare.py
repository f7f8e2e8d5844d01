"""Expectations against metrics: one pure function and its helpers. Never touches the machine.

Bands: with a reference r, `lower`/`upper` are fractions (r*(1-lower) .. r*(1+upper)); with a
reference of zero they are absolute. `min`/`max` are absolute bounds and narrow the band. None
means unbounded. Reductions (min/max/mean/sum) fold all matching metrics into one value first.
A `sibling` expectation takes its bound from the median of the metric's siblings (siblings.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness import siblings
from harness.config.models import Expectation
from harness.model import Evaluation, Metric, Outcome, Status


@dataclass(frozen=True)
class Rule:
    """An expectation with where it came from (profile name, or 'suite')."""

    expectation: Expectation
    source: str


def band(e: Expectation) -> tuple[float | None, float | None]:
    """The allowed [low, high] of an expectation; None for an open side."""
    low: float | None = None
    high: float | None = None
    r = e.reference
    if r is not None:
        scale = abs(r) if r != 0 else 1.0
        if e.lower is not None:
            low = r - scale * e.lower
        if e.upper is not None:
            high = r + scale * e.upper
    if e.min is not None:
        low = e.min if low is None else max(low, e.min)
    if e.max is not None:
        high = e.max if high is None else min(high, e.max)
    return low, high


def sibling_rule(e: Expectation) -> siblings.SiblingRule:
    """The SiblingRule of a `sibling` expectation: min_ratio/max_below judge the low side (higher is
    better), max_ratio/max_above the high side."""
    s = e.sibling
    if s is None:
        raise ValueError(f"{e.metric}: not a sibling expectation")
    vary, sev = tuple(s.vary), e.severity
    if s.min_ratio is not None:
        return siblings.SiblingRule(e.metric, vary, 1 - s.min_ratio, "higher", s.min_siblings, sev)
    if s.max_ratio is not None:
        return siblings.SiblingRule(e.metric, vary, s.max_ratio - 1, "lower", s.min_siblings, sev)
    if s.max_below is not None:
        return siblings.SiblingRule(e.metric, vary, None, "higher", s.min_siblings, sev, s.max_below)
    return siblings.SiblingRule(e.metric, vary, None, "lower", s.min_siblings, sev, s.max_above)


def describe_band(low: float | None, high: float | None, unit: str) -> str:
    if low is not None and high is not None:
        return f"{_num(low)}..{_num(high)} {unit}"
    if low is not None:
        return f">= {_num(low)} {unit}"
    if high is not None:
        return f"<= {_num(high)} {unit}"
    return "unbounded"


def _num(x: float) -> str:
    return f"{x:.4g}"


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
    want = describe_band(low, high, e.unit)
    if ok:
        outcome = Outcome.XPASS if e.xfail else Outcome.PASS
        msg = f"measured {_num(measured)} {unit}, within {want}"
        if e.xfail:
            msg += f"; marked known issue ({e.xfail}) but passed"
    else:
        if e.xfail:
            outcome = Outcome.XFAIL
        else:
            outcome = Outcome.FAIL if e.severity == "fail" else Outcome.WARN
        msg = f"measured {_num(measured)} {unit}, expected {want}"
        if e.reference is not None:
            msg += f" (reference {_num(e.reference)})"
        if e.xfail:
            msg += f"; known issue: {e.xfail}"
    return Evaluation(e.metric, dict(labels), outcome, e.severity, measured, unit, e.reference,
                      low, high, e.reduce, msg, e.xfail, source)


def _error(e: Expectation, source: str, msg: str, labels: Mapping[str, str | int]) -> Evaluation:
    low, high = band(e)
    return Evaluation(e.metric, dict(labels), Outcome.ERROR, e.severity, None, e.unit, e.reference,
                      low, high, e.reduce, msg, e.xfail, source)


def _selector_text(e: Expectation) -> str:
    labels = ",".join(f"{k}={v}" for k, v in sorted(e.labels.items()))
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
        value = _reduce(e.reduce, [m.value for m in chosen])
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


def applicable(rules: Iterable[Rule], check_id: str, metric_names: Iterable[str]) -> list[Rule]:
    """The rules that concern a check: its kind can produce the metric, and `check:` fits."""
    names = set(metric_names)
    return [r for r in rules if r.expectation.metric in names
            and (r.expectation.check is None or r.expectation.check == check_id)]


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
