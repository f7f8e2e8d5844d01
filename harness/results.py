"""results.json: write it atomically as checks finish, read it back, and its JSON Schema.

Read back, a run file is data anyone with write access to the run directory may have edited: it is
validated against the schema (the record, and the sections readers walk: inventory, the history
snapshot, and every section of a check's details, typed in harness/sections.py), and a bad value
is one error line naming the file and the field (RecordError, exit 2), never a traceback further on.
"""

from __future__ import annotations

import errno
import json
import math
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Optional

from typing_extensions import TypedDict

from harness.errors import ConfigError, ConfigProblem, RecordError
from harness.fsutil import TooLarge, atomic_write_json, read_bounded
from harness.model import (
    FORMAT_VERSION,
    VERDICTS,
    CheckResult,
    RunRecord,
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


class Inventory(TypedDict, total=False):
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


class History(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    store: str
    node: _Node
    golive: Optional[_RunRef]
    previous: Optional[_RunRef]
    changes: list[_Change]
    events: list[_Change]
    drifted: list[_Drifted]
    trends: list[_Trend]


def write(run_dir: Path, record: RunRecord, *, durable: bool = True) -> None:
    """results.json, atomically; `durable` also fsyncs (snapshots taken mid-run need not)."""
    atomic_write_json(run_dir / RESULTS, record.to_dict(), durable=durable)


def write_check(run_dir: Path, result: CheckResult) -> None:
    """One finished check, on its own, as soon as it is done."""
    atomic_write_json(run_dir / "checks" / f"{result.id}.json", result.to_dict())


# The one rule every reader of a run file holds to (`report`, `export`, `history import`, `resume`,
# the fleet): a regular file, not reached through a symlink (a run directory is anyone's to edit; its
# files must not reveal the reading host's), of at most MAX_BYTES (a run of 476 metrics takes 80 kB).
MAX_BYTES = 64 * 1024 * 1024


def read_bytes(path: Path) -> bytes:
    """A run file's bytes (results.json, checks/ID.json, a saved series) by the one rule: TooLarge
    (an OSError saying why) for a larger file or one that is not regular, never more held in memory
    (a 6 GB sparse file is refused by its size); OSError ELOOP for a symlink."""
    return read_bounded(path, MAX_BYTES, follow=False)


def _read(path: Path) -> Any:
    """The JSON document of a run file, read by the one rule (read_bytes)."""
    return json.loads(read_bytes(path).decode("utf-8"))


def _why(e: Exception) -> str:
    if isinstance(e, OSError) and e.errno == errno.ELOOP:
        return "a symlink: not followed (a run file is read only as a regular file)"
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
        section(schema).validate_python(data)
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
    for name, adapter in (("inventory", section(Inventory)), ("history", section(History))):
        try:
            adapter.validate_python(data.get(name) or {})
        except ValidationError as e:
            out += _problems(e, data, (name,))
    for i, check in enumerate(data.get("checks") or []):
        out += _sections_of_check(check, ("checks", i))
    return out


def _sections_of_check(check: Any, where: tuple[str | int, ...]) -> list[tuple[str, str]]:
    from pydantic import ValidationError  # start-up: pydantic loads only to validate

    try:
        section(Details).validate_python(check.get("details") or {})
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
def section(typ: Any) -> Any:
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
    for name, typ in (("inventory", Inventory), ("history", History)):
        props[name] = section(typ).json_schema()
    details = section(Details).json_schema()
    defs = schema.setdefault("$defs", {})
    defs.update(details.pop("$defs", {}))
    for name in ("inventory", "history"):
        defs.update(props[name].pop("$defs", {}))
    defs.setdefault("CheckResult", {}).setdefault("properties", {})["details"] = details
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "harness results.json"
    return schema
