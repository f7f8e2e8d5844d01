"""Drift: this run's metrics against the node's go-live and previous runs. Pure functions.

A series is one metric of one check, run with one set of parameters (their digest,
harness.history.series), with one label set (the `repeat` label folded by median), tied to the
serial of the part it measures when its labels name a GPU, so a swapped GPU starts a new series
instead of being compared with its predecessor. Which earlier runs are candidates (same suite for
"previous", the go-live run) is chosen by harness.history.record.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from harness.config.driftrules import MIN_RATE_DAYS, DriftRule
from harness.history.identity import NodeIdentity, part_of
from harness.history.series import older_digest
from harness.model import MEASURED, Evaluation, Metric, Outcome, join_labels
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
            evals.append(_judge(sr, key, value, unit, ref, days))
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
           days: float | None) -> Evaluation:
    rule = sr.rule
    r = ref.values[key]
    low: float | None = None
    high: float | None = None
    problems: list[str] = []
    limits: list[str] = []
    scale = abs(r)
    if rule.max_drop_pct is not None and scale:
        low = r - scale * rule.max_drop_pct / 100
        limits.append(f"drop ≤ {rule.max_drop_pct:g}%")
    if rule.max_rise_pct is not None and scale:
        high = r + scale * rule.max_rise_pct / 100
        limits.append(f"rise ≤ {rule.max_rise_pct:g}%")
    if rule.max_growth is not None:
        high = _lower(high, r + rule.max_growth)
        limits.append(f"growth ≤ {rule.max_growth:g} {unit}")
    if rule.max_growth_per_90d is not None:
        span = max(days or 0.0, MIN_RATE_DAYS)
        high = _lower(high, r + rule.max_growth_per_90d * span / 90)
        limits.append(f"growth ≤ {rule.max_growth_per_90d:g} {unit} per 90 days")
    if low is not None and value < low:
        problems.append("fell")
    if high is not None and value > high:
        problems.append("rose")
    since = "go-live" if rule.vs == "golive" else "the previous run"
    change = f"{100 * (value - r) / scale:+.1f}%" if scale else f"{value - r:+.4g} {unit}"
    when = f"{ref.run_id}, {ref.started[:10]}" + (f", {days:.0f} days ago" if days and days >= 1 else "")
    msg = f"{change} since {since} ({when}: {fmt_value(r, unit, 4)} → {fmt_value(value, unit, 4)})"
    if not limits:
        msg += "; reference is 0, percent limits do not apply"
    if problems:
        outcome = Outcome.FAIL if rule.severity == "fail" else Outcome.WARN
        msg = "drifted: " + msg + f"; limit {', '.join(limits)}"
    else:
        outcome = Outcome.PASS
        if limits:
            msg += f"; within {', '.join(limits)}"
    labels: dict[str, Any] = {**key.label_dict, "vs": "go-live" if rule.vs == "golive" else "previous"}
    if key.part:
        labels["part"] = key.part
    if key.check:
        labels["check"] = key.check
    return Evaluation(metric=key.metric, labels=labels, outcome=outcome, severity=rule.severity,
                      measured=value, unit=unit, reference=r, low=low, high=high, reduce="each",
                      message=msg + (f" — {rule.note}" if rule.note else ""), source=f"drift: {sr.source}")


def _lower(a: float | None, b: float) -> float:
    return b if a is None else min(a, b)
