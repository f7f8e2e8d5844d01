"""Suites and profiles: validation with located problems, profile inheritance, search paths."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.checks.base import CheckKind, KindHooks, MetricSpec, Params
from harness.config import (
    find_profile,
    find_suite,
    list_profiles,
    list_suites,
    load_profile,
    load_suite,
    validate_paths,
)
from harness.config.yamlload import parse_yaml
from harness.errors import ConfigError, ConfigProblem


class DemoParams(Params):
    size: int = 1
    mode: Literal["fast", "slow"] = "fast"


class Inner(Params):
    depth: int = 1


class NestedParams(Params):
    inner: Inner = Inner()
    names: tuple[str, ...] = ()


class CommandParams(Params):
    argv: list[str]
    metric: str = "cmd.value"
    unit: str = "count"


def _kind(name: str, params: type[Params], metrics: Mapping[str, MetricSpec] | None = None,
          declared: Any = None) -> CheckKind:
    return CheckKind(name=name, description=f"the {name} kind", params=params, metrics=metrics or {},
                     run=lambda p, c: None, plan=lambda p, i: [],  # type: ignore
                     hooks=KindHooks(declared_metrics=declared))


KINDS = {
    "demo": _kind("demo", DemoParams, {"demo.rate": MetricSpec("GB/s", "higher")}),
    "nested": _kind("nested", NestedParams),
    "command": _kind("command", CommandParams,
                     declared=lambda p: {p.metric: MetricSpec(p.unit, "none")}),
}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems_of(path: Path, loader: Any = None) -> list[ConfigProblem]:
    with pytest.raises(ConfigError) as exc:
        (loader or (lambda p: load_suite(p, KINDS)))(path)
    assert all(p.file == str(path) for p in exc.value.problems) or loader is not None
    return list(exc.value.problems)


def where(problems: list[ConfigProblem]) -> list[tuple[int, int]]:
    return [(p.line, p.col) for p in problems]


GOOD_SUITE = """\
name: smoke
defaults:
  timeout: 10m
  tags: [quick]
checks:
  - id: demo-a
    kind: demo
    params: {size: 4, mode: slow}
    tags: [disk, quick]
    expect:
      - {metric: demo.rate, unit: GB/s, min: 1}
      - {metric: fio.bw, unit: GB/s, reference: 2, lower: 0.1}
  - id: demo-b
    kind: demo
    timeout: 30s
    repeat: 3
  - id: cmd
    kind: command
    params: {argv: [echo, "1"], metric: cmd.lines, unit: count}
    expect:
      - {metric: cmd.lines, unit: count, min: 1}
"""


def test_good_suite_resolves(tmp_path: Path) -> None:
    loaded = load_suite(write(tmp_path, "s.yaml", GOOD_SUITE), KINDS)
    assert loaded.suite.name == "smoke"
    a, b, c = loaded.checks
    assert isinstance(a.params, DemoParams) and a.params.size == 4 and a.params.mode == "slow"
    assert a.kind is KINDS["demo"]
    assert (a.timeout_s, a.repeat, a.tags) == (600.0, 1, ("quick", "disk"))
    assert (b.timeout_s, b.repeat, b.tags) == (30.0, 3, ("quick",))
    assert b.params == DemoParams()
    assert isinstance(c.params, CommandParams) and c.params.argv == ["echo", "1"]


def test_unknown_keys_located_at_the_key_at_every_depth(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", """\
        name: smoke
        chekcs_extra: 1
        defaults:
          timout: 10
        checks:
          - id: fio-quick
            kind: demo
            tmeout: 5
            params:
              sise: 3
            expect:
              - metric: demo.rate
                unit: GB/s
                min: 1
                lables: {x: 1}
          - id: deep
            kind: nested
            params:
              inner: {depht: 2}
        """)
    probs = problems_of(path)
    assert [str(p) for p in probs] == [
        f"{path}:2:1: unknown key 'chekcs_extra' in suite",
        f"{path}:4:3: unknown key 'timout' in defaults (did you mean 'timeout'?)",
        f"{path}:8:5: unknown key 'tmeout' in check 'fio-quick' (did you mean 'timeout'?)",
        f"{path}:10:7: unknown key 'sise' in params of check 'fio-quick' (did you mean 'size'?)",
        f"{path}:15:9: unknown key 'lables' in expect[0] of check 'fio-quick' (did you mean 'labels'?)",
        f"{path}:19:15: unknown key 'depht' in params.inner of check 'deep' (did you mean 'depth'?)",
    ]


def test_unknown_kind_did_you_mean_and_known_list(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", "name: s\nchecks:\n  - {id: a, kind: demoo}\n")
    (p,) = problems_of(path)
    assert (p.line, p.col) == (3, 19)
    assert p.message == "unknown check kind 'demoo' (did you mean 'demo'?); known: command, demo, nested"


def test_wrong_types_readable_and_located_at_value(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", """\
        name: bad name
        defaults: {repeat: many, timeout: soon}
        checks:
          - id: a
            kind: demo
            params: {size: abc, mode: fsat}
            needs: [gpu, gpuu]
            expect:
              - {metric: demo.rate, unit: GB/s, min: lots}
              - just a string
          - 42
        """)
    msgs = {(p.line, p.col): p.message for p in problems_of(path)}
    assert msgs[(1, 7)].startswith("name: 'bad name' is not a valid name")
    assert msgs[(2, 20)] == "defaults.repeat: expected an integer, got 'many'"
    assert "not a duration" in msgs[(2, 35)]
    assert msgs[(6, 20)] == "params.size of check 'a': expected an integer, got 'abc'"
    assert msgs[(6, 31)] == ("params.mode of check 'a': expected one of 'fast' or 'slow', got 'fsat' "
                             "(did you mean 'fast'?)")
    assert msgs[(7, 18)].startswith("needs[1] of check 'a': expected one of")
    assert msgs[(9, 46)] == ("expect[0].min of check 'a': expected a number in GB/s (e.g. 12.5 or "
                             "'12.5 GB/s'), got 'lots'")
    assert msgs[(10, 9)] == "expect[1] of check 'a': expected a mapping, got 'just a string'"
    assert msgs[(11, 5)] == "check #2: expected a mapping, got 42"


def test_all_problems_reported_at_once_sorted_by_line(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", """\
        name: s
        checks:
          - id: a
            kind: nope
          - id: b
            kind: demo
            params: {size: x}
          - id: a
            kind: demo
            timeout: -5
        """)
    probs = problems_of(path)
    assert where(probs) == sorted(where(probs))
    assert len(probs) == 4
    text = "\n".join(str(p) for p in probs)
    assert "unknown check kind 'nope'" in text
    assert "expected an integer, got 'x'" in text
    assert f"{path}:8:9: duplicate check id 'a' (first at line 3)" in text
    assert "must be greater than 0, got -5" in text


def test_missing_required_keys_located_at_the_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", "name: s\nchecks:\n  - id: a\n    kind: command\n  - kind: demo\n")
    probs = problems_of(path)
    assert [str(p) for p in probs] == [
        f"{path}:3:5: missing required key 'argv' in params of check 'a'",
        f"{path}:5:5: missing required key 'id' in check #2",
    ]


def test_union_errors_collapse_into_one(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", """\
        name: s
        checks:
          - id: a
            kind: demo
            expect: [{metric: demo.rate, unit: GB/s, min: 1, labels: {gpu: [0]}}]
        """)
    (p,) = problems_of(path)
    assert p.message == "expect[0].labels.gpu of check 'a': expected a string or an integer, got a list"


def test_expectation_metric_and_unit_against_catalogue_and_kind(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", """\
        name: s
        checks:
          - id: a
            kind: demo
            expect:
              - {metric: fio.bw, unit: kW  , min: 1}
              - {metric: fio.bw, unit: us, min: 1}
              - {metric: demo.rat, unit: GB/s, min: 1}
              - {metric: demo.rate, unit: W, min: 1}
          - id: c
            kind: command
            params: {argv: [x], metric: cmd.lines, unit: count}
            expect:
              - {metric: cmd.lines, unit: s, min: 1}
              - {metric: cmd.line, unit: count, min: 1}
        """)
    assert [str(p) for p in problems_of(path)] == [
        f"{path}:6:32: unit 'kW' does not match metric fio.bw (GB/s)",
        f"{path}:7:32: unit 'us' does not match metric fio.bw (GB/s)",
        f"{path}:8:18: unknown metric 'demo.rat' (did you mean 'demo.rate'?); kind 'demo' produces: "
        "demo.rate",
        f"{path}:9:35: unit 'W' does not match metric demo.rate (GB/s)",
        f"{path}:14:35: unit 's' does not match metric cmd.lines (count)",
        f"{path}:15:18: unknown metric 'cmd.line' (did you mean 'cmd.lines'?)",
    ]


def test_profile_sibling_expectations_load_and_their_mistakes_are_located(tmp_path: Path) -> None:
    good = write(tmp_path, "good.yaml", """\
        name: good
        expectations:
          - {metric: gpu_burn.tflops, sibling: {min_ratio: 0.95}, unit: TFLOPS}
          - {metric: gpu.temp_max, sibling: {vary: [gpu], max_above: 10}, unit: C, severity: warn}
          - {metric: gpu_burn.tflops, min: 711, unit: TFLOPS}
        """)
    exps = load_profile(good).profile.expectations
    assert [(e.metric, e.sibling is not None) for e in exps] == [
        ("gpu_burn.tflops", True), ("gpu.temp_max", True), ("gpu_burn.tflops", False)]
    assert exps[1].sibling is not None and exps[1].sibling.vary == ["gpu"] and exps[1].sibling.max_above == 10
    bad = write(tmp_path, "bad.yaml", """\
        name: bad
        expectations:
          - {metric: gpu_burn.tflops, sibling: {min_ratio: 0.95, max_below: 30}, unit: TFLOPS}
          - {metric: gpu.temp_max, sibling: {max_above: 10, spread: 3}, unit: C}
          - {metric: gpu.temp_max, sibling: {max_above: 10}, max: 90, unit: C}
        """)
    found = [str(p) for p in problems_of(bad, load_profile)]
    assert len(found) == 3, found
    assert found[0].startswith(f"{bad}:3:") and "exactly one of min_ratio, max_ratio" in found[0]
    assert found[1].startswith(f"{bad}:4:") and "spread" in found[1]
    assert found[2].startswith(f"{bad}:5:") and "no reference, lower, upper, min or max" in found[2]


def test_suite_must_be_a_mapping(tmp_path: Path) -> None:
    (p,) = problems_of(write(tmp_path, "s.yaml", "- a\n- b\n"))
    assert (p.line, p.col) == (1, 1) and "must be a mapping" in p.message


def test_yaml_problems_pass_through(tmp_path: Path) -> None:
    (p,) = problems_of(write(tmp_path, "s.yaml", "name: s\nname: t\n"))
    assert (p.line, p.col, p.message) == (2, 1, "duplicate key 'name' (first at line 1)")


# ---------------------------------------------------------------- profiles

BASE = """\
name: base
description: the base
sources: [vendor sheet]
hardware:
  gpu: {models: [NVIDIA H100 80GB HBM3], count: 8}
  nvme_count: 4
  psu: {count: 4, rating_w: 3000}
expectations:
  - {metric: fio.bw, unit: GB/s, min: 5}
  - {metric: gpu.temp_max, unit: C, max: 85}
  - {metric: nccl.busbw, labels: {op: all_reduce}, unit: GB/s, min: 300}
"""


def test_profile_extends_merges_and_overrides(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", BASE)
    child = write(tmp_path, "child.yaml", """\
        name: child
        extends: base
        sources: [our lab]
        hardware:
          gpu: {count: 4}
          cpu_model: EPYC
        expectations:
          - {metric: gpu.temp_max, unit: C, max: 80, severity: warn}
          - {metric: nccl.busbw, labels: {op: all_gather}, unit: GB/s, min: 200}
          - {metric: gpu.xid, unit: count, max: 0}
        """)
    loaded = load_profile(child)
    prof = loaded.profile
    assert loaded.chain == ("child", "base")
    assert loaded.path == child
    assert prof.name == "child" and prof.description == "the base"
    assert prof.sources == ["vendor sheet", "our lab"]
    assert prof.hardware.gpu.count == 4
    assert prof.hardware.gpu.models == ["NVIDIA H100 80GB HBM3"]
    assert prof.hardware.nvme_count == 4 and prof.hardware.cpu_model == "EPYC"
    assert prof.hardware.psu is not None and prof.hardware.psu.rating_w == 3000
    got = [(e.metric, dict(e.labels), e.min, e.max) for e in prof.expectations]
    assert got == [
        ("fio.bw", {}, 5, None),
        ("gpu.temp_max", {}, None, 80),
        ("nccl.busbw", {"op": "all_reduce"}, 300, None),
        ("nccl.busbw", {"op": "all_gather"}, 200, None),
        ("gpu.xid", {}, None, 0),
    ]


def test_three_level_chain_by_relative_path(tmp_path: Path) -> None:
    write(tmp_path, "lib/base.yaml", BASE)
    write(tmp_path, "lib/mid.yaml", "name: mid\nextends: base.yaml\nhardware: {nvme_count: 8}\n")
    leaf = write(tmp_path, "site/leaf.yaml", "name: leaf\nextends: ../lib/mid.yaml\n")
    loaded = load_profile(leaf)
    assert loaded.chain == ("leaf", "mid", "base")
    assert loaded.profile.hardware.nvme_count == 8
    assert loaded.profile.hardware.gpu.count == 8


def test_extends_cycle_names_the_chain(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", "name: a\nextends: b\n")
    b = write(tmp_path, "b.yaml", "name: b\nextends: c\n")
    write(tmp_path, "c.yaml", "name: c\nextends: a\n")
    with pytest.raises(ConfigError) as exc:
        load_profile(a)
    (p,) = exc.value.problems
    assert (p.file, p.line, p.col) == (str(tmp_path / "c.yaml"), 2, 10)
    assert p.message == "profile inheritance cycle: a -> b -> c -> a"
    with pytest.raises(ConfigError):
        load_profile(b)


def test_self_extension_is_a_cycle(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", "name: a\nextends: a\n")
    with pytest.raises(ConfigError, match="cycle: a -> a"):
        load_profile(a)


def test_missing_parent_located_at_extends_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_PROFILES_PATH", str(tmp_path / "none"))
    child = write(tmp_path, "child.yaml", "name: child\ndescription: x\nextends: no-such-parent\n")
    with pytest.raises(ConfigError) as exc:
        load_profile(child)
    (p,) = exc.value.problems
    assert (p.file, p.line, p.col) == (str(child), 3, 10)
    assert "'no-such-parent'" in p.message and "not found" in p.message


def test_problems_in_parent_reported_in_parent_file(tmp_path: Path) -> None:
    base = write(tmp_path, "base.yaml",
                 "name: base\nexpectations:\n  - {metric: fio.bw, unit: ms, min: 1}\n")
    child = write(tmp_path, "child.yaml", "name: child\nextends: base\nhardwre: {}\n")
    with pytest.raises(ConfigError) as exc:
        load_profile(child)
    assert [str(p) for p in exc.value.problems] == [
        f"{child}:3:1: unknown key 'hardwre' in profile (did you mean 'hardware'?)",
        f"{base}:3:28: unit 'ms' does not match metric fio.bw (GB/s)",
    ]


def test_profile_metrics_must_be_in_catalogue(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", """\
        name: p
        expectations:
          - {metric: gpu.tmp_max, unit: C, max: 80}
          - {metric: nccl.busbw, unit: GHz, min: 1}
          - {metric: gpu.temp_max, unit: C}
        """)
    with pytest.raises(ConfigError) as exc:
        load_profile(path)
    assert [str(p) for p in exc.value.problems] == [
        f"{path}:3:14: unknown metric 'gpu.tmp_max' (did you mean 'gpu.temp_max'?)",
        f"{path}:4:32: unit 'GHz' does not match metric nccl.busbw (GB/s)",
        f"{path}:5:5: expectations[2]: give a reference (with lower/upper) or min/max",
    ]


# ---------------------------------------------------------------- validate_paths and search paths

def test_validate_paths_collects_every_file(tmp_path: Path) -> None:
    good_s = write(tmp_path, "good-suite.yaml", GOOD_SUITE)
    good_p = write(tmp_path, "base.yaml", BASE)
    bad_s = write(tmp_path, "bad-suite.yaml", "name: s\nchecks:\n  - {id: a, kind: demo, x: 1}\n")
    bad_p = write(tmp_path, "bad-profile.yaml", "name: p\nhardware: {gpu: {count: -1}}\n")
    probs = validate_paths([good_s, good_p, bad_s, bad_p, tmp_path / "missing.yaml", tmp_path], KINDS)
    assert [(Path(p.file).name, p.line, p.col) for p in probs] == [
        ("bad-suite.yaml", 3, 25), ("bad-profile.yaml", 2, 25), ("missing.yaml", 1, 1),
        (tmp_path.name, 1, 1),
    ]
    assert validate_paths([good_s, good_p], KINDS) == []


def test_find_by_name_env_then_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_dir, cwd = tmp_path / "env", tmp_path / "cwd"
    write(env_dir, "smoke.yaml", "x: env\n")
    write(cwd, "suites/smoke.yaml", "x: cwd\n")
    write(cwd, "suites/extra.yml", "x: yml\n")
    write(cwd, "profiles/generic.yaml", "name: generic\n")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HARNESS_SUITES_PATH", f"{tmp_path / 'absent'}:{env_dir}")
    monkeypatch.setenv("HARNESS_PROFILES_PATH", "")
    assert find_suite("smoke") == env_dir / "smoke.yaml"
    assert find_suite("smoke.yaml") == env_dir / "smoke.yaml"
    assert find_suite("extra") == cwd / "suites" / "extra.yml"
    assert find_profile("generic").resolve() == (cwd / "profiles" / "generic.yaml").resolve()
    assert find_suite(str(cwd / "suites" / "smoke.yaml")) == cwd / "suites" / "smoke.yaml"
    names = [p.name for p in list_suites()]
    assert "smoke.yaml" in names and "extra.yml" in names and len(names) == len(set(p.stem for p in
                                                                                   list_suites()))
    assert (cwd / "profiles" / "generic.yaml").resolve() in [p.resolve() for p in list_profiles()]
    monkeypatch.delenv("HARNESS_SUITES_PATH")
    assert find_suite("smoke").resolve() == (cwd / "suites" / "smoke.yaml").resolve()
    assert load_profile("generic").profile.name == "generic"


def test_not_found_names_the_searched_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_SUITES_PATH", str(tmp_path / "mine"))
    with pytest.raises(ConfigError) as exc:
        find_suite("no-such-suite")
    msg = str(exc.value)
    assert "'no-such-suite' not found" in msg
    assert str(tmp_path / "mine") in msg and str(tmp_path / "suites") in msg
    with pytest.raises(ConfigError, match="does not exist"):
        find_profile(str(tmp_path / "x" / "p.yaml"))


# ---------------------------------------------------------------- robustness

def _mutate(text: str, edits: list[tuple[int, int, str]]) -> str:
    for pos, cut, insert in edits:
        text = text[:pos] + insert + text[pos + cut:]
    return text


EDITS = st.lists(st.tuples(st.integers(0, len(GOOD_SUITE)), st.integers(0, 6),
                           st.sampled_from(["x", "1", "-1", " ", "\n", ":", "- ", "{", "}", "[", "]",
                                            "'", "~", "true", "kind: demo", "  ", "params: 3",
                                            "id: a\n", "&a ", "*a", "<<: *a"])),
                 max_size=5)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EDITS)
def test_mutated_suite_yields_problems_or_a_suite(tmp_path_factory: pytest.TempPathFactory,
                                                 edits: list[tuple[int, int, str]]) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "s.yaml"
    path.write_text(_mutate(GOOD_SUITE, edits), encoding="utf-8")
    start = time.monotonic()
    probs = validate_paths([path], KINDS)
    assert time.monotonic() - start < 2.0
    assert all(p.line >= 1 and p.col >= 1 and p.message for p in probs)
    if not probs:
        assert load_suite(path, KINDS).checks


def test_parse_yaml_and_suite_agree_on_positions(tmp_path: Path) -> None:
    _, loc = parse_yaml(GOOD_SUITE, "s")
    assert loc.locate(("checks", 1, "timeout")) == (15, 14)


class Disk(Params):
    device: str


class Ram(Params):
    size_gb: int


class UnionParams(Params):
    target: Disk | Ram


def test_union_of_models_tags_are_not_paths(tmp_path: Path) -> None:
    kinds = {"u": _kind("u", UnionParams)}
    path = write(tmp_path, "s.yaml", """\
        name: s
        checks:
          - id: a
            kind: u
            params:
              target: {devise: /dev/x}
        """)
    with pytest.raises(ConfigError) as exc:
        load_suite(path, kinds)
    assert [str(p) for p in exc.value.problems] == [
        f"{path}:6:15: missing required key 'device' in params.target of check 'a'",
        f"{path}:6:16: unknown key 'devise' in params.target of check 'a' (did you mean 'device'?)",
    ]
    assert load_suite(write(tmp_path, "ok.yaml", "name: s\nchecks: [{id: a, kind: u, params: "
                                                 "{target: {size_gb: 2}}}]\n"), kinds).checks


# ---------------------------------------------------------------- kinds through the KindSpec Protocol

class _PlainKind:
    """Not a CheckKind: only what config's KindSpec Protocol asks for."""

    description = "a kind config meets only through its Protocol"
    params = DemoParams
    metrics: Mapping[str, MetricSpec] = {"demo.rate": MetricSpec("GB/s", "higher")}
    declared_metrics = None

    def metric_specs(self, params: Any) -> Mapping[str, MetricSpec]:
        return self.metrics


def test_config_takes_any_kind_that_fits_its_protocol(tmp_path: Path) -> None:
    kinds = {"plain": _PlainKind()}
    path = write(tmp_path, "s.yaml", "name: s\nchecks:\n  - {id: a, kind: plain, params: {size: 3},"
                                     " expect: [{metric: demo.rate, min: 1, unit: GB/s}]}\n")
    loaded = load_suite(path, kinds)
    assert loaded.checks[0].kind is kinds["plain"] and loaded.checks[0].params == DemoParams(size=3)
    bad = write(tmp_path, "b.yaml", "name: s\nchecks:\n  - {id: a, kind: plain,"
                                    " expect: [{metric: demo.rat, min: 1, unit: GB/s}]}\n")
    assert [p.message for p in validate_paths([bad], kinds)] == [
        "unknown metric 'demo.rat' (did you mean 'demo.rate'?); kind 'plain' produces: demo.rate"]
    assert "unknown check kind 'plain'" in str(validate_paths([bad], {})[0])
