"""results.json: write it atomically as checks finish, read it back, and its JSON Schema."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, ConfigProblem
from harness.fsutil import atomic_write_json
from harness.model import FORMAT_VERSION, VERDICTS, CheckResult, RunRecord

RESULTS = "results.json"


def write(run_dir: Path, record: RunRecord, *, durable: bool = True) -> None:
    """results.json, atomically; `durable` also fsyncs (snapshots taken mid-run need not)."""
    atomic_write_json(run_dir / RESULTS, record.to_dict(), durable=durable)


def write_check(run_dir: Path, result: CheckResult) -> None:
    """One finished check, on its own, as soon as it is done."""
    atomic_write_json(run_dir / "checks" / f"{result.id}.json", result.to_dict())


def load(run_dir: Path) -> RunRecord:
    """Read and validate results.json of a run directory (ConfigError when it is not one)."""
    path = run_dir / RESULTS if run_dir.is_dir() else run_dir
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError([ConfigProblem(str(path), 1, 1, "no results.json: not a run directory")]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([ConfigProblem(str(path), 1, 1, f"cannot read: {e}")]) from e
    except json.JSONDecodeError as e:
        raise ConfigError([ConfigProblem(str(path), e.lineno, e.colno, f"not JSON: {e.msg}")]) from e
    problems = validate(data)
    if problems:
        raise ConfigError([ConfigProblem(str(path), 1, 1, p) for p in problems])
    return RunRecord.from_dict(data)


def validate(data: Any) -> list[str]:
    """Problems of a results document against the schema (empty when valid)."""
    from pydantic import ValidationError  # start-up: pydantic loads only to validate

    if not isinstance(data, dict):
        return ["results must be a JSON object"]
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        return [f"format_version {version!r} is not supported (this harness reads {FORMAT_VERSION})"]
    try:
        _adapter().validate_python(data, strict=False)
    except ValidationError as e:
        return [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()[:20]]
    return []


@cache
def _adapter() -> Any:
    """The RunRecord validator, built once (building it costs ~30 ms; a fleet report loads thousands)."""
    from pydantic import TypeAdapter  # start-up: pydantic loads only to validate

    return TypeAdapter(RunRecord)


@cache
def json_schema() -> dict[str, Any]:
    """JSON Schema of results.json (derived from the frozen dataclasses)."""
    from pydantic import TypeAdapter  # start-up: pydantic loads only to validate

    schema = TypeAdapter(RunRecord).json_schema(mode="serialization")
    props = schema.setdefault("properties", {})
    props["verdict"] = {"enum": list(VERDICTS)}
    props["counts"] = {"type": "object", "additionalProperties": {"type": "integer"}}
    props["format_version"] = {"const": FORMAT_VERSION}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "harness results.json"
    return schema
