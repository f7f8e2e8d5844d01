"""The result every parser returns."""

from __future__ import annotations

import json
import math
import re
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


MAX_JSON_DEPTH = 64  # deeper than any tool's JSON; deeper ones would exhaust the recursion limit
_JSON_MARK = re.compile(r'[{}\[\]"]')
_JSON_STRING = re.compile(r'"[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*"')


def _object_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every brace-balanced `{...}` in `text` nested at most MAX_JSON_DEPTH deep,
    by start; one linear pass that skips JSON strings (only inside braces: text around is prose)."""
    spans: list[tuple[int, int]] = []
    starts: list[int] = []  # the open brackets: where, which, the deepest level reached inside
    kinds: list[str] = []
    deepest: list[int] = []
    search, string = _JSON_MARK.search, _JSON_STRING.match
    pos = 0
    while (m := search(text, pos)) is not None:
        ch, pos = m.group(), m.end()
        if ch == '"':
            if starts:
                if (s := string(text, pos - 1)) is None:
                    del starts[:], kinds[:], deepest[:]  # no JSON holds that string
                else:
                    pos = s.end()
        elif ch == "{" or ch == "[":
            starts.append(pos - 1)
            kinds.append(ch)
            deepest.append(len(starts))
        elif starts:
            start, kind, inner = starts.pop(), kinds.pop(), deepest.pop()
            if kind != ("{" if ch == "}" else "["):
                del starts[:], kinds[:], deepest[:]
                continue
            if deepest and inner > deepest[-1]:
                deepest[-1] = inner
            if ch == "}" and inner - len(starts) <= MAX_JSON_DEPTH:
                spans.append((start, pos))
    spans.sort()
    return spans


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every top-level JSON object in `text`, in order, skipping text that does not decode.

    Linear in the text: only brace-balanced spans are decoded, each at most a few times over
    (hostile text such as a million "{" is given up on, never decoded a million times)."""
    decoder = json.JSONDecoder()
    budget = 4 * len(text) + 65536
    done = 0
    for start, end in _object_spans(text):
        if start < done:
            continue  # inside an object already yielded
        budget -= end - start
        if budget < 0:
            return
        try:
            obj, _ = decoder.raw_decode(text[start:end])
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            yield obj
            done = end


def check_json_depth(text: str) -> None:
    """ValueError when the JSON in `text` nests deeper than MAX_JSON_DEPTH (json would recurse)."""
    if text.count("{") + text.count("[") <= MAX_JSON_DEPTH:  # too few to nest deeper: no walk
        return
    depth = deepest = 0
    for m in _JSON_MARK.finditer(_JSON_STRING.sub('""', text)):
        depth += 1 if m.group() in "{[" else -1 if m.group() in "}]" else 0
        deepest = max(deepest, depth)
    if deepest > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nested {deepest} levels deep (more than {MAX_JSON_DEPTH})")


def json_document(text: str) -> Any:
    """json.loads of a whole document, refusing one nested deeper than MAX_JSON_DEPTH (ValueError)."""
    check_json_depth(text)
    return json.loads(text)


INT_DIGITS = 20  # any 64-bit counter; int() refuses past 4,300 digits, float() of one past 308


def integer(tok: str, digits: int = INT_DIGITS) -> Optional[int]:
    """The token as a count or index: ASCII digits only, at most `digits` of them; else None."""
    t = tok.strip()
    return int(t) if 0 < len(t) <= digits and t.isascii() and t.isdigit() else None


def number(value: Any) -> Optional[float]:
    """A JSON value as a finite float; None for a bool, text, NaN, inf or an int past any float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        v = float(value)
    except OverflowError:
        return None
    return v if math.isfinite(v) else None


def finite(tok: str) -> Optional[float]:
    """The token as a finite float; None for N/A, nan, inf or anything that is not a number."""
    try:
        v = float(tok)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def invalid(kind: str, *problems: str) -> ParseResult:
    return ParseResult(kind, False, tuple(problems))
