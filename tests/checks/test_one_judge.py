"""One place judges (issue #15), held by reading the source: no check kind judges itself, and an
Evaluation is built in a few named places only, always by keyword."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "harness"
CHECKS = sorted((HARNESS / "checks").rglob("*.py"))  # the kinds and their packages (checks/fio/)
# The judge (compare, and siblings which it calls) and the record's own from_dict; history's drift
# is judged by compare.judge too.
BUILDERS = {"compare/judge.py", "siblings.py", "model.py"}
JUDGES = {"judge", "evaluate"}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _offences(path: Path) -> list[str]:
    """Imports of ownrules/compare judging functions, and calls of x.judge/x.evaluate where x is the
    compare, ownrules or siblings module (by any name it was imported as)."""
    out: list[str] = []
    aliases: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module in ("harness.compare", "harness.compare.judge",
                                                                 "harness.ownrules", "harness.siblings"):
            out += [f"{path.name}:{node.lineno} imports {node.module}.{a.name}" for a in node.names
                    if a.name in JUDGES]
        if isinstance(node, ast.ImportFrom) and node.module == "harness":
            aliases |= {a.asname or a.name for a in node.names
                        if a.name in ("compare", "judge", "ownrules", "siblings")}
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names
                        if a.name in ("harness.compare", "harness.compare.judge", "harness.ownrules",
                                      "harness.siblings")}
    for node in ast.walk(_tree(path)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in JUDGES
                and isinstance(node.func.value, (ast.Name, ast.Attribute))
                and ast.unparse(node.func.value) in aliases | {"harness.compare", "harness.compare.judge",
                                                               "harness.ownrules"}):
            out.append(f"{path.name}:{node.lineno} calls {ast.unparse(node.func)}")
    return out


@pytest.mark.parametrize("path", CHECKS, ids=lambda p: str(p.relative_to(HARNESS / "checks")))
def test_no_check_kind_judges_itself(path: Path):
    assert _offences(path) == []


def test_the_scan_sees_what_it_forbids(tmp_path: Path):
    bad = tmp_path / "bad.py"
    bad.write_text("from harness import compare, ownrules as own\nfrom harness.compare import evaluate\n"
                   "own.judge([], [])\ncompare.evaluate([], [])\nimport harness.compare\n"
                   "harness.compare.judge([], [])\nfrom harness.compare.judge import judge\n")
    assert _offences(bad) == ["bad.py:2 imports harness.compare.evaluate",
                              "bad.py:7 imports harness.compare.judge.judge", "bad.py:3 calls own.judge",
                              "bad.py:4 calls compare.evaluate", "bad.py:6 calls harness.compare.judge"]


def _evaluation_calls() -> list[tuple[str, ast.Call]]:
    out = []
    for path in sorted(HARNESS.rglob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) and (
                    (isinstance(node.func, ast.Name) and node.func.id == "Evaluation")
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == "Evaluation")):
                out.append((path.relative_to(HARNESS).as_posix(), node))
    return out


def test_evaluations_are_built_only_by_the_judge_and_only_by_keyword():
    calls = _evaluation_calls()
    assert calls, "the scan found no Evaluation(...) at all: it is looking in the wrong place"
    assert {where for where, _ in calls} <= BUILDERS
    assert [(where, node.lineno) for where, node in calls if node.args] == []


def test_no_check_or_series_module_imports_evaluation():
    """Kinds and the series they use state findings; only the judge makes evaluations of them."""
    for path in [*CHECKS, *sorted((HARNESS / "series").glob("*.py"))]:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module == "harness.model":
                assert "Evaluation" not in {a.name for a in node.names}, path.name
