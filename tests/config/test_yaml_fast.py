"""The libyaml-backed loader reads every document exactly as the pure-Python one does."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import yamlload
from harness.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(ROOT.glob("profiles/*.yaml")) + sorted(ROOT.glob("suites/*.yaml"))

pytestmark = pytest.mark.skipif(yamlload.CParser is None, reason="PyYAML built without libyaml")

TRICKY = [
    "a: [1e3, 0o17, 0x10, 1.5, 'no', true, False, 5, '010', ~, \"1e3\", -.5, 1.]",
    "base: &b {x: 1, y: [2, 3]}\nc:\n  <<: *b\n  y: 4\n",
    "t: 2024-01-01\ns: |\n  two\n  lines\nf: >\n  folded\n  text\n",
    "- a\n- - b\n  - {c: d}\n-\n",
    "k: 'quoted'\n\"d\": plain text here\n",
]


def both(text: str) -> tuple[tuple, tuple]:
    fast = yamlload._parse(text, "f.yaml", yamlload._FastLoader)
    pure = yamlload._parse(text, "f.yaml", yamlload._Loader)
    return fast, pure


def same(text: str) -> None:
    (fd, fl), (pd, pl) = both(text)
    assert fd == pd
    assert [type(v) for v in _leaves(fd)] == [type(v) for v in _leaves(pd)]
    assert fl._values == pl._values and fl._keys == pl._keys


def _leaves(data: object) -> list[object]:
    if isinstance(data, dict):
        return [x for v in data.values() for x in _leaves(v)]
    if isinstance(data, list):
        return [x for v in data for x in _leaves(v)]
    return [data]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_files_load_the_same(path: Path) -> None:
    same(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_scalars_and_merges_load_the_same(text: str) -> None:
    same(text)


@pytest.mark.parametrize("text", ["a: b: c", "a:\n\t- b", "a: [1, 2", "a: 1\n---\nb: 2", "a: \x07"])
def test_a_bad_document_is_reported_by_the_pure_loader(text: str) -> None:
    with pytest.raises(ConfigError) as fast:
        yamlload.parse_yaml(text, "f.yaml")
    with pytest.raises(ConfigError) as pure:
        yamlload._parse(text, "f.yaml", yamlload._Loader)
    assert fast.value.problems == pure.value.problems
