"""The sibling rule: one link, HCA, GPU or GPU pair far off the median of its siblings.

Pure. Siblings are metrics with the same name and the same labels except the `vary` ones
(e.g. `device` for HCAs, `src`/`dst` for GPU pairs). In each group of at least
`min_siblings`, a metric more than `tolerance` (a fraction) or `offset` (in the metric's
unit) worse than the group median fails, and its evaluation names it; a group with no outlier
gives one passing evaluation for its worst member. "Worse" follows the metric's better
direction (higher or lower). compare.judge calls `judge()` for a kind's own rules and for
profiles' and suites' `sibling` expectations (compare.sibling_rule); checks never do.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Optional

from harness.model import Evaluation, LabelValue, Metric, Outcome
from harness.numfmt import digits_for, fmt_num, fmt_pct, fmt_value

SOURCE = "sibling rule"


@dataclass(frozen=True)
class SiblingRule:
    """Which metric to compare, across which labels, and how far off the median is too far."""

    metric: str
    vary: tuple[str, ...]
    tolerance: Optional[float] = 0.10  # a fraction of the median; None when `offset` is given
    better: Literal["higher", "lower"] = "higher"
    min_siblings: int = 3
    severity: Literal["fail", "warn"] = "fail"
    offset: Optional[float] = None  # an absolute allowance in the metric's unit (10 for "+10 C")

    def __post_init__(self) -> None:
        if (self.tolerance is None) == (self.offset is None):
            raise ValueError("a sibling rule takes a tolerance (fraction) or an offset, not both")
        if self.tolerance is not None and not 0 < self.tolerance < 1:
            raise ValueError(f"sibling tolerance must be a fraction between 0 and 1, got {self.tolerance}")
        if self.offset is not None and not self.offset > 0:
            raise ValueError(f"sibling offset must be positive, got {self.offset}")
        if not self.vary:
            raise ValueError("a sibling rule needs at least one varying label")

    def bound(self, median: float) -> float:
        """The worst value allowed in a group with this median."""
        sign = -1 if self.better == "higher" else 1
        if self.offset is not None:
            return median + sign * self.offset
        return median * (1 + sign * (self.tolerance or 0.0))

    def allowed(self, unit: str) -> str:
        """'5%' or '10 C': how far from the median is still fine."""
        return fmt_value(self.offset, unit) if self.offset is not None else fmt_pct(self.tolerance or 0.0)

    def describe(self, unit: str = "") -> str:
        """'>= 0.95 x the median of its siblings (3 or more)', '<= the median of its siblings + 10 C ...'."""
        op = ">=" if self.better == "higher" else "<="
        if self.offset is not None:
            sign = "-" if self.better == "higher" else "+"
            where = f"the median of its siblings {sign} {fmt_value(self.offset, unit)}"
        else:
            where = f"{fmt_num(self.bound(1.0), 4, trim=True)} x the median of its siblings"
        return f"{op} {where.rstrip()} ({self.min_siblings} or more)"


def _name(labels: Mapping[str, LabelValue], vary: Sequence[str]) -> str:
    """'mlx5_0', 'gpu0/gpu1'; an index label shows its name too: gpu 2 -> 'gpu2'."""
    return "/".join(f"{k}{v}" if isinstance(v, int) else str(v)
                    for k, v in ((k, labels.get(k, "?")) for k in vary))


def groups(rule: SiblingRule, metrics: Sequence[Metric]) -> list[list[Metric]]:
    """The sibling groups for `rule`, in first-seen order (metrics lacking a vary label are left out)."""
    out: dict[tuple[tuple[str, str], ...], list[Metric]] = {}
    for m in metrics:
        if m.name != rule.metric or not all(k in m.labels for k in rule.vary):
            continue
        key = tuple(sorted((k, str(v)) for k, v in m.labels.items() if k not in rule.vary))
        out.setdefault(key, []).append(m)
    return list(out.values())


def judge(rule: SiblingRule, metrics: Sequence[Metric], source: str = SOURCE) -> tuple[Evaluation, ...]:
    """Evaluations for every group of siblings: one per outlier, or one pass for the worst member."""
    result: list[Evaluation] = []
    for group in groups(rule, metrics):
        if len(group) < rule.min_siblings:
            continue
        median = statistics.median(m.value for m in group)
        if median <= 0 and rule.offset is None:
            continue  # a fraction of nothing: no bound
        higher = rule.better == "higher"
        bound = rule.bound(median)
        low, high = (bound, None) if higher else (None, bound)
        outliers = [m for m in group if (m.value < bound if higher else m.value > bound)]
        unit = group[0].unit
        what = ",".join(rule.vary)
        if outliers:
            for m in outliers:
                d = digits_for(m.value, (median,), unit)
                off = (fmt_value(abs(m.value - median), unit, d) if rule.offset is not None
                       else fmt_pct(abs(m.value - median) / median))
                msg = (f"{_name(m.labels, rule.vary)} measured {fmt_value(m.value, unit, d)}, "
                       f"{off} {'below' if higher else 'above'} the median {fmt_value(median, unit, d)} "
                       f"of its {len(group)} siblings (by {what}); allowed {rule.allowed(unit)}")
                outcome = Outcome.FAIL if rule.severity == "fail" else Outcome.WARN
                result.append(Evaluation(metric=m.name, labels=dict(m.labels), outcome=outcome,
                                         severity=rule.severity, measured=m.value, unit=unit,
                                         reference=median, low=low, high=high, reduce="each",
                                         message=msg, source=source))
            continue
        worst = min(group, key=lambda m: m.value) if higher else max(group, key=lambda m: m.value)
        common = {k: v for k, v in group[0].labels.items() if k not in rule.vary}
        d = digits_for(worst.value, (median,), unit)
        msg = (f"{'slowest' if higher else 'worst'} of {len(group)} (by {what}) is "
               f"{_name(worst.labels, rule.vary)} at {fmt_value(worst.value, unit, d)}, within "
               f"{rule.allowed(unit)} of the median {fmt_value(median, unit, d)}")
        result.append(Evaluation(metric=rule.metric, labels=common, outcome=Outcome.PASS,
                                 severity=rule.severity, measured=worst.value, unit=unit, reference=median,
                                 low=low, high=high, reduce="min" if higher else "max", message=msg,
                                 source=source))
    return tuple(result)
