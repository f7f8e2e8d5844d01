"""What the runner's one judge makes of a kind's output, for tests that run a kind directly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.checks.base import CheckContext, CheckKind, CheckOutput
from harness.compare import judge as compare
from harness.model import Evaluation
from harness.series import telemetry


def judged(kind: CheckKind, params: Any, out: CheckOutput) -> tuple[Evaluation, ...]:
    """The evaluations of the kind's own rules (and the telemetry's) and its findings, as the runner
    judges them (without the profile's and the suite's rules)."""
    rules = (*kind.rules_of(params), *telemetry.own_rules(params))
    return compare.judge(rules, out.metrics, out.findings).evaluations


@dataclass(frozen=True)
class Judged:
    """A kind's CheckOutput with the evaluations the runner's judge gives it."""

    out: CheckOutput
    evaluations: tuple[Evaluation, ...]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.out, name)


def run_judged(kind: CheckKind, params: Any, ctx: CheckContext) -> Judged:
    """kind.run(params, ctx), judged as the runner does (own rules, telemetry's, findings)."""
    out = kind.run(params, ctx)
    return Judged(out, judged(kind, params, out))
