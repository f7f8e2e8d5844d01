"""Loading suites and profiles: YAML, then the models, then cross-checks, all problems at once.

Every problem becomes a ConfigProblem located at FILE:LINE:COL; one ConfigError carries all
of them. Profiles may `extends:` another profile, by name or by a path relative to the file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from harness.catalog import METRICS, MetricSpec
from harness.config.driftrules import merge_rules
from harness.config.factrule import merge_fact_rules
from harness.config.kinds import KindSpec, Params
from harness.config.models import CheckSpec, Contention, Expectation, Profile, Settle, Suite
from harness.config.paths import find_profile, find_suite, package_dir, why_untrusted
from harness.config.problems import Doc, did_you_mean, show
from harness.config.yamlload import Locator, PathKey, load_yaml
from harness.errors import ConfigError, ConfigProblem
from harness.units import canonical_for

MAX_EXTENDS = 16
K = TypeVar("K", bound=KindSpec)  # the caller's kind type (harness.checks.base.CheckKind)


@dataclass(frozen=True)
class ResolvedCheck(Generic[K]):
    """One check of a suite with its kind, validated params and effective settings."""

    spec: CheckSpec
    kind: K
    params: Params
    timeout_s: float
    repeat: int
    tags: tuple[str, ...]
    settle: Settle = field(default_factory=Settle)  # type: ignore[arg-type]
    contention: Contention = field(default_factory=Contention)  # type: ignore[arg-type]


@dataclass(frozen=True)
class LoadedSuite(Generic[K]):
    """A validated suite file."""

    path: Path
    suite: Suite
    checks: tuple[ResolvedCheck[K], ...]


@dataclass(frozen=True)
class LoadedProfile:
    """A validated profile with its `extends` chain merged in; chain runs child to root."""

    path: Path
    profile: Profile
    chain: tuple[str, ...]


# ---------------------------------------------------------------- expectations

def _expectation_problems(doc: Doc, prefix: PathKey, known: Mapping[str, MetricSpec],
                          check_unknown: bool, hint: str = "", declared_ok: bool = False
                          ) -> tuple[list[ConfigProblem], set[PathKey]]:
    """Metric names and units of the raw expectations at `prefix`; also the unit paths judged.
    With `declared_ok`, a metric outside the catalogue is accepted when the rule names its `check`
    and `unit` (a metric a command check declares, as `harness baseline capture` writes it)."""
    out: list[ConfigProblem] = []
    judged: set[PathKey] = set()
    items = doc.get(prefix)
    if not isinstance(items, list):
        return out, judged
    for j, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("metric"), str):
            continue
        metric, unit, here = item["metric"], item.get("unit"), (*prefix, j)
        spec = known.get(metric)
        if spec is None:
            declared = declared_ok and bool(item.get("check")) and isinstance(unit, str) and bool(unit)
            if check_unknown and metric and not declared:
                out.append(doc.problem((*here, "metric"), f"unknown metric {metric!r}"
                                                          f"{did_you_mean(metric, known)}{hint}"))
            continue
        if isinstance(unit, str) and _canonical_or_same(unit, spec.unit) != spec.unit:
            judged.add((*here, "unit"))
            out.append(doc.problem((*here, "unit"), f"unit {unit!r} does not match metric "
                                                    f"{metric} ({spec.unit})"))
    return out, judged


def _canonical_or_same(unit: str, metric_unit: str) -> str:
    """The catalogue unit `unit` converts to for a metric in `metric_unit` (MB/s -> GB/s, s -> us),
    or `unit` itself when it is none."""
    try:
        return canonical_for(unit, metric_unit)[0]
    except ValueError:
        return unit


# ---------------------------------------------------------------- suites

def load_suite(path: str | Path, kinds: Mapping[str, K]) -> LoadedSuite[K]:
    """Load and validate a suite (a path, or a name on the suite search path) against `kinds`
    (harness.checks.registry.kinds())."""
    found = find_suite(path)
    data, loc = load_yaml(found)
    return _suite_from(found, data, loc, kinds)


def _suite_from(path: Path, data: Any, loc: Locator, kinds: Mapping[str, K]) -> LoadedSuite[K]:
    doc = Doc(data, loc, "suite")
    if not isinstance(data, dict):
        raise ConfigError([doc.problem((), f"a suite must be a mapping with 'name' and 'checks', "
                                            f"got {show(data)}")])
    problems: list[ConfigProblem] = []
    skip: set[PathKey] = set()
    params: dict[int, Params] = {}
    seen_ids: dict[str, int] = {}
    raw_checks = data.get("checks")
    for i, raw in enumerate(raw_checks if isinstance(raw_checks, list) else []):
        if not isinstance(raw, dict):
            continue
        here: PathKey = ("checks", i)
        cid = raw.get("id")
        if isinstance(cid, str):
            if cid in seen_ids:
                first = loc.locate(("checks", seen_ids[cid], "id"))[0]
                problems.append(doc.problem((*here, "id"), f"duplicate check id {cid!r} "
                                                           f"(first at line {first})"))
            seen_ids.setdefault(cid, i)
        name = raw.get("kind")
        if not isinstance(name, str):
            continue
        kind = kinds.get(name)
        if kind is None:
            known = ", ".join(sorted(kinds)) or "(none)"
            problems.append(doc.problem((*here, "kind"), f"unknown check kind {name!r}"
                                                         f"{did_you_mean(name, kinds)}; known: {known}"))
            continue
        raw_params = raw.get("params", {})
        if isinstance(raw_params, dict):
            try:
                params[i] = kind.params.model_validate(raw_params)
            except ValidationError as e:
                problems += doc.from_validation(e, kind.params, (*here, "params"))
        if i in params:
            known_metrics = {**METRICS, **kind.metric_specs(params[i])}
        else:
            known_metrics = {**METRICS, **kind.metrics}
        check_unknown = i in params or not kind.declares_metrics
        produces = ", ".join(sorted(kind.metrics))
        hint = f"; kind {name!r} produces: {produces}" if produces else ""
        found, judged = _expectation_problems(doc, (*here, "expect"), known_metrics, check_unknown, hint)
        problems += found
        skip |= judged
    if any("duplicate check id" in p.message for p in problems):
        skip.add(())  # Suite's own duplicate-id check, already reported at the id itself
    suite: Suite | None = None
    try:
        suite = Suite.model_validate(data)
    except ValidationError as e:
        problems += doc.from_validation(e, Suite, (), skip)
    if problems or suite is None:
        raise ConfigError(_sorted(problems))
    d = suite.defaults
    checks = tuple(
        ResolvedCheck(spec=spec, kind=kinds[spec.kind], params=params[i],
                      timeout_s=spec.timeout if spec.timeout is not None else d.timeout,
                      repeat=spec.repeat if spec.repeat is not None else d.repeat,
                      tags=tuple(dict.fromkeys([*d.tags, *spec.tags])),
                      settle=spec.settle.over(d.settle) if spec.settle else d.settle,
                      contention=spec.contention.over(d.contention) if spec.contention else d.contention)
        for i, spec in enumerate(suite.checks))
    return LoadedSuite(path=path, suite=suite, checks=checks)


def _sorted(problems: Iterable[ConfigProblem]) -> list[ConfigProblem]:
    return sorted(dict.fromkeys(problems), key=lambda p: (p.line, p.col))


# ---------------------------------------------------------------- profiles

def load_profile(name_or_path: str | Path) -> LoadedProfile:
    """Load a profile (a path, or a name on the profile search path) with its parents merged."""
    return _profile_from(find_profile(name_or_path))


def _profile_from(path: Path, preloaded: tuple[Any, Locator] | None = None) -> LoadedProfile:
    problems: list[ConfigProblem] = []
    loaded = _profile_chain(path, problems, (), preloaded)
    if problems or loaded is None:
        raise ConfigError(problems)
    return loaded


def _profile_chain(path: Path, problems: list[ConfigProblem], stack: tuple[tuple[Path, str], ...],
                   preloaded: tuple[Any, Locator] | None = None) -> LoadedProfile | None:
    """Load `path` and its parents; append problems (file by file, child first)."""
    try:
        data, loc = preloaded if preloaded is not None else load_yaml(path)
    except ConfigError as e:
        problems += e.problems
        return None
    doc = Doc(data, loc, "profile")
    if not isinstance(data, dict):
        problems.append(doc.problem((), f"a profile must be a mapping with a 'name', got {show(data)}"))
        return None
    own, skip = _expectation_problems(doc, ("expectations",), METRICS, True, declared_ok=True)
    own += _expectation_problems(doc, ("drift",), METRICS, True)[0]
    profile: Profile | None = None
    try:
        profile = Profile.model_validate(data)
    except ValidationError as e:
        own += doc.from_validation(e, Profile, (), skip)
    problems += _sorted(own)
    name = data.get("name") if isinstance(data.get("name"), str) else path.stem
    parent: LoadedProfile | None = None
    extends = data.get("extends")
    if isinstance(extends, str):
        me = (path.resolve(), str(name))
        parent_path = _resolve_extends(extends, path)
        if parent_path is None:
            problems.append(doc.problem(("extends",), f"profile {extends!r} (extended by {name!r}) not "
                                                      f"found next to this file or on the search path"))
            return None
        why = why_untrusted(parent_path, "path")
        if why and not parent_path.resolve().is_relative_to(package_dir("profiles").resolve()):
            problems.append(doc.problem(("extends",), f"profile {extends!r} (extended by {name!r}) is not "
                                                      f"trusted: {why}"))
            return None
        ring = [n for p, n in (*stack, me) if p == parent_path.resolve()]
        if ring:
            names = " -> ".join([n for _, n in (*stack, me)] + ring[:1])
            problems.append(doc.problem(("extends",), f"profile inheritance cycle: {names}"))
            return None
        if len(stack) >= MAX_EXTENDS:
            problems.append(doc.problem(("extends",), f"more than {MAX_EXTENDS} levels of extends"))
            return None
        parent = _profile_chain(parent_path, problems, (*stack, me))
        if parent is None:
            return None
    if profile is None:
        return None
    if parent is None:
        return LoadedProfile(path=path, profile=profile, chain=(profile.name,))
    return LoadedProfile(path=path, profile=merge_profiles(parent.profile, profile),
                         chain=(profile.name, *parent.chain))


def _resolve_extends(value: str, from_file: Path) -> Path | None:
    base = from_file.parent
    candidates = [base / value]
    if not value.endswith((".yaml", ".yml")):
        candidates += [base / (value + ".yaml"), base / (value + ".yml")]
    for c in candidates:
        if c.is_file():
            return c
    if "/" in value or os.sep in value or not value:
        return None
    try:
        return find_profile(value)
    except ConfigError:
        return None


def _merge_model(parent: BaseModel, child: BaseModel) -> BaseModel:
    """Fields the child set override the parent's; nested models merge field by field."""
    values: dict[str, Any] = {}
    for name in type(child).model_fields:
        pv, cv = getattr(parent, name), getattr(child, name)
        if name in child.model_fields_set:
            both = isinstance(pv, BaseModel) and type(pv) is type(cv) and name in parent.model_fields_set
            values[name] = _merge_model(pv, cv) if both else cv
        elif name in parent.model_fields_set:
            values[name] = pv
    return type(child).model_validate(values)


def _exp_key(e: Expectation) -> tuple[Any, ...]:
    return (e.metric, tuple(sorted((k, str(v)) for k, v in e.labels.items())), e.check, e.sibling is not None)


def merge_profiles(parent: Profile, child: Profile) -> Profile:
    """The child profile over its parent: hardware field-wise, expectations by (metric, labels, check)."""
    by_key: dict[tuple[Any, ...], list[Expectation]] = {}
    for e in child.expectations:
        by_key.setdefault(_exp_key(e), []).append(e)
    merged: list[Expectation] = []
    emitted: set[tuple[Any, ...]] = set()
    for e in parent.expectations:
        k = _exp_key(e)
        if k not in by_key:
            merged.append(e)
        elif k not in emitted:
            merged += by_key[k]
            emitted.add(k)
    merged += [e for e in child.expectations if _exp_key(e) not in emitted]
    hardware = _merge_model(parent.hardware, child.hardware)
    return Profile.model_validate({
        "name": child.name,
        "description": child.description if "description" in child.model_fields_set
        else parent.description,
        "extends": child.extends,
        "sources": list(dict.fromkeys([*parent.sources, *child.sources])),
        "hardware": hardware,
        "expectations": merged,
        "drift": merge_rules(parent.drift, child.drift),
        "config": merge_fact_rules(parent.config, child.config),
    })


# ---------------------------------------------------------------- validate

def validate_paths(paths: Iterable[str | Path], kinds: Mapping[str, KindSpec]) -> list[ConfigProblem]:
    """Every problem in the given suite and profile files (a top-level `checks` means suite);
    suites are checked against `kinds` (harness.checks.registry.kinds())."""
    out: list[ConfigProblem] = []
    for p in paths:
        path = Path(p)
        try:
            data, loc = load_yaml(path)
            if isinstance(data, dict) and "checks" in data:
                _suite_from(path, data, loc, kinds)
            else:
                _profile_from(path, (data, loc))
        except ConfigError as e:
            out += e.problems
    return out
