"""The result every parser returns."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

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


def last_line(text: str, limit: int = 300) -> str:
    """The last non-empty line of a tool's output, stripped and cut to `limit` characters ("" if none)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:limit] if lines else ""


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every top-level JSON object in `text`, in order, skipping text that does not decode."""
    decoder = json.JSONDecoder()
    pos = text.find("{")
    while pos != -1:
        try:
            obj, end = decoder.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        if isinstance(obj, dict):
            yield obj
        pos = text.find("{", end)  # a complete object: go on after it


def finite(tok: str) -> Optional[float]:
    """The token as a finite float; None for N/A, nan, inf or anything that is not a number."""
    try:
        v = float(tok)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def invalid(kind: str, *problems: str) -> ParseResult:
    return ParseResult(kind, False, tuple(problems))
