"""JSON Schema export for editors: one variant per check kind, durations, closed vocabularies."""

from __future__ import annotations

import json
from typing import Literal

import pytest

from harness.checks.base import CheckKind, MetricSpec, Params
from harness.config import json_schema
from harness.config.numbers import Seconds
from harness.units import UNITS


class Geometry(Params):
    rows: int = 1


class DemoParams(Params):
    size: int = 1
    mode: Literal["fast", "slow"] = "fast"
    geometry: Geometry = Geometry()
    settle: Seconds = 5.0


class OtherParams(Params):
    argv: list[str]
    geometry: Geometry = Geometry()


def _kind(name: str, params: type[Params]) -> CheckKind:
    return CheckKind(name=name, description=f"the {name} kind", params=params,
                     metrics={f"{name}.x": MetricSpec("count", "none")},
                     run=lambda p, c: None, plan=lambda p, i: [])  # type: ignore[arg-type,return-value]


KINDS = {"demo": _kind("demo", DemoParams), "other": _kind("other", OtherParams)}


def _resolve(schema: dict, ref: str) -> dict:
    assert ref.startswith("#/$defs/")
    return schema["$defs"][ref[len("#/$defs/"):]]


def test_suite_schema_has_one_variant_per_kind_with_its_params() -> None:
    schema = json_schema("suite", KINDS)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    variants = schema["properties"]["checks"]["items"]["oneOf"]
    by_kind = {}
    for v in variants:
        check = _resolve(schema, v["$ref"])
        by_kind[check["properties"]["kind"]["const"]] = check
    assert set(by_kind) == set(KINDS)
    demo = by_kind["demo"]
    assert demo["additionalProperties"] is False
    assert set(demo["required"]) == {"id", "kind"}
    params = demo["properties"]["params"]
    assert params["additionalProperties"] is False
    assert set(params["properties"]) == {"size", "mode", "geometry", "settle"}
    assert params["properties"]["mode"]["enum"] == ["fast", "slow"]
    assert by_kind["other"]["properties"]["params"]["required"] == ["argv"]
    # each kind's nested models live under their own names, and every $ref resolves
    text = json.dumps(schema)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "')[1:]}:
        _resolve(schema, ref)
    assert "demo.params.Geometry" in schema["$defs"] and "other.params.Geometry" in schema["$defs"]


def test_durations_accept_strings_and_bounds_are_json_schema() -> None:
    schema = json_schema("suite", KINDS)
    text = json.dumps(schema)
    assert '"gt":' not in text and '"le":' not in text
    timeout = schema["$defs"]["Defaults"]["properties"]["timeout"]
    assert {"type": "number", "exclusiveMinimum": 0, "maximum": 604800} in timeout["anyOf"]
    assert any(o.get("type") == "string" and "pattern" in o for o in timeout["anyOf"])


def test_expectation_units_are_a_closed_list() -> None:
    for which in ("suite", "profile"):
        exp = json_schema(which, KINDS)["$defs"]["Expectation"]  # type: ignore[arg-type]
        assert exp["properties"]["unit"]["enum"] == sorted(UNITS)
        assert "fio.bw" in exp["properties"]["metric"]["examples"]


def test_profile_schema() -> None:
    schema = json_schema("profile")
    assert schema["title"] == "harness profile"
    assert {"name", "extends", "hardware", "expectations"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False


def test_bad_which() -> None:
    with pytest.raises(ValueError, match="suite"):
        json_schema("results")  # type: ignore[arg-type]


def test_schema_validates_documents_like_the_loader() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema("suite", KINDS)
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    good = {"name": "s", "defaults": {"timeout": "10m"}, "checks": [
        {"id": "a", "kind": "demo", "params": {"size": 2, "settle": "30s"}, "timeout": 90},
        {"id": "b", "kind": "other", "params": {"argv": ["true"]},
         "expect": [{"metric": "fio.bw", "unit": "GB/s", "min": 1}]},
    ]}
    assert list(v.iter_errors(good)) == []
    for bad in (
        {"name": "s", "checks": [{"id": "a", "kind": "demo", "params": {"size": "x"}}]},
        {"name": "s", "checks": [{"id": "a", "kind": "demo", "params": {"argv": ["x"]}}]},
        {"name": "s", "checks": [{"id": "a", "kind": "nope"}]},
        {"name": "s", "checks": [{"id": "a", "kind": "demo", "tmeout": 3}]},
        {"name": "s", "checks": [{"id": "a", "kind": "demo", "timeout": "soon"}]},
        {"name": "s", "checks": []},
    ):
        assert list(v.iter_errors(bad)), bad
    profile = json_schema("profile")
    jsonschema.Draft202012Validator.check_schema(profile)
    assert not list(jsonschema.Draft202012Validator(profile).iter_errors(
        {"name": "p", "hardware": {"gpu": {"count": 8}}, "expectations": []}))


def test_the_suite_schema_needs_the_kinds_it_is_handed() -> None:
    with pytest.raises(ValueError, match="check kinds"):
        json_schema("suite")
    assert json_schema("suite", {})["title"] == "harness suite"
