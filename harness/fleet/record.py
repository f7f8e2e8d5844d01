"""A node's results.json as the fleet reads it: its bytes by results' one rule (a regular file, no
symlink, at most results.MAX_BYTES), parsed and validated in one compiled pass (pydantic-core,
strict, every section too) into a RunDoc, whose metrics stay dicts (no Metric object per value).

A file the pass refuses is read again the slow way (collect), so its one ERRORED line names the
file and the field in the words `harness report` uses.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from typing_extensions import Required, TypedDict

from harness import results
from harness.errors import RecordError
from harness.fsutil import TooLarge
from harness.model import FORMAT_VERSION, Evaluation, LeftOut, Status, ToolRun
from harness.sections import STRICT, Details, Label


def read(path: Path) -> bytes:
    """A node's results.json by results.read_bytes' rule (RecordError when it is larger than the cap:
    a 6 GB file is one ERRORED node, not a MemoryError; OSError when it is a symlink or not a file)."""
    try:
        return results.read_bytes(path)
    except TooLarge as e:
        if e.errno != errno.EFBIG:
            raise
        cap = results.MAX_BYTES // 2**20
        raise RecordError(path, "", f"larger than {cap} MiB: not a run's results") from None


# The record as the fleet reads it, in one compiled pass: RunRecord's fields and types, but a
# metric is left a dict (no Metric object per value). tests/fleet/test_read.py holds them
# to the dataclasses' fields.

class MetricDoc(TypedDict, total=False):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    name: Required[str]
    value: Required[float]
    unit: Required[str]
    labels: Mapping[str, Label]


class CheckDoc(TypedDict, total=False):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    id: Required[str]
    kind: Required[str]
    status: Required[Status]
    message: str
    started: str
    duration_s: float
    metrics: list[MetricDoc]
    evaluations: tuple[Evaluation, ...]
    problems: tuple[str, ...]
    tool_runs: tuple[ToolRun, ...]
    details: Mapping[str, Any]
    expected_by: str


class RunDoc(TypedDict, total=False):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    run_id: Required[str]
    host: Required[str]
    suite: Required[Mapping[str, Any]]
    profile: Required[Mapping[str, Any]]
    started: Required[str]
    finished: Required[str]
    duration_s: Required[float]
    inventory: Required[Mapping[str, Any]]
    checks: Required[list[CheckDoc]]
    harness_version: Required[str]
    argv: tuple[str, ...]
    interrupted: bool
    format_version: Required[int]  # required here, as `validate` requires it
    history: Mapping[str, Any]
    resumed: tuple[str, ...]
    left_out: tuple[LeftOut, ...]


_N, _A, _I, _NF = ord("N"), ord("a"), ord("I"), (ord("n"), ord("f"))


def spells_non_finite(raw: bytes) -> bool:
    """Whether the bytes spell NaN or Infinity anywhere (JSON has neither; Python's and pydantic's
    readers take them). The same answer as `b"NaN" in raw or b"Infinity" in raw`, in about 40 % of
    its time: one vector comparison a letter, and a look at the few places it matches."""
    a = np.frombuffer(raw, dtype=np.uint8)
    at = np.flatnonzero(a[:-2] == _N)
    if at.size and bool(((a[at + 1] == _A) & (a[at + 2] == _N)).any()):
        return True
    at = np.flatnonzero(a[:-7] == _I)
    inf = bool(at.size) and bool(((a[at + 1] == _NF[0]) & (a[at + 2] == _NF[1])).any())
    return inf and b"Infinity" in raw


def from_json(raw: bytes) -> RunDoc | None:
    """A results.json's bytes parsed and validated in one pass by pydantic-core (strict; the
    sections too) into a RunDoc, or None when that pass refuses them or they spell NaN or
    Infinity. Strict accepts nothing that `validate` and RunRecord.from_dict refuse, so None loses
    nothing: the caller reads the file as `load` does, which names the field."""
    from pydantic import ValidationError  # start-up: pydantic loads only to validate

    if spells_non_finite(raw):
        return None
    try:
        doc: RunDoc = results.section(RunDoc).validate_json(raw, strict=True)
        if doc["format_version"] != FORMAT_VERSION:
            return None
        results.section(results.Inventory).validate_python(doc["inventory"])
        results.section(results.History).validate_python(doc.get("history") or {})
        for check in doc["checks"]:
            results.section(Details).validate_python(check.get("details") or {})
    except ValidationError:
        return None
    return doc
