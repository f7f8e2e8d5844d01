"""Safe YAML loading: located data, and every way a file can be refused."""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.config.yamlload import MAX_DEPTH, load_yaml, parse_yaml
from harness.errors import ConfigError, ConfigProblem


def write(tmp_path: Path, text: str | bytes, name: str = "f.yaml") -> Path:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


def refused(text: str) -> ConfigProblem:
    with pytest.raises(ConfigError) as exc:
        parse_yaml(text, "f.yaml")
    assert len(exc.value.problems) == 1
    return exc.value.problems[0]


def test_plain_objects_and_positions(tmp_path: Path) -> None:
    path = write(tmp_path, "name: demo\nchecks:\n  - id: a\n    params: {bs: 4k, n: 3}\n")
    data, loc = load_yaml(path)
    assert data == {"name": "demo", "checks": [{"id": "a", "params": {"bs": "4k", "n": 3}}]}
    assert loc.file == str(path)
    assert loc.locate(("name",)) == (1, 7)
    assert loc.locate(("name",), key=True) == (1, 1)
    assert loc.locate(("checks", 0)) == (3, 5)
    assert loc.locate(("checks", 0, "params", "bs"), key=True) == (4, 14)
    assert loc.locate(("checks", 0, "params", "n")) == (4, 25)


def test_missing_path_falls_back_to_nearest_parent() -> None:
    _, loc = parse_yaml("a:\n  b:\n    c: 1\n", "f.yaml")
    assert loc.locate(("a", "b", "zzz", 3)) == loc.locate(("a", "b")) == (3, 5)
    assert loc.locate(("nope",)) == (1, 1)
    assert loc.existing(("a", "b", "zzz")) == ("a", "b")
    assert str(loc.problem(("a", "b", "c"), "bad")) == "f.yaml:3:8: bad"


def test_scalar_types() -> None:
    data, _ = parse_yaml("i: 3\nf: 1.5\nb: true\nn:\ns: '3'\nd: 2024-01-31\n", "f")
    assert data == {"i": 3, "f": 1.5, "b": True, "n": None, "s": "3", "d": "2024-01-31"}


def test_duplicate_key_names_first_line() -> None:
    p = refused("a: 1\nb:\n  x: 1\n  x: 2\n")
    assert (p.line, p.col, p.message) == (4, 3, "duplicate key 'x' (first at line 3)")


@pytest.mark.parametrize(("text", "col"), [("1: a\n", 1), ("x: {on: 1}\n", 5), ("? [a]\n: 1\n", 3)])
def test_non_string_keys_refused(text: str, col: int) -> None:
    p = refused(text)
    assert p.line == 1 and p.col == col
    assert "string" in p.message


@pytest.mark.parametrize("text", [
    "a: !!python/object/apply:os.system ['true']\n",
    "a: !!python/name:os.system ''\n",
    "a: !!binary aGVsbG8=\n",
    "a: !custom 3\n",
    "a: !!set {x, y}\n",
])
def test_unsafe_or_unusual_tags_refused(text: str) -> None:
    p = refused(text)
    assert (p.line, p.col) == (1, 4)
    assert "unsupported YAML tag" in p.message


def test_alias_bomb_refused_fast_and_small() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    prev = "a"
    for name in "bcdefghij":
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 10)}]")
        prev = name
    text = "\n".join(lines) + "\n"
    tracemalloc.start()
    start = time.monotonic()
    try:
        p = refused(text)
        elapsed = time.monotonic() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "too many nodes" in p.message and "alias bomb" in p.message
    # 10^10 nodes if expanded: any bound proves it was not; generous so a loaded CI box passes.
    assert elapsed < 30.0
    assert peak < 100 * 1024 * 1024


def test_merge_keys_work_and_explicit_keys_win() -> None:
    data, loc = parse_yaml("base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  y: 3\n", "f")
    assert data["c"] == {"x": 1, "y": 3}
    assert loc.locate(("c", "y")) == (4, 6)


def test_recursive_alias_refused() -> None:
    p = refused("a: &x [1, *x]\n")
    assert "recursive alias" in p.message


def test_deep_nesting_refused() -> None:
    depth = MAX_DEPTH + 50
    p = refused("a: " + "[" * depth + "]" * depth + "\n")
    assert p.line == 1 and "nested deeper" in p.message
    data, _ = parse_yaml("a: " + "[" * 50 + "]" * 50 + "\n", "f")
    assert isinstance(data["a"], list)


def test_very_deep_nesting_does_not_overflow_the_stack() -> None:
    p = refused("[" * 100_000)
    assert "nested deeper" in p.message


def test_syntax_error_position() -> None:
    p = refused("name: x\nchecks: [a, b\nother: 1\n")
    assert (p.line, p.col) == (3, 6)
    assert p.message.startswith("YAML syntax error:")
    assert "line 2" in p.message


def test_tab_indentation_is_a_yaml_error() -> None:
    p = refused("a:\n\tb: 1\n")
    assert (p.line, p.col) == (2, 1)
    assert "YAML syntax error" in p.message


def test_more_than_one_document() -> None:
    p = refused("a: 1\n---\nb: 2\n")
    assert p.line == 2 and "more than one YAML document" in p.message


@pytest.mark.parametrize("text", ["", "# only a comment\n", "\n\n"])
def test_empty_file(text: str) -> None:
    p = refused(text)
    assert (p.line, p.col) == (1, 1) and "empty" in p.message


def test_control_character_located() -> None:
    p = refused("a: 1\nb: x\x07y\n")
    assert (p.line, p.col) == (2, 5)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        load_yaml(tmp_path / "nope.yaml")
    assert [str(p) for p in exc.value.problems] == [f"{tmp_path / 'nope.yaml'}:1:1: no such file"]


def test_directory_given_as_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        load_yaml(tmp_path)
    assert "is a directory" in exc.value.problems[0].message


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads anything")
def test_unreadable_file(tmp_path: Path) -> None:
    p = write(tmp_path, "a: 1\n")
    p.chmod(0)
    with pytest.raises(ConfigError) as exc:
        load_yaml(p)
    assert "cannot read" in exc.value.problems[0].message


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_yaml(fifo)


def test_os_error_reported_as_config_problem(tmp_path: Path) -> None:
    parent = write(tmp_path, "a: 1\n")
    with pytest.raises(ConfigError) as exc:
        load_yaml(parent / "child.yaml")
    (p,) = exc.value.problems
    assert (p.file, p.line, p.col) == (str(parent / "child.yaml"), 1, 1)
    assert p.message.startswith("cannot read")


def test_not_utf8_located_at_bad_byte(tmp_path: Path) -> None:
    p = write(tmp_path, b"a: 1\nb: caf\xe9\n")
    with pytest.raises(ConfigError) as exc:
        load_yaml(p)
    prob = exc.value.problems[0]
    assert (prob.line, prob.col) == (2, 7)
    assert "not valid UTF-8" in prob.message


def test_utf8_bom_accepted(tmp_path: Path) -> None:
    data, _ = load_yaml(write(tmp_path, "\ufeffa: ü\n".encode()))
    assert data == {"a": "ü"}


def test_huge_integer_refused() -> None:
    p = refused("a: " + "9" * 5000 + "\n")
    assert (p.line, p.col) == (1, 4)


VALID = """\
name: demo
defaults: {timeout: 10m, tags: [a]}
checks:
  - id: one
    kind: demo
    params: {size: 3, mode: fast}
    expect:
      - {metric: fio.bw, unit: GB/s, min: 1.5, labels: {job: a}}
  - &two
    id: two
    kind: demo
    tags: [x, "y"]
"""


def _only_config_errors(text: str) -> None:
    start = time.monotonic()
    try:
        parse_yaml(text, "fuzz.yaml")
    except ConfigError as e:
        assert e.problems and all(p.line >= 1 and p.col >= 1 for p in e.problems)
    assert time.monotonic() - start < 2.0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_random_text_only_raises_config_error(text: str) -> None:
    _only_config_errors(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(VALID)), st.integers(0, 8),
                          st.sampled_from([*"[]{}:,-&*!|>'\"#%@`?\t\n ", "<<: *a", "!!", "\x00"])),
                max_size=6))
def test_mutated_yaml_only_raises_config_error(edits: list[tuple[int, int, str]]) -> None:
    text = VALID
    for pos, cut, insert in edits:
        text = text[:pos] + insert + text[pos + cut:]
    _only_config_errors(text)
