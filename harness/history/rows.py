"""Rows of the history store, read without trusting them.

A store is a file that others can write (one shared by a fleet's nodes, a copy someone edited):
each reader returns the typed value or raises BadRow saying which column is wrong and how; the
store skips that row and names it (SqliteStore.problems), and the verdict of a run never hangs
on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from harness.history.identity import GpuPart, NodeIdentity
from harness.model import LabelValue
from harness.parsers.base import json_document


class BadRow(ValueError):
    """A stored value that is not what the schema says (the message names the column)."""


def _show(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def text(v: object, column: str) -> str:
    if not isinstance(v, str):
        raise BadRow(f"{column} is {_show(v)}, not text")
    return v


def optional_text(v: object, column: str) -> str | None:
    return None if v is None else text(v, column)


def integer(v: object, column: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise BadRow(f"{column} is {_show(v)}, not an integer")
    return v


def number(v: object, column: str) -> float:
    """A finite number (SQLite keeps 'abc' or a blob in a REAL column as it is given)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise BadRow(f"{column} is {_show(v)}, not a finite number")
    return float(v)


def _json(v: object, column: str) -> Any:
    try:
        return json_document(text(v, column))
    except ValueError as e:
        raise BadRow(f"{column} is {_show(v)}, not JSON ({e})") from None


def labels(v: object) -> dict[str, LabelValue]:
    doc = _json(v, "labels")
    if not isinstance(doc, dict) or not all(isinstance(x, (str, int)) and not isinstance(x, bool)
                                            for x in doc.values()):
        raise BadRow(f"labels is {_show(v)}, not an object of texts and integers")
    return doc


def params(v: object) -> dict[str, str]:
    doc = {} if v is None else _json(v, "params")
    if not isinstance(doc, dict):
        raise BadRow(f"params is {_show(v)}, not an object")
    return {str(k): str(x) for k, x in doc.items()}


def tags(v: object) -> tuple[str, ...]:
    doc = [] if v is None else _json(v, "tags")
    if not isinstance(doc, list):
        raise BadRow(f"tags is {_show(v)}, not a list")
    return tuple(str(t) for t in doc)


def identity(v: object) -> NodeIdentity:
    """The node identity a run recorded (identity.to_dict as JSON), every field type-checked."""
    return _identity(text(v, "identity"))


@lru_cache(maxsize=64)
def _identity(v: str) -> NodeIdentity:
    """identity() of one text: a node's runs mostly repeat theirs, so each is read once (a
    NodeIdentity is frozen, and its software a read-only Mapping)."""
    d = _json(v, "identity")
    if not isinstance(d, Mapping):
        raise BadRow(f"identity is {_show(v)}, not an object")
    gpus, nvme, software = d.get("gpus", []), d.get("nvme_serials", []), d.get("software", {})
    if not (isinstance(gpus, list) and all(isinstance(g, Mapping) for g in gpus)
            and isinstance(nvme, list) and all(isinstance(s, str) for s in nvme)
            and isinstance(software, Mapping) and all(isinstance(s, str) for s in software.values())):
        raise BadRow(f"identity is {_show(v)}: gpus, nvme_serials or software of the wrong type")
    parts = []
    for i, g in enumerate(gpus):
        parts.append(GpuPart(integer(g.get("index", i), "identity.gpus.index"),
                             optional_text(g.get("serial"), "identity.gpus.serial"),
                             optional_text(g.get("uuid"), "identity.gpus.uuid"),
                             text(g.get("name", ""), "identity.gpus.name"),
                             optional_text(g.get("vbios"), "identity.gpus.vbios")))
    return NodeIdentity(text(d.get("hostname", ""), "identity.hostname"),
                        optional_text(d.get("system_serial"), "identity.system_serial"),
                        tuple(parts), tuple(nvme), {str(k): s for k, s in software.items()},
                        optional_text(d.get("machine_id"), "identity.machine_id") or None)
