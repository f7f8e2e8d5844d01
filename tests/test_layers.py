"""The import graph of harness/ has no circles and every import points down the layer table.

LAYERS is the one place the layering is written, highest first. A module may import modules of its
own row or of any row below it, never above; within a row (and within a package) any import is fine
as long as it closes no circle. Imports inside functions count (they run); `if TYPE_CHECKING:`
imports do not. Why the rows are where they are:

- cli starts everything (and `python -m harness` is its alias).
- run (one node) and fleet (many nodes) drive checks, history and reports; neither uses the other.
  export reads what they leave (run directories, fleet directories, the history store) as tables.
- checks measure; history stores runs and writes their reports, so it sits above report.
- report renders records and knows nothing of how they were made.
- audit and compare judge: they read config's expectations and rules (compare takes
  config's Expectation), and checks, history and run call them. They are pure.
- config knows check kinds only through the KindSpec Protocol (the caller hands it the registry);
  it may use series' pure PSU logic to validate a profile's PSU policy.
- series is pure time-series logic; it may read the platform's BMC readings and parsers' types.
- platform is the edge to the machine; it parses what it reads with parsers.
- engines are `python -m` programs: they import nothing of ours but engines.io.
- parsers are pure text -> metrics.
- vocabulary: the top-level modules. results/catalog/siblings/fsutil build on the base types in
  model, units, numfmt, facts, sections and errors, which import nothing of ours but each other.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from importgraph import Edge, cycles, edges, rank_of, ranks_from, upward

HARNESS = Path(__file__).resolve().parent.parent / "harness"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__", "cli"),
    ("run", "fleet", "export"),
    ("checks", "history"),
    ("report",),
    ("audit", "compare"),
    ("config",),
    ("series",),
    ("platform",),
    ("engines",),
    ("parsers",),
    ("results", "catalog", "siblings", "fsutil"),
    ("model", "units", "numfmt", "facts", "errors", "sections", "__init__"),
)
RANKS = ranks_from(LAYERS)

# Known upward imports that another change is to remove, each with its reason; empty now.
PENDING: frozenset[tuple[str, str]] = frozenset()  # known upward imports awaiting a move (none now)


def _show(found: list[Edge]) -> str:
    return "\n".join(f"  {e.src}:{e.line} -> {e.dst}{' (in a function)' if e.local else ''}" for e in found)


def test_every_package_and_top_level_module_has_a_layer() -> None:
    names = {p.stem if p.is_file() else p.name for p in HARNESS.iterdir()
             if (p.suffix == ".py") or (p / "__init__.py").exists()}
    assert names == set(RANKS)


def test_no_import_circles() -> None:
    assert cycles(edges(HARNESS)) == []


def test_no_upward_imports() -> None:
    found = [e for e in upward(edges(HARNESS), RANKS) if (e.src, e.dst) not in PENDING]
    assert not found, "imports from a lower layer to a higher one:\n" + _show(found)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "harness"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def test_planted_upward_import_is_caught(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "__init__.py": "",
        "model.py": "",
        "parsers/__init__.py": "",
        "parsers/fio.py": "from harness import model\n",
        "cli/__init__.py": "",
        "cli/main.py": "from harness.parsers import fio\n",
        "config/__init__.py": "",
        "config/loader.py": "def load():\n    from harness.cli.main import x\n",
    })
    found = upward(edges(root), RANKS)
    assert [(e.src, e.dst, e.local) for e in found] == [("harness.config.loader", "harness.cli.main", True)]


def test_type_checking_imports_do_not_count(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "__init__.py": "",
        "cli/__init__.py": "",
        "parsers/__init__.py": "",
        "parsers/fio.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                           "    from harness.cli import main\nelse:\n    from harness import model\n"),
        "cli/main.py": "",
        "model.py": "",
    })
    assert [(e.src, e.dst) for e in edges(root)] == [("harness.parsers.fio", "harness.model")]


def test_planted_circle_is_caught(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "__init__.py": "",
        "report/__init__.py": "from harness.report.html import render\n",
        "report/html.py": "from . import junit\n",
        "report/junit.py": "def f():\n    from harness.report import HTML\n",
    })
    assert cycles(edges(root)) == [["harness.report", "harness.report.html", "harness.report.junit"]]


def test_a_module_missing_from_the_table_is_named() -> None:
    with pytest.raises(KeyError, match="newpkg"):
        rank_of("harness.newpkg.thing", RANKS)
