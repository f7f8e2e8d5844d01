"""Config rules against collected facts: one pure function and its helpers.

Each rule gives one outcome per device it selects (or one for `same`). A fact that could not be
known (value None) makes the rule *skip* with the fact's reason, except a GPU fact when the
profile expects GPUs: then it is an error, as a GPU check would be. Outcomes other than skip are
also Findings, which compare.judge turns into Evaluations, so the check's status follows the
usual fail > error > warn > pass order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness import sections
from harness.config.factrule import FactRule, describe
from harness.facts import CONFIG_SOURCE, FACTS, UNLIMITED, Fact, FactValue, display
from harness.model import Finding, Outcome, join_labels

_VERSION = re.compile(r"\s*v?(\d+(?:[.\-]\d+)*)")


@dataclass(frozen=True)
class FactOutcome:
    """One rule judged against one fact (or, for `same`, against every device's fact)."""

    fact: str
    labels: Mapping[str, str]
    found: str
    expected: str
    outcome: str  # pass | warn | fail | error | skip
    severity: str
    message: str
    rule_source: str
    note: str = ""
    value: FactValue = None
    low: float | None = None
    high: float | None = None
    reduce: str = "each"  # "same" for a same-on-every-device rule

    def to_dict(self) -> sections.AuditOutcome:
        return {"fact": self.fact, "labels": dict(self.labels), "found": self.found,
                "expected": self.expected, "outcome": self.outcome, "severity": self.severity,
                "message": self.message, "rule_source": self.rule_source, "note": self.note}

    def finding(self) -> Finding | None:
        """The outcome as a Finding (None for skip): measured only for numeric facts."""
        if self.outcome == "skip":
            return None
        spec = FACTS[self.fact]
        v = self.value
        measured = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        return Finding(metric=self.fact, labels=self.labels, outcome=Outcome(self.outcome),
                       severity=self.severity, measured=measured, unit=spec.unit or "", low=self.low,
                       high=self.high, reduce=self.reduce, message=self.message,
                       source=f"{self.rule_source} {CONFIG_SOURCE}")


# ---------------------------------------------------------------- values

def version_key(text: str) -> tuple[int, ...] | None:
    """The leading dotted/dashed numbers of a version: '5.15.0-91-generic' -> (5, 15, 0, 91)."""
    m = _VERSION.match(text)
    if not m:
        return None
    return tuple(int(x) for x in re.split(r"[.\-]", m.group(1)))


def compare_versions(a: str, b: str) -> int | None:
    """-1, 0 or 1 as a < b, a == b, a > b (missing trailing parts count as 0); None if either is
    not a version."""
    ka, kb = version_key(a), version_key(b)
    if ka is None or kb is None:
        return None
    n = max(len(ka), len(kb))
    pa, pb = ka + (0,) * (n - len(ka)), kb + (0,) * (n - len(kb))
    return (pa > pb) - (pa < pb)


def _same(found: FactValue, want: Any) -> bool:
    if isinstance(found, bool) or isinstance(want, bool):
        return isinstance(found, bool) and isinstance(want, bool) and found == want
    if isinstance(found, (int, float)) and isinstance(want, (int, float)):
        return float(found) == float(want)
    return str(found) == str(want)


def _check(rule: FactRule, found: FactValue) -> tuple[bool, str]:
    """(ok, why-not) for one known value against a rule that is not `same`."""
    if rule.equals is not None:
        return _same(found, rule.equals), ""
    if rule.one_of is not None:
        return any(_same(found, w) for w in rule.one_of), ""
    if rule.contains is not None:
        return rule.contains in str(found), ""
    if rule.min_version is not None:
        c = compare_versions(str(found), rule.min_version)
        return (False, "not a version") if c is None else (c >= 0, "")
    if found == UNLIMITED:
        return rule.max is None, ""
    if isinstance(found, bool) or not isinstance(found, (int, float)):
        return False, "not a number"
    lo_ok = rule.min is None or found >= rule.min
    return lo_ok and (rule.max is None or found <= rule.max), ""


# ---------------------------------------------------------------- judging

def _selected(rule: FactRule, facts: Sequence[Fact]) -> list[Fact]:
    mine = [f for f in facts if f.name == rule.fact]
    if not rule.labels:
        return mine
    want = {k: str(v) for k, v in rule.labels.items()}
    return [f for f in mine if all(f.labels.get(k) == v for k, v in want.items())]


def _outcome(rule: FactRule, source: str, fact: Fact | None, outcome: str, message: str,
             labels: Mapping[str, str] | None = None) -> FactOutcome:
    value = fact.value if fact is not None else None
    return FactOutcome(rule.fact, dict(labels if labels is not None else (fact.labels if fact else {})),
                       display(rule.fact, value) if fact is not None else "—", describe(rule), outcome,
                       rule.severity, message, source, rule.note or "", value, rule.min, rule.max)


def _miss(rule: FactRule) -> str:
    return "fail" if rule.severity == "fail" else "warn"


def _unknown(rule: FactRule, source: str, fact: Fact, gpu_expected: str | None) -> FactOutcome:
    """Skip, or error when the fact needs a GPU, the profile expects GPUs and none was seen
    (`gpu_expected` is only passed on when no GPU fact is known)."""
    spec = FACTS[rule.fact]
    why = fact.reason or "not collected"
    if spec.needs in ("gpu", "nvswitch") and gpu_expected:
        return _outcome(rule, source, fact, "error", f"profile expects {gpu_expected}, but "
                        f"{rule.fact} is unknown: {why}")
    return _outcome(rule, source, fact, "skip", f"not judged: {why}")


def judge_rule(rule: FactRule, source: str, facts: Sequence[Fact],
               gpu_expected: str | None = None) -> list[FactOutcome]:
    """Every outcome of one rule over the collected facts."""
    chosen = _selected(rule, facts)
    every = [f for f in facts if f.name == rule.fact]
    if not chosen:
        unknown = [f for f in every if f.value is None and not f.labels]
        if unknown:
            return [_unknown(rule, source, unknown[0], gpu_expected)]
        sel = join_labels(rule.labels)
        return [_outcome(rule, source, None, "error", f"no fact {rule.fact}{{{sel}}} was collected",
                         {k: str(v) for k, v in rule.labels.items()})]
    if rule.same:
        return [_judge_same(rule, source, chosen, gpu_expected)]
    out = []
    for f in chosen:
        if f.value is None:
            out.append(_unknown(rule, source, f, gpu_expected))
            continue
        ok, why = _check(rule, f.value)
        found = display(rule.fact, f.value)
        if ok:
            out.append(_outcome(rule, source, f, "pass", f"found {found}, expected {describe(rule)}"))
        else:
            extra = f" ({why})" if why else ""
            out.append(_outcome(rule, source, f, _miss(rule),
                                f"found {found}{extra}, expected {describe(rule)}"))
    return out


def _judge_same(rule: FactRule, source: str, chosen: Sequence[Fact],
                gpu_expected: str | None) -> FactOutcome:
    known = [f for f in chosen if f.value is not None]
    per = FACTS[rule.fact].per or "device"
    if not known:
        return _unknown(rule, source, chosen[0], gpu_expected)
    by_value: dict[Any, list[str]] = {}  # by the value itself: two sizes may read alike rounded
    for f in known:
        by_value.setdefault(f.value, []).append(f.labels.get(per, "?"))
    groups: dict[str, list[str]] = {}
    for v, devs in by_value.items():
        groups.setdefault(display(rule.fact, v) if len(by_value) == 1 or _distinct(rule.fact, by_value)
                          else repr(v), []).extend(devs)
    if len(groups) == 1:
        (value, devs), = groups.items()
        return FactOutcome(rule.fact, {}, value, describe(rule), "pass", rule.severity,
                           f"{value} on all {len(devs)} {per}s", source, rule.note or "", reduce="same")
    parts = [f"{v} on {per} {', '.join(devs)}" for v, devs in
             sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    return FactOutcome(rule.fact, {}, f"{len(groups)} different values", describe(rule), _miss(rule),
                       rule.severity, "differs: " + "; ".join(parts), source, rule.note or "",
                       reduce="same")


def _distinct(fact: str, by_value: Mapping[Any, list[str]]) -> bool:
    """Whether the values still differ as displayed (else they are shown as written)."""
    return len({display(fact, v) for v in by_value}) == len(by_value)


def judge(rules: Sequence[tuple[FactRule, str]], facts: Sequence[Fact],
          gpu_expected: str | None = None) -> tuple[FactOutcome, ...]:
    """Every (rule, where it came from) judged against the facts, in rule order. With
    `gpu_expected` ('8 x H100 ...') rules on GPU facts error instead of skipping when no GPU
    fact at all could be read."""
    gpu_seen = any(f.value is not None for f in facts if FACTS[f.name].needs == "gpu")
    missing = None if gpu_seen else gpu_expected
    return tuple(o for rule, source in rules for o in judge_rule(rule, source, facts, missing))
