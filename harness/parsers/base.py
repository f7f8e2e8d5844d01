"""The result every parser returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.model import Metric


@dataclass(frozen=True)
class ParseResult:
    """Metrics parsed from one tool output, and whether that output proves a complete run."""

    kind: str
    valid: bool
    problems: tuple[str, ...] = ()
    metrics: tuple[Metric, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "valid": self.valid, "problems": list(self.problems),
                "metrics": [m.to_dict() for m in self.metrics]}


def invalid(kind: str, *problems: str) -> ParseResult:
    return ParseResult(kind, False, tuple(problems))
