"""Where the code had two of a thing, it has one (issue #27), held by reading the source: one
`group_alive`, one install-hint table, `expectation_text` in report/fmt beside the other
formatters, history/baseline handed its kinds by its caller, no dead `units.to_prom_base`."""

from __future__ import annotations

import ast
from pathlib import Path

from harness import units
from harness.checks import needs
from harness.platform import proc, workload
from harness.report import fmt, junit

HARNESS = Path(__file__).resolve().parent.parent / "harness"


def _defined(name: str) -> list[str]:
    """Every module of harness/ that defines a function `name`."""
    out = []
    for path in sorted(HARNESS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.FunctionDef) and n.name == name for n in ast.walk(tree)):
            out.append(str(path.relative_to(HARNESS)))
    return out


def test_one_group_alive() -> None:
    assert _defined("group_alive") == ["platform/proc.py"] and _defined("_group_alive") == []
    assert workload.group_alive is proc.group_alive


def test_one_install_hint_table() -> None:
    assert not hasattr(needs, "HINTS")
    assert needs.tool("journalctl").hint == proc.INSTALL_HINTS["journalctl"] == "apt-get install systemd"


def test_expectation_text_lives_with_the_formatters() -> None:
    assert _defined("expectation_text") == ["report/fmt.py"]
    assert junit.expectation_text is fmt.expectation_text


def test_baseline_takes_its_kinds_from_the_caller() -> None:
    tree = ast.parse((HARNESS / "history" / "baseline.py").read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith(
        "harness.checks")]


def test_no_dead_prometheus_conversion() -> None:
    assert not hasattr(units, "to_prom_base")


def test_harness_parse_lives_in_cli_and_the_session_imports_at_the_top() -> None:
    assert _defined("parse_file") == ["cli/parse.py"]
    text = (HARNESS / "run" / "session.py").read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    local = [n.lineno for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
             for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))]
    # only what one option alone needs waits (--prom-textfile's prometheus_client), said so
    assert [n for n in local if "# start-up:" not in lines[n - 1]] == []
    assert len(local) <= 1, local


def test_numbers_have_one_door() -> None:
    """Every number function is imported from harness.numfmt; report.fmt words records only."""
    from harness import numfmt

    numbers = {n for n in dir(numfmt) if n.startswith(("fmt_", "digits_")) or n in ("plural", "scaled")}
    assert not numbers & set(fmt.__all__)
    wrong = []
    for path in sorted(HARNESS.rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.ImportFrom) and n.module == "harness.report.fmt":
                wrong += [f"{path.relative_to(HARNESS)}: {a.name}" for a in n.names if a.name in numbers]
    assert wrong == []
