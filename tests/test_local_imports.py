"""Every import inside a function in harness/ says why it is there: `# start-up: ...`.

A function-local import is for start-up speed only (`harness --help` loads no check, config or
report module; optional backends load only when chosen), never to hide an import circle
(tests/test_layers.py finds those). The reason sits on the import's line, on the line above, or on
any line of a wrapped import, and covers the imports right after it in the same block (one comment
for a group); an import under `if TYPE_CHECKING:` never runs and needs none.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

HARNESS = Path(__file__).resolve().parent.parent / "harness"
MARK = "# start-up:"


def _inside_functions(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(c) for c in ast.walk(n) if c is not n)
    return inside


def _type_checking(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            for stmt in n.body:
                skip.update(id(c) for c in ast.walk(stmt))
    return skip


def unexplained(root: Path) -> list[str]:
    """`path:line: import ...` for each function-local import under root without a start-up reason.

    The reason covers an import on its line or the line above (or any line of a wrapped import),
    and the imports that directly follow it in the same block (one comment for a group).
    """
    found: list[tuple[str, int, str]] = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines, tree = text.splitlines(), ast.parse(text, filename=str(path))
        inside, skip = _inside_functions(tree), _type_checking(tree)
        rel = str(path.relative_to(root.parent))
        for node in ast.walk(tree):
            for block in (getattr(node, f, None) for f in ("body", "orelse", "finalbody")):
                if not isinstance(block, list):
                    continue
                covered = False  # the previous statement was an import with a reason
                for stmt in block:
                    if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                        covered = False
                        continue
                    span = lines[max(stmt.lineno - 2, 0): stmt.end_lineno or stmt.lineno]
                    covered = covered or any(MARK in line for line in span)
                    if id(stmt) in inside and id(stmt) not in skip and not covered:
                        found.append((rel, stmt.lineno, lines[stmt.lineno - 1].strip()))
    return [f"{rel}:{line}: {text}" for rel, line, text in sorted(found)]


def test_every_function_local_import_says_why() -> None:
    found = unexplained(HARNESS)
    assert not found, ("function-local imports without a `# start-up: why` comment (move each to the "
                       "top of its module, or say what start-up it keeps fast):\n  " + "\n  ".join(found))


def _tree(tmp_path: Path, text: str) -> Path:
    root = tmp_path / "harness"
    root.mkdir()
    (root / "mod.py").write_text(text, encoding="utf-8")
    return root


def test_a_planted_local_import_without_a_reason_is_named(tmp_path: Path) -> None:
    root = _tree(tmp_path, "import os\n\n\ndef f():\n    import json\n    return json\n\n\nclass C:\n"
                           "    def m(self):\n        from harness import model  # hides a circle\n")
    assert unexplained(root) == ["harness/mod.py:5: import json",
                                 "harness/mod.py:11: from harness import model  # hides a circle"]


def test_a_reason_on_the_line_above_or_inside_a_wrapped_import_counts(tmp_path: Path) -> None:
    root = _tree(tmp_path, (
        "def f():\n"
        "    from rich.live import (  # start-up: rich loads only for a live display\n"
        "        Live,\n"
        "    )\n"
        "    x = 1\n"
        "    # start-up: rich loads only for a live display\n"
        "    from rich.console import Console\n"
        "    x = 2\n"
        "    from typing import TYPE_CHECKING\n"
        "    if TYPE_CHECKING:\n"
        "        from harness import model\n"
        "    return Console, Live\n"))
    assert unexplained(root) == ["harness/mod.py:9: from typing import TYPE_CHECKING"]


def test_one_reason_covers_the_group_of_imports_it_heads(tmp_path: Path) -> None:
    root = _tree(tmp_path, (
        "def f():\n"
        "    # start-up: config and pydantic load only for this command\n"
        "    from pydantic import TypeAdapter\n"
        "\n"
        "    from harness.config import models\n"
        "    from harness.errors import UsageError\n"
        "    y = 1\n"
        "    from harness import results\n"
        "    try:\n"
        "        import pandas  # start-up: optional\n"
        "    except ImportError:\n"
        "        import json\n"
        "    return TypeAdapter, models, UsageError, y, results, pandas, json\n"))
    assert unexplained(root) == ["harness/mod.py:8: from harness import results",
                                 "harness/mod.py:12: import json"]


def test_harness_help_starts_fast() -> None:
    """`harness --help` imports no check, config, report or run module (what makes it slow)."""
    env = {**os.environ, "PYTHONPATH": str(HARNESS.parent)}
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness", "--help"], env=env,
                         capture_output=True, text=True, timeout=60, check=True)
    loaded = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    heavy = sorted(m for m in loaded if m.split(".")[:2] in (["harness", "checks"], ["harness", "config"],
                                                           ["harness", "report"], ["harness", "run"])
                   or m in ("pydantic", "jinja2", "rich", "yaml"))
    assert heavy == [], f"harness --help loads {heavy}"
    # how long it takes is measured in benchmarks/, never asserted here: the machine may be shared
