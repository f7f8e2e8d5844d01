"""Pure metric extraction for the `command` kind: regex named groups, or a small JSON path.

The JSON path language is closed: dotted keys, [N] indexes and `*` for every item. No eval.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from harness.parsers.base import check_json_depth

_TOKEN = re.compile(r"""\.?([A-Za-z_][\w-]*)|\[(\d+)\]|\.?\*|\[\*\]|\["([^"]+)"\]""")


def parse_path(path: str) -> list[str | int | None]:
    """'a.b[0].*' -> ['a', 'b', 0, None] (None = wildcard). ValueError when malformed."""
    out: list[str | int | None] = []
    pos = 0
    p = path.lstrip("$")
    while pos < len(p):
        m = _TOKEN.match(p, pos)
        if not m or m.end() == pos:
            raise ValueError(f"bad JSON path {path!r} at {p[pos:]!r}")
        if m.group(1) is not None:
            out.append(m.group(1))
        elif m.group(2) is not None:
            out.append(int(m.group(2)))
        elif m.group(3) is not None:
            out.append(m.group(3))
        else:
            out.append(None)
        pos = m.end()
    if not out:
        raise ValueError(f"empty JSON path {path!r}")
    return out


def walk(doc: Any, steps: list[str | int | None], trail: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], Any]]:
    """Every (wildcard keys, value) the path reaches."""
    if not steps:
        yield trail, doc
        return
    head, rest = steps[0], steps[1:]
    if head is None:
        items = (doc.items() if isinstance(doc, Mapping)
                 else enumerate(doc) if isinstance(doc, list) else ())
        for k, v in items:
            yield from walk(v, rest, (*trail, str(k)))
    elif isinstance(head, int):
        if isinstance(doc, list) and -len(doc) <= head < len(doc):
            yield from walk(doc[head], rest, trail)
    elif isinstance(doc, Mapping) and head in doc:
        yield from walk(doc[head], rest, trail)


def _number(v: Any) -> float | None:
    """A number from a JSON value or a text ('1,234.5'), None for anything else. NaN and inf are
    kept (the command check names them: "not a finite number"), and so is an int past any float,
    as inf."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    if isinstance(v, str):
        try:
            return float(v.strip().replace(",", ""))
        except ValueError:
            return None
    return None


def by_regex(text: str, pattern: re.Pattern[str]) -> list[tuple[dict[str, str], float | None, str]]:
    """Every match: (labels from the other named groups, value, raw value text)."""
    out = []
    for m in pattern.finditer(text):
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        raw = groups.pop("value", "")
        out.append((groups, _number(raw), raw))
    return out


def by_json_path(text: str, path: str) -> list[tuple[dict[str, str], float | None, str]]:
    """Every value the path reaches in the first JSON document of `text`."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise ValueError("no JSON document in the output")
    check_json_depth(text[start:])
    doc, _ = json.JSONDecoder().raw_decode(text[start:])
    out = []
    for trail, value in walk(doc, parse_path(path)):
        labels = {"key": ".".join(trail)} if trail else {}
        out.append((labels, _number(value), repr(value)[:80]))
    return out
