"""The report and series pick what to show by what a check holds (its sections, its metrics), never
by its kind's name (issue #27), held by reading the source: nothing in harness/report/ or
harness/series/ compares a `kind` to a string or keeps a kind's name in a constant (a series
judge's findings are signed by the kind that calls it), and no report template compares `c.kind`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness.checks.registry import MODULES

HARNESS = Path(__file__).resolve().parents[2] / "harness"
SOURCES = sorted([*(HARNESS / "report").glob("*.py"), *(HARNESS / "series").glob("*.py")])
TEMPLATES = sorted((HARNESS / "report" / "templates").glob("*.j2"))
KINDS = set(MODULES) | {"drift"}  # every registered kind, and the drift check history adds


def _is_kind(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "kind") or (
        isinstance(node, ast.Name) and node.id == "kind")


def _offences(path: Path) -> list[str]:
    """Module constants holding a kind's name, and comparisons of a `kind` with a string (literal or
    named) or of such a constant with anything."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    named = {t.id for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
             and n.value.value in KINDS for t in n.targets if isinstance(t, ast.Name)}
    out: list[tuple[int, str]] = [(n.lineno, f"{path.name}:{n.lineno} {ast.unparse(n)}") for n in tree.body
                                  if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                                  and n.value.value in KINDS]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        strings = [s for s in sides if (isinstance(s, ast.Constant) and isinstance(s.value, str))
                   or (isinstance(s, ast.Name) and s.id in named)
                   or (isinstance(s, (ast.Tuple, ast.List, ast.Set))
                       and any(isinstance(e, ast.Constant) and e.value in KINDS for e in s.elts))]
        if (any(_is_kind(s) for s in sides) and strings) or any(isinstance(s, ast.Name) and s.id in named
                                                               for s in sides):
            out.append((node.lineno, f"{path.name}:{node.lineno} {ast.unparse(node)}"))
    return [text for _, text in sorted(out)]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_module_compares_a_kind_name(path: Path) -> None:
    assert _offences(path) == []


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_no_template_compares_a_kind(path: Path) -> None:
    assert not re.search(r"\bkind\s*(==|!=|\bin\b)", path.read_text(encoding="utf-8"))


def test_the_scan_sees_what_it_forbids(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('FIO = "fio"\nif c.kind == "observe":\n    pass\nx = [c for c in cs if c.kind == FIO]\n'
                   'y = kind != "nccl"\nz = c.kind in ("fio", "nvme_health")\nok = c.id == "fio"\n')
    assert _offences(bad) == ["bad.py:1 FIO = 'fio'", "bad.py:2 c.kind == 'observe'",
                              "bad.py:4 c.kind == FIO", "bad.py:5 kind != 'nccl'",
                              "bad.py:6 c.kind in ('fio', 'nvme_health')"]
