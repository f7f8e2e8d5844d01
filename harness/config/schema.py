"""JSON Schema (draft 2020-12) of suites and profiles, for editors such as yaml-language-server.

In the suite schema each check is a `oneOf` over the check kinds: `kind` is a constant and
`params` is that kind's own params schema. Unknown keys stay errors (additionalProperties false).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Literal, Optional

from pydantic import BaseModel, BeforeValidator

import harness.config.numbers as numbers
from harness.catalog import METRICS
from harness.config.kinds import KindSpec
from harness.config.models import Profile, Suite
from harness.units import UNITS

DRAFT = "https://json-schema.org/draft/2020-12/schema"

# pydantic leaves the bounds of a BeforeValidator'd type under their Python names.
_BOUNDS = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}
_DURATION = {"type": "string", "pattern": numbers.DURATION_PATTERN,
             "description": "a duration such as '90s', '10m' or '1h'"}


def json_schema(which: Literal["suite", "profile"],
                kinds: Optional[Mapping[str, KindSpec]] = None) -> dict[str, Any]:
    """The JSON Schema of a suite (over `kinds`, harness.checks.registry.kinds()) or a profile."""
    if which == "profile":
        schema = _model_schema(Profile)
        schema["title"] = "harness profile"
    elif which == "suite":
        if kinds is None:
            raise ValueError("the suite schema needs the check kinds")
        schema = _suite_schema(kinds)
    else:
        raise ValueError(f"which must be 'suite' or 'profile', not {which!r}")
    _tune_expectation(schema.get("$defs", {}).get("Expectation"))
    return {"$schema": DRAFT, **schema}


def _suite_schema(kinds: Mapping[str, KindSpec]) -> dict[str, Any]:
    schema = _model_schema(Suite)
    schema["title"] = "harness suite"
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    if not kinds:
        return schema
    generic = defs.pop("CheckSpec")
    variants = []
    for name in sorted(kinds):
        kind = kinds[name]
        prefix = f"{name}.params."
        params = _model_schema(kind.params, ref_template="#/$defs/" + prefix + "{model}")
        for sub, sub_schema in params.pop("$defs", {}).items():
            defs[prefix + sub] = sub_schema
        check = copy.deepcopy(generic)
        check["title"] = f"check of kind {name}"
        check["properties"]["kind"] = {"const": name, "description": kind.description}
        check["properties"]["params"] = params
        defs[f"check.{name}"] = check
        variants.append({"$ref": f"#/$defs/check.{name}"})
    schema["properties"]["checks"]["items"] = {"oneOf": variants}
    return schema


def _model_schema(model: type[BaseModel], ref_template: str = "#/$defs/{model}") -> dict[str, Any]:
    schema = model.model_json_schema(ref_template=ref_template)
    durations = _duration_fields(model)
    for def_name, sub in [("", schema), *schema.get("$defs", {}).items()]:
        title = sub.get("title") if def_name == "" else def_name
        for field in durations.get(str(title), ()):
            prop = sub.get("properties", {}).get(field)
            if prop is not None:
                _widen_duration(prop)
    _fix_bounds(schema)
    return schema


def _duration_fields(model: type[BaseModel]) -> dict[str, set[str]]:
    """Model name -> fields that accept a duration string as well as seconds."""
    out: dict[str, set[str]] = {}
    todo: list[type[BaseModel]] = [model]
    seen: set[type[BaseModel]] = set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        for name, field in m.model_fields.items():
            if _is_duration([*field.metadata, field.annotation]):
                out.setdefault(m.__name__, set()).add(name)
            todo += _models_in(field.annotation)
    return out


def _is_duration(items: list[Any]) -> bool:
    """Whether these field metadata / annotations carry the duration validator, at any depth."""
    for x in items:
        if isinstance(x, BeforeValidator) and x.func is numbers._duration:
            return True
        if _is_duration([*getattr(x, "__metadata__", ()), *getattr(x, "__args__", ())]):
            return True
    return False


def _models_in(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in getattr(tp, "__args__", ()) for m in _models_in(arg)]


def _widen_duration(prop: dict[str, Any]) -> None:
    """Let a seconds field also take '90s' / '10m' / '1h', as the loader does."""
    options = prop.get("anyOf")
    if isinstance(options, list):
        if any(opt.get("type") == "number" for opt in options):
            options.append(dict(_DURATION))
        return
    number = {k: prop.pop(k) for k in [*_BOUNDS, *_BOUNDS.values(), "type"] if k in prop}
    prop["anyOf"] = [number, dict(_DURATION)]


def _fix_bounds(node: Any) -> None:
    if isinstance(node, dict):
        for py, js in _BOUNDS.items():
            if py in node and isinstance(node[py], (int, float)) and node.get("type") in ("number",
                                                                                          "integer"):
                node[js] = node.pop(py)
            elif py in node and isinstance(node.get("anyOf"), list):  # a number or a '16GiB' string
                bound = node.pop(py)
                for opt in node["anyOf"]:
                    if isinstance(opt, dict) and opt.get("type") in ("number", "integer"):
                        opt[js] = bound
        for v in node.values():
            _fix_bounds(v)
    elif isinstance(node, list):
        for v in node:
            _fix_bounds(v)


def _tune_expectation(exp: Optional[dict[str, Any]]) -> None:
    """Offer the closed vocabularies of units and metric names to the editor."""
    if not exp:
        return
    props = exp.get("properties", {})
    if "unit" in props:
        props["unit"]["enum"] = sorted(UNITS)
    if "metric" in props:
        props["metric"]["examples"] = sorted(METRICS)
