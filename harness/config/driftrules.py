"""The `drift:` rules of suites and profiles: how far a metric may move over a node's history.

A rule compares this run with the node's go-live run (its first accepted run) or with its
previous run. Limits are a closed vocabulary: a drop or rise in percent, an absolute growth,
or a growth per 90 days (counters and wear such as corrected ECC or NVMe percentage used).
"""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.config.numbers import Percent
from harness.units import check_finite

LabelValue = Union[str, int]
MIN_RATE_DAYS = 30.0  # a growth rate is measured over at least this many days


class DriftRule(BaseModel):
    """One change-over-time rule for a metric (label selector), judged against the node's history."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = Field(min_length=1, description="metric name, e.g. fio.iops")
    labels: dict[str, LabelValue] = Field(default_factory=dict, description="label selector")
    check: Optional[str] = Field(None, description="only metrics of this check id")
    vs: Literal["golive", "previous"] = Field(
        "previous", description="golive: the node's first accepted run; previous: its last run")
    max_drop_pct: Optional[Percent] = Field(None, gt=0, le=100, description="allowed fall below the "
                                            "reference, in percent (10 or '10%')")
    max_rise_pct: Optional[Percent] = Field(None, gt=0, description="allowed rise above the reference, "
                                            "in percent (10 or '10%')")
    max_growth: Optional[float] = Field(
        None, ge=0, description="allowed absolute growth since the reference, in the metric's unit")
    max_growth_per_90d: Optional[float] = Field(
        None, ge=0, description=f"allowed growth per 90 days, measured over at least "
        f"{MIN_RATE_DAYS:g} days so two close runs do not extrapolate one step")
    severity: Literal["fail", "warn"] = "warn"
    note: Optional[str] = Field(None, description="why this rule exists")

    @field_validator("max_drop_pct", "max_rise_pct", "max_growth", "max_growth_per_90d")
    @classmethod
    def _finite(cls, v: Optional[float]) -> Optional[float]:
        return check_finite(v)

    @model_validator(mode="after")
    def _has_limit(self) -> DriftRule:
        if all(x is None for x in (self.max_drop_pct, self.max_rise_pct, self.max_growth,
                                   self.max_growth_per_90d)):
            raise ValueError("give a limit: max_drop_pct, max_rise_pct, max_growth or max_growth_per_90d")
        return self

    def key(self) -> tuple[object, ...]:
        """Identity for merging: a child's rule with the same key replaces its parent's."""
        return (self.metric, tuple(sorted((k, str(v)) for k, v in self.labels.items())), self.check,
                self.vs)


def merge_rules(parent: list[DriftRule], child: list[DriftRule]) -> list[DriftRule]:
    """Parent rules with the child's replacing those of the same key; the child's new ones last."""
    mine = {r.key(): r for r in child}
    out = [mine.get(r.key(), r) for r in parent]
    seen = {r.key() for r in parent}
    return out + [r for r in child if r.key() not in seen]
