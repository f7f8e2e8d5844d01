"""Drift: this run's metrics against the node's go-live and previous runs. Pure functions.

A series is one metric of one check, run with one set of parameters (their digest,
harness.history.series), with one label set (the `repeat` label folded by median), tied to the
serial of the part it measures when its labels name a GPU, so a swapped GPU starts a new series
instead of being compared with its predecessor. Which earlier runs are candidates (same suite for
"previous", the go-live run) is chosen by harness.history.record.

A rule is judged by compare.judge, on the band it makes around the earlier value (one band rule).
A percent limit against an earlier value of 0 cannot be computed: it is left out, and a rule that
has no other limit says "no reference to compare with (go-live value is 0)" as a note, neither a
pass nor a fail. (compare's own lower/upper are absolute at a reference of 0: there the rule's
author wrote the 0; a drift percent is of a value measured later.)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from harness.compare.judge import judge
from harness.compare.rules import Rule
from harness.config.driftrules import MIN_RATE_DAYS, DriftRule
from harness.config.models import Expectation
from harness.history.identity import NodeIdentity, part_of
from harness.history.series import older_digest
from harness.model import DRIFT_SOURCE, MEASURED, Evaluation, Metric, Outcome, join_labels
from harness.numfmt import fmt_value

# check statuses whose metrics are real measurements (a recorded check measured, with nothing to judge)
VALID = tuple(s.value for s in MEASURED)


@dataclass(frozen=True)
class SeriesKey:
    """One metric series: check id, metric name, labels (text, no `repeat`), part serial, and
    the digest of the check's parameters ("" when the run predates digests)."""

    check: str
    metric: str
    labels: tuple[tuple[str, str], ...]
    part: str | None = None
    params: str = ""

    @property
    def label_dict(self) -> dict[str, str]:
        return dict(self.labels)

    def text(self) -> str:
        inner = join_labels(self.labels)
        return f"{self.check}/{self.metric}" + (f"{{{inner}}}" if inner else "")


@dataclass(frozen=True)
class RunPoint:
    """One earlier run of the node with its series values."""

    run_id: str
    started: str
    verdict: str
    values: Mapping[SeriesKey, float] = field(default_factory=dict)
    suite: str = ""
    params: Mapping[str, str] = field(default_factory=dict)  # check id -> parameter digest


@dataclass(frozen=True)
class SourcedRule:
    """A drift rule with where it came from (suite or profile name)."""

    rule: DriftRule
    source: str


@dataclass(frozen=True)
class DriftOutcome:
    """Evaluations (one per rule and series with a reference) and notes on what was not judged."""

    evaluations: tuple[Evaluation, ...]
    notes: tuple[str, ...]


def key_for(check_id: str, m: Metric, identity: NodeIdentity | None, params: str = "") -> SeriesKey:
    labels = tuple(sorted((k, str(v)) for k, v in m.labels.items() if k != "repeat"))
    part = part_of(m.labels, identity) if identity is not None else None
    return SeriesKey(check_id, m.name, labels, part, params)


def collapse(items: Iterable[tuple[str, Metric]], identity: NodeIdentity | None,
             params: Mapping[str, str] | None = None) -> dict[SeriesKey, tuple[float, str]]:
    """(check id, metric) pairs to one (value, unit) per series: the median over repeats;
    `params` maps check ids to their parameter digests."""
    groups: dict[SeriesKey, list[float]] = {}
    units: dict[SeriesKey, str] = {}
    for check_id, m in items:
        if not math.isfinite(m.value):
            continue
        k = key_for(check_id, m, identity, (params or {}).get(check_id, ""))
        groups.setdefault(k, []).append(m.value)
        units[k] = m.unit
    return {k: (statistics.median(v), units[k]) for k, v in groups.items()}


def parse_time(text: str) -> datetime | None:
    """An ISO 8601 timestamp (a trailing Z allowed) as an aware datetime, or None."""
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def selects(rule: DriftRule, key: SeriesKey) -> bool:
    labels = key.label_dict
    return rule.metric == key.metric and (rule.check is None or rule.check == key.check) \
        and all(k in labels and labels[k] == str(v) for k, v in rule.labels.items())


def reference(key: SeriesKey, vs: str, golive: RunPoint | None, previous: RunPoint | None
              ) -> RunPoint | None:
    """The go-live or the previous run when it measured this series, else None."""
    ref = golive if vs == "golive" else previous
    return ref if ref is not None and key in ref.values else None


def evaluate(rules: Sequence[SourcedRule], current: Mapping[SeriesKey, tuple[float, str]],
             started: str, golive: RunPoint | None, previous: RunPoint | None) -> DriftOutcome:
    """Judge each rule on each current series it selects against the one go-live run and the one
    previous run (the runs the report's header names); a run without the series is a note."""
    evals: list[Evaluation] = []
    notes: list[str] = []
    now = parse_time(started)
    for sr in rules:
        rule = sr.rule
        keys = sorted((k for k in current if selects(rule, k)), key=SeriesKey.text)
        if not keys:
            notes.append(f"{_rule_text(rule)}: no such metric measured in this run")
            continue
        for key in keys:
            value, unit = current[key]
            ref = reference(key, rule.vs, golive, previous)
            if ref is None:
                notes.append(f"{key.text()}: {why_missing(key, rule.vs, golive, previous)}"
                             + (f" (part {key.part})" if key.part else ""))
                continue
            then = parse_time(ref.started)
            days = (now - then).total_seconds() / 86400 if now and then else None
            ev = _judge(sr, key, value, unit, ref, days)
            if ev is None:
                what = "go-live" if rule.vs == "golive" else "previous run's"
                notes.append(f"{key.text()}: no reference to compare with ({what} value is 0)")
            else:
                evals.append(ev)
    return DriftOutcome(tuple(evals), tuple(notes))


def why_missing(key: SeriesKey, vs: str, golive: RunPoint | None, previous: RunPoint | None) -> str:
    """Why the go-live (vs "golive") or previous run has no value to compare `key` with, in words."""
    what = "go-live" if vs == "golive" else "previous run"
    base = golive if vs == "golive" else previous
    if base is None:
        return f"no {what} yet to compare with" + (
            " (no accepted run of an acceptance suite; pin one: harness history pin RUN --as go-live)"
            if vs == "golive" else "")
    head = f"the {what} ({base.run_id}" + (f", suite {base.suite}" if base.suite else "") + ")"
    same = [k for k in base.values if (k.check, k.metric, k.labels) == (key.check, key.metric, key.labels)]
    if any(k.params == key.params and k.part != key.part for k in same):
        return f"{head} measured this on another part: swapped since"
    theirs = base.params.get(key.check, "")
    if older_digest(theirs) and not older_digest(key.params):
        return (f"{head} was recorded by an older harness whose series counted run lengths as parameters: "
                "re-run acceptance, or pin a newer run (harness history pin RUN --as go-live)")
    if same or (key.check in base.params and theirs != key.params):
        return (f"{head} ran check {key.check} with parameters that measure something else (block size, "
                "engine, dtype, message sizes, tests; a longer or shorter run would pair)")
    if key.check not in base.params and not any(k.check == key.check for k in base.values):
        return f"{head} did not run check {key.check}"
    return f"{head} measured no value of this series (check {key.check} gave other labels or none)"


def _rule_text(rule: DriftRule) -> str:
    sel = join_labels(sorted(rule.labels.items()))
    return rule.metric + (f"{{{sel}}}" if sel else "") + (f" (check {rule.check})" if rule.check else "")


def _judge(sr: SourcedRule, key: SeriesKey, value: float, unit: str, ref: RunPoint,
           days: float | None) -> Evaluation | None:
    """The rule on one series, judged by compare.judge on the band `_band` makes of it; None when a
    reference of 0 leaves the rule no limit (its percent limits cannot be computed)."""
    rule = sr.rule
    r = ref.values[key]
    e = _band(rule, r, unit, days)
    if e is None:
        return None
    labels: dict[str, Any] = {**key.label_dict, "vs": "go-live" if rule.vs == "golive" else "previous"}
    if key.part:
        labels["part"] = key.part
    if key.check:
        labels["check"] = key.check
    (ev,) = judge([Rule(e, DRIFT_SOURCE + sr.source)], [Metric(key.metric, value, unit)]).evaluations
    if ev.outcome is Outcome.ERROR:  # a number that is not finite: compare's words say which
        return replace(ev, labels=labels)
    limits = _limit_words(rule, r, unit)
    scale = abs(r)
    since = "go-live" if rule.vs == "golive" else "the previous run"
    change = f"{100 * (value - r) / scale:+.1f}%" if scale else f"{value - r:+.4g} {unit}"
    when = f"{ref.run_id}, {ref.started[:10]}" + (f", {days:.0f} days ago" if days and days >= 1 else "")
    msg = f"{change} since {since} ({when}: {fmt_value(r, unit, 4)} → {fmt_value(value, unit, 4)})"
    if ev.outcome is Outcome.PASS:
        msg += f"; within {', '.join(limits)}"
    else:
        msg = "drifted: " + msg + f"; limit {', '.join(limits)}"
    return replace(ev, labels=labels, message=msg + (f" — {rule.note}" if rule.note else ""))


def _band(rule: DriftRule, r: float, unit: str, days: float | None) -> Expectation | None:
    """The rule as one of compare's bands around the reference r: percent limits as compare's
    fractions (lower/upper), growth limits as its absolute `max`. A percent of a reference of 0
    cannot be computed, so at r == 0 percent limits are left out, and a rule of percent limits
    alone has no band (None: `evaluate` notes it, neither a pass nor a fail). compare's own
    lower/upper are absolute at a reference of 0; a drift percent never is."""
    pct = r != 0
    lower = rule.max_drop_pct / 100 if rule.max_drop_pct is not None and pct else None
    upper = rule.max_rise_pct / 100 if rule.max_rise_pct is not None and pct else None
    high: float | None = None
    if rule.max_growth is not None:
        high = r + rule.max_growth
    if rule.max_growth_per_90d is not None:
        span = max(days or 0.0, MIN_RATE_DAYS)
        high = _lower(high, r + rule.max_growth_per_90d * span / 90)
    if lower is None and upper is None and high is None:
        return None
    return Expectation.model_construct(metric=rule.metric, labels={}, check=None, reference=r, lower=lower,
                                       upper=upper, min=None, max=high, unit=unit, reduce="each",
                                       severity=rule.severity, xfail=None, note=None, if_measured=False,
                                       sibling=None)


def _limit_words(rule: DriftRule, r: float, unit: str) -> list[str]:
    """The limits `_band` keeps, in words: 'drop ≤ 10%', 'growth ≤ 2 count per 90 days'."""
    words = []
    if rule.max_drop_pct is not None and r != 0:
        words.append(f"drop ≤ {rule.max_drop_pct:g}%")
    if rule.max_rise_pct is not None and r != 0:
        words.append(f"rise ≤ {rule.max_rise_pct:g}%")
    if rule.max_growth is not None:
        words.append(f"growth ≤ {rule.max_growth:g} {unit}")
    if rule.max_growth_per_90d is not None:
        words.append(f"growth ≤ {rule.max_growth_per_90d:g} {unit} per 90 days")
    return words


def _lower(a: float | None, b: float) -> float:
    return b if a is None else min(a, b)
