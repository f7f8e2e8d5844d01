"""The rules compare judges by: where each came from, its allowed band, and how the dry run and the
messages word them. Pure; judge.py applies them.

Bands: with a reference r, `lower`/`upper` are fractions (r*(1-lower) .. r*(1+upper)); with a
reference of zero they are absolute. `min`/`max` are absolute bounds and narrow the band. None
means unbounded. A `sibling` expectation takes its bound from the median of the metric's siblings
(siblings.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Union

from harness import catalog, siblings
from harness.config.models import Expectation
from harness.model import join_labels
from harness.numfmt import fmt_band


@dataclass(frozen=True)
class Rule:
    """An expectation with where it came from (profile name, or 'suite')."""

    expectation: Expectation
    source: str


# A kind's own rule (KindHooks.own_rules): fixed bounds, or bounds from the median of siblings.
OwnRule = Union[Rule, siblings.SiblingRule]


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


def describe_band(low: float | None, high: float | None, unit: str, digits: int = 3) -> str:
    """The band as a message words it: '>= 61,200 IOPS', '<= 37.0 ms', '[1.00, 1.20] GB/s'."""
    band_text = fmt_band(low, high, unit, digits, ascii_=True)
    return "unbounded" if band_text == "any" else band_text




def applicable(rules: Iterable[Rule], check_id: str, metric_names: Iterable[str]) -> list[Rule]:
    """The rules that concern a check: its kind can produce the metric, and `check:` fits."""
    names = set(metric_names)
    return [r for r in rules if r.expectation.metric in names
            and (r.expectation.check is None or r.expectation.check == check_id)]



def describe_rule(rule: OwnRule) -> str:
    """One dry-run line, unindented: 'expect net.error_delta{} each: <= 0 count  [warn; check param
    max_error_delta 0]', 'expect rdma.bw_avg{} by device: >= 0.9 x the median of its siblings
    (3 or more)  [fail; sibling rule]'."""
    if isinstance(rule, siblings.SiblingRule):
        known = catalog.spec(rule.metric)
        return f"expect {rule.metric}{{}} by {','.join(rule.vary)}: " \
               f"{rule.describe(known.unit if known else '')}  " \
               f"[{rule.severity}; {siblings.SOURCE}]"
    ex = rule.expectation
    sel = join_labels(sorted(ex.labels.items()))
    if ex.sibling is not None:
        sib = sibling_rule(ex)
        what = f"by {','.join(sib.vary)}: {sib.describe(ex.unit)}"
    else:
        what = f"{ex.reduce}: {describe_band(*band(ex), ex.unit)}"
    flags = "".join(f", {f}" for f, on in (("xfail", ex.xfail), ("if measured", ex.if_measured)) if on)
    return f"expect {ex.metric}{{{sel}}} {what}  [{ex.severity}{flags}; {rule.source}]"
