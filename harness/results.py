"""results.json: write it atomically as checks finish, read it back, and its JSON Schema.

Read back, a run file is data anyone with write access to the run directory may have edited: it is
validated against the schema (the record, and the sections readers walk: inventory, the history
snapshot, and every section of a check's details, typed in harness/sections.py), and a bad value
is one error line naming the file and the field (RecordError, exit 2), never a traceback further on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Optional

from typing_extensions import Required, TypedDict

from harness.errors import ConfigError, ConfigProblem, RecordError
from harness.fsutil import TooLarge, atomic_write_json, read_bounded
from harness.model import (
    FORMAT_VERSION,
    VERDICTS,
    CheckResult,
    Evaluation,
    LeftOut,
    RunRecord,
    Status,
    ToolRun,
)
from harness.sections import STRICT as _STRICT
from harness.sections import Details, Label, Scalar

RESULTS = "results.json"


# The sections of a record that readers walk (typed here; extra keys are allowed and ignored).

class _Gpu(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    index: int
    name: Optional[str]
    serial: Optional[str]
    uuid: Optional[str]
    vbios: Optional[str]


class _Drive(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    name: str
    serial: Optional[str]
    transport: Optional[str]
    size_bytes: Optional[int]


class _Inventory(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    host: Mapping[str, Scalar]
    system: Mapping[str, Scalar]
    software: Mapping[str, Scalar]
    gpus: list[_Gpu]
    pci_gpus: list[Mapping[str, Any]]
    block_devices: list[_Drive]
    nics: list[Mapping[str, Any]]
    nvml: Mapping[str, Any]


class _RunRef(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    run_id: str
    started: str
    verdict: str


class _Value(_RunRef, total=False):
    value: float


class _Trend(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    check: str
    metric: str
    labels: Mapping[str, Label]
    part: Optional[str]
    unit: str
    better: str
    points: list[_Value]
    golive: Optional[_Value]
    previous: Optional[_Value]
    current: float
    low: Optional[float]
    high: Optional[float]


class _Node(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    id: Optional[int]
    name: Optional[str]
    system_serial: Optional[str]
    gpus: int
    runs_before: int
    first_seen: str


class _Change(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    run_id: str
    started: str
    kind: str
    detail: str


class _Drifted(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    metric: str
    labels: Mapping[str, Label]
    outcome: str
    message: str


class _History(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    store: str
    node: _Node
    golive: Optional[_RunRef]
    previous: Optional[_RunRef]
    changes: list[_Change]
    events: list[_Change]
    drifted: list[_Drifted]
    trends: list[_Trend]


# The record as the fleet reads it, in one compiled pass: RunRecord's fields and types, but a
# metric is left a dict (no Metric object per value). tests/fleet/test_fleet_read.py holds them
# to the dataclasses' fields.

class MetricDoc(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    name: Required[str]
    value: Required[float]
    unit: Required[str]
    labels: Mapping[str, Label]


class CheckDoc(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
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
    __pydantic_config__ = _STRICT  # type: ignore[misc]
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


def write(run_dir: Path, record: RunRecord, *, durable: bool = True) -> None:
    """results.json, atomically; `durable` also fsyncs (snapshots taken mid-run need not)."""
    atomic_write_json(run_dir / RESULTS, record.to_dict(), durable=durable)


def write_check(run_dir: Path, result: CheckResult) -> None:
    """One finished check, on its own, as soon as it is done."""
    atomic_write_json(run_dir / "checks" / f"{result.id}.json", result.to_dict())


MAX_BYTES = 256 * 1024 * 1024  # a results.json or check file larger than this is not read


def _read(path: Path) -> Any:
    """The JSON document of a run file, read at most MAX_BYTES (a 6 GB sparse file is refused by its
    size, never held in memory)."""
    return json.loads(read_bounded(path, MAX_BYTES).decode("utf-8"))


def _why(e: Exception) -> str:
    return (e.strerror or "too large") if isinstance(e, TooLarge) else f"cannot read: {e}"


def load(run_dir: Path) -> RunRecord:
    """Read and validate results.json of a run directory (ConfigError when it is not one, RecordError
    when a value in it is wrong)."""
    path = run_dir / RESULTS if run_dir.is_dir() else run_dir
    try:
        data = _read(path)
    except FileNotFoundError:
        raise ConfigError([ConfigProblem(str(path), 1, 1, "no results.json: not a run directory")]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([ConfigProblem(str(path), 1, 1, _why(e))]) from e
    except json.JSONDecodeError as e:
        raise ConfigError([ConfigProblem(str(path), e.lineno, e.colno, f"not JSON: {e.msg}")]) from e
    except RecursionError as e:
        raise RecordError(path, "", "nested too deeply") from e
    problems = validate(data)
    if problems:
        raise RecordError(path, *problems[0], more=len(problems) - 1)
    finite(path, data)
    try:
        return RunRecord.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # the schema should have caught it
        raise RecordError(path, "", f"not a run record: {type(e).__name__}: {e}") from e


def load_check(path: Path) -> CheckResult:
    """One checks/ID.json, validated like a check of results.json (RecordError when it is wrong)."""
    from pydantic import ValidationError  # start-up: pydantic loads only to validate

    try:
        data = _read(path)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise RecordError(path, "", _why(e)) from e
    try:
        _check_adapter().validate_python(data, strict=False)
        problems = _sections_of_check(data, ())
    except ValidationError as e:
        problems = _problems(e, data, ())
    if problems:
        raise RecordError(path, *problems[0], more=len(problems) - 1)
    finite(path, data)
    try:
        return CheckResult.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise RecordError(path, "", f"not a check result: {type(e).__name__}: {e}") from e


def load_validated(path: Path, schema: Any) -> Any:
    """The JSON document of `path` (a saved series, say) checked against `schema`, a TypedDict:
    FileNotFoundError when it is missing, RecordError naming the field when anything is wrong."""
    from pydantic import ValidationError  # start-up: pydantic loads only to validate

    try:
        data = _read(path)
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise RecordError(path, "", _why(e)) from e
    try:
        _section(schema).validate_python(data)
    except ValidationError as e:
        problems = _problems(e, data, ())
        raise RecordError(path, *problems[0], more=len(problems) - 1) from None
    return data


def finite(path: Path, data: Any) -> None:
    """RecordError naming the first NaN or infinity: the harness never writes one (JSON has none)."""
    todo: list[tuple[str, Any]] = [("", data)]
    while todo:
        where, node = todo.pop()
        if isinstance(node, float) and not math.isfinite(node):
            raise RecordError(path, where, f"{node} is not a finite number")
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        todo += [(f"{where}.{k}" if where else str(k), v) for k, v in items]


def same_lengths(path: Path, n: int, columns: Mapping[str, Sequence[Any]], *, empty_ok: bool = False) -> None:
    """RecordError when a column of a saved series does not have one value per time (`n`)."""
    for name, col in columns.items():
        if len(col) != n and not (empty_ok and not col):
            raise RecordError(path, name, f"{len(col)} value(s) for {n} time(s)")


def validate(data: Any) -> list[tuple[str, str]]:
    """Problems of a results document against the schema, as (field, message) (empty when valid)."""
    from pydantic import ValidationError  # start-up: pydantic loads only to validate

    if not isinstance(data, dict):
        return [("", "results must be a JSON object")]
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        return [("format_version",
                 f"{version!r} is not supported (this harness reads {FORMAT_VERSION})")]
    try:
        _adapter().validate_python(data, strict=False)
    except ValidationError as e:
        return _problems(e, data, ())
    out: list[tuple[str, str]] = []
    for name, adapter in (("inventory", _section(_Inventory)), ("history", _section(_History))):
        try:
            adapter.validate_python(data.get(name) or {})
        except ValidationError as e:
            out += _problems(e, data, (name,))
    for i, check in enumerate(data.get("checks") or []):
        out += _sections_of_check(check, ("checks", i))
    return out


def from_json(raw: bytes) -> RunDoc | None:
    """A results.json's bytes parsed and validated in one pass by pydantic-core (strict; the
    sections too) into a RunDoc, or None when that pass refuses them or they spell NaN or
    Infinity. Strict accepts nothing that `validate` and RunRecord.from_dict refuse, so None loses
    nothing: the caller reads the file as `load` does, which names the field."""
    from pydantic import ValidationError  # start-up: pydantic loads only to validate

    if b"NaN" in raw or b"Infinity" in raw:
        return None
    try:
        doc: RunDoc = _section(RunDoc).validate_json(raw, strict=True)
        if doc["format_version"] != FORMAT_VERSION:
            return None
        _section(_Inventory).validate_python(doc["inventory"])
        _section(_History).validate_python(doc.get("history") or {})
        for check in doc["checks"]:
            _section(Details).validate_python(check.get("details") or {})
    except ValidationError:
        return None
    return doc


def _sections_of_check(check: Any, where: tuple[str | int, ...]) -> list[tuple[str, str]]:
    from pydantic import ValidationError  # start-up: pydantic loads only to validate

    try:
        _section(Details).validate_python(check.get("details") or {})
    except ValidationError as e:
        return _problems(e, check, (*where, "details"), skip=len(where))
    return []


def _problems(e: Any, data: Any, where: tuple[str | int, ...], skip: int = 0) -> list[tuple[str, str]]:
    """(field, message) per field of a pydantic ValidationError, the field named by its path in
    `data` (a union's per-member errors become one: 'not a valid str or int')."""
    out: dict[str, list[str]] = {}
    for err in e.errors():
        loc = (*where, *err["loc"])
        node, path = data, list(loc[:skip])
        rest = loc[skip:]
        for k, part in enumerate(rest):  # follow the document: a union member's tag is not a field
            if _has(node, part):
                node = node[part]
            elif not (err["type"] == "missing" and k == len(rest) - 1):
                break
            path.append(part)
        field = ".".join(str(p) for p in path)
        out.setdefault(field, []).append(str(err["msg"]))
    return [(f, _either(msgs)) for f, msgs in out.items()]


def _either(msgs: list[str]) -> str:
    """'Input should be a valid string or a valid integer' from each member's message."""
    texts = [m.removeprefix("Input ") for m in dict.fromkeys(msgs)]
    first, rest = texts[0], [t.removeprefix("should be ") for t in texts[1:]]
    return " or ".join([first, *rest])


def _has(node: Any, part: Any) -> bool:
    if isinstance(node, Mapping):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


@cache
def _section(typ: Any) -> Any:
    from pydantic import TypeAdapter  # start-up: pydantic loads only to validate

    return TypeAdapter(typ)


@cache
def _adapter() -> Any:
    """The RunRecord validator, built once (building it costs ~30 ms; a fleet report loads thousands)."""
    from pydantic import TypeAdapter  # start-up: pydantic loads only to validate

    return TypeAdapter(RunRecord)


@cache
def _check_adapter() -> Any:
    from pydantic import TypeAdapter  # start-up: pydantic loads only to validate

    return TypeAdapter(CheckResult)


@cache
def json_schema() -> dict[str, Any]:
    """JSON Schema of results.json (derived from the frozen dataclasses)."""
    from pydantic import TypeAdapter  # start-up: pydantic loads only to validate

    schema = TypeAdapter(RunRecord).json_schema(mode="serialization")
    props = schema.setdefault("properties", {})
    props["verdict"] = {"enum": list(VERDICTS)}
    props["counts"] = {"type": "object", "additionalProperties": {"type": "integer"}}
    props["format_version"] = {"const": FORMAT_VERSION}
    for name, typ in (("inventory", _Inventory), ("history", _History)):
        props[name] = _section(typ).json_schema()
    details = _section(Details).json_schema()
    defs = schema.setdefault("$defs", {})
    defs.update(details.pop("$defs", {}))
    for name in ("inventory", "history"):
        defs.update(props[name].pop("$defs", {}))
    defs.setdefault("CheckResult", {}).setdefault("properties", {})["details"] = details
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "harness results.json"
    return schema
