"""A node's results.json as the fleet reads it: its bytes by results' one rule (a regular file, no
symlink, at most results.MAX_BYTES), parsed and validated in one compiled pass (msgspec, strict,
every section too) into a RunDoc, whose metrics stay dicts (no Metric object per value).

A file the pass refuses is read again the slow way (collect), so its one ERRORED line names the
file and the field in the words `harness report` uses.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from typing_extensions import Required, TypedDict

from harness import results
from harness.errors import RecordError
from harness.fsutil import TooLarge
from harness.model import FORMAT_VERSION, Evaluation, LeftOut, Status, ToolRun
from harness.sections import Details, Label


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
# to the dataclasses' fields, and the pass to the slow read (it takes nothing that read refuses).

class MetricDoc(TypedDict, total=False):
    name: Required[str]
    value: Required[float]
    unit: Required[str]
    labels: Mapping[str, Label]


class CheckDoc(TypedDict, total=False):
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


@cache
def _decoder() -> Any:
    import msgspec  # start-up: only a fleet's reads load it

    return msgspec.json.Decoder(RunDoc)


def from_json(raw: bytes) -> RunDoc | None:
    """A results.json's bytes parsed and validated in one pass by msgspec into a RunDoc (strict:
    no number spelt as text, no bool for a number; JSON's own grammar, so NaN, Infinity and a
    number out of range are refused), its sections checked against their types, or None when
    anything is refused. The pass accepts nothing that `validate` and RunRecord.from_dict refuse,
    so None loses nothing: the caller reads the file as `load` does, which names the field."""
    import msgspec  # start-up: only a fleet's reads load it

    try:
        doc: RunDoc = _decoder().decode(raw)
        if doc["format_version"] != FORMAT_VERSION:
            return None
        msgspec.convert(doc["inventory"], results.Inventory)
        msgspec.convert(doc.get("history") or {}, results.History)
        for check in doc["checks"]:
            msgspec.convert(check.get("details") or {}, Details)
    except (msgspec.MsgspecError, RecursionError):
        return None
    return doc
