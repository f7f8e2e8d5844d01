"""The `config:` rules of a profile: one fact against a closed vocabulary of rule kinds.

    config:
      - {fact: gpu.driver_version, min_version: "550.54.15"}
      - {fact: host.shm_bytes, min: 1GiB, severity: warn}
      - {fact: gpu.vbios_version, same: true}

Exactly one rule kind per rule (min and max may go together). Unknown fact names and rule
kinds that do not fit the fact's type are validation errors.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from harness.config.problems import did_you_mean
from harness.facts import FACTS, NUMERIC, RULES_FOR_TYPE, UNLIMITED, display
from harness.model import join_labels
from harness.units import parse_size

RULE_KINDS = ("equals", "one_of", "min_version", "min", "max", "contains", "same")
Scalar = Union[StrictBool, int, float, str]


def _number(v: Any) -> Any:
    """A bound: a number, or a size such as '1GiB' / '64M' in bytes."""
    if isinstance(v, bool):
        raise ValueError("expected a number or a size such as '1GiB'")
    if isinstance(v, str):
        try:
            return float(parse_size(v))
        except ValueError:
            raise ValueError(f"expected a number or a size such as '1GiB', got {v!r}") from None
    if isinstance(v, (int, float)) and not math.isfinite(v):
        raise ValueError("must be a finite number")
    return v


# A number, or a size the loader turns into bytes; the JSON Schema offers both to editors.
Bound = Annotated[Optional[float], BeforeValidator(_number), WithJsonSchema({"anyOf": [
    {"type": "number"}, {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[KkMmGgTtPp]?(i?[Bb])?\s*$"},
    {"type": "null"}]})]


class FactRule(BaseModel):
    """One rule on one configuration fact."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fact: str = Field(description="fact name, e.g. gpu.driver_version (harness/facts.py lists them)")
    labels: dict[str, Union[str, int]] = Field(
        default_factory=dict, description="device selector for per-device facts, e.g. {gpu: 0}")
    equals: Optional[Scalar] = Field(None, description="the value must be exactly this")
    one_of: Optional[list[Scalar]] = Field(None, min_length=1, description="the value must be one of these")
    min_version: Optional[str] = Field(None, description="dotted version the value must reach")
    min: Bound = Field(None, description="lower bound; sizes like '1GiB' allowed")
    max: Bound = Field(None, description="upper bound; sizes like '1GiB' allowed")
    contains: Optional[str] = Field(None, description="text the value must contain")
    same: Optional[bool] = Field(None, description="true: the value is the same on every device")
    severity: Literal["fail", "warn"] = "fail"
    note: Optional[str] = Field(None, description="why this rule exists")

    @field_validator("fact")
    @classmethod
    def _known_fact(cls, v: str) -> str:
        if v not in FACTS:
            raise ValueError(f"unknown fact {v!r}{did_you_mean(v, FACTS)}")
        return v

    @property
    def kinds(self) -> tuple[str, ...]:
        """The rule kinds this rule sets (one, or min and max)."""
        return tuple(k for k in RULE_KINDS if getattr(self, k) is not None)

    @model_validator(mode="after")
    def _one_kind(self) -> FactRule:
        spec = FACTS.get(self.fact)
        if spec is None:
            return self  # reported at `fact`
        kinds = self.kinds
        if not kinds:
            raise ValueError(f"give one rule kind: {', '.join(RULE_KINDS)}")
        if len(kinds) > 1 and set(kinds) != {"min", "max"}:
            raise ValueError(f"one rule kind per rule, got {', '.join(kinds)} (min and max may go "
                             "together; write separate rules for the rest)")
        if self.same is not None:
            if not self.same:
                raise ValueError("same: false says nothing; write same: true or drop the rule")
            if spec.per is None:
                raise ValueError(f"same needs a per-device fact; {self.fact} has one value per node")
            if self.labels:
                raise ValueError("same compares every device: drop labels")
        else:
            wrong = [k for k in kinds if k not in RULES_FOR_TYPE[spec.type]]
            if wrong:
                fits = ", ".join(sorted(RULES_FOR_TYPE[spec.type] | ({"same"} if spec.per else set())))
                raise ValueError(f"{wrong[0]} does not fit {self.fact} ({spec.type}); use {fits}")
        if self.labels and (spec.per is None or set(self.labels) != {spec.per}):
            want = f"only {spec.per!r}" if spec.per else "none (one value per node)"
            raise ValueError(f"labels of {self.fact}: {want}")
        for v in [self.equals, *(self.one_of or [])]:
            _check_value(self.fact, spec.type, v)
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min:g}) is above max ({self.max:g})")
        return self


def _check_value(fact: str, typ: str, v: Any) -> None:
    """An equals/one_of value must be of the fact's type (YAML turns 535.10 into 535.1)."""
    if v is None:
        return
    if typ == "bool" and not isinstance(v, bool):
        raise ValueError(f"{fact} is true or false, got {v!r}")
    if typ in ("str", "version") and isinstance(v, float):
        raise ValueError(f"{fact} is text: quote {v!r} (YAML reads an unquoted 535.10 as the number 535.1)")
    if typ in NUMERIC and isinstance(v, (bool, str)) and not (typ == "limit" and v == UNLIMITED):
        extra = " or 'unlimited'" if typ == "limit" else ""
        raise ValueError(f"{fact} is a number{extra}, got {v!r}; for sizes use min/max")


def describe(rule: FactRule) -> str:
    """The rule as short text: '>= 550.54.15', 'one of a, b', 'same on every gpu', '>= 1 GiB'."""
    f = rule.fact
    if rule.min is not None and rule.max is not None:
        return f"{display(f, rule.min)}..{display(f, rule.max)}"
    if rule.min is not None:
        return f">= {display(f, rule.min)}"
    if rule.max is not None:
        return f"<= {display(f, rule.max)}"
    if rule.min_version is not None:
        return f">= {rule.min_version}"
    if rule.one_of is not None:
        return "one of " + ", ".join(display(f, v) for v in rule.one_of)
    if rule.contains is not None:
        return f"contains {rule.contains!r}"
    if rule.same:
        return f"same on every {FACTS[rule.fact].per}"
    return display(f, rule.equals)


def merge_fact_rules(parent: list[FactRule], child: list[FactRule]) -> list[FactRule]:
    """The child's rules over its parent's, by fact name: a child that names a fact replaces every
    parent rule on it (in the parent's place); facts only one side names are kept."""
    by_fact: dict[str, list[FactRule]] = {}
    for r in child:
        by_fact.setdefault(r.fact, []).append(r)
    out: list[FactRule] = []
    for r in parent:
        if r.fact not in by_fact:
            out.append(r)
        elif by_fact[r.fact]:
            out += by_fact[r.fact]
            by_fact[r.fact] = []
    return out + [r for r in child if by_fact.get(r.fact)]


def plan_lines(profile: str, profile_rules: list[FactRule], suite_rules: list[FactRule]) -> list[str]:
    """The config rules a config_audit check will judge, as --dry-run lines."""
    rules = [(r, profile) for r in profile_rules] + [(r, "suite") for r in suite_rules]
    if not rules:
        return [f"   (no config rules in profile {profile}: facts are recorded only)"]
    out = []
    for r, src in rules:
        sel = join_labels(sorted(r.labels.items()))
        where = "{" + sel + "}" if sel else ""
        out.append(f"   config {r.fact}{where}: {describe(r)}  [{r.severity}; {src}]")
    return out
