"""A kind declares the sections of its details it writes (CheckKind.sections), each one typed in
harness/sections.py, and its kind-specific --dry-run lines are a hook on the kind (config_plan),
not a branch on its name in run/plan."""

from __future__ import annotations

import ast
from pathlib import Path

from harness import sections
from harness.checks.registry import kinds
from harness.config.factrule import FactRule

# Written for any kind: by the runner (telemetry, settle, contention) and by history's drift check (notes).
BESIDE_KINDS = {"telemetry", "settle", "contention", "notes"}
PLAN = Path(__file__).resolve().parents[2] / "harness" / "run" / "plan.py"


def test_every_declared_section_is_typed_and_every_section_has_a_writer() -> None:
    declared = {name: k.sections for name, k in kinds().items()}
    for name, secs in declared.items():
        assert secs <= sections.SECTIONS, (name, secs - sections.SECTIONS)
    written = set().union(*declared.values()) | BESIDE_KINDS
    assert written == sections.SECTIONS
    assert declared["power_headroom"] == {"power", "psus", "notes"}
    assert declared["observe"] == {"primary", "findings", "series"}


def test_the_config_audit_plan_lines_come_from_the_kind() -> None:
    kind = kinds()["config_audit"]
    config_plan = kind.hooks.config_plan
    assert config_plan is not None
    params = kind.params.model_validate({"rules": [{"fact": "gpu.persistence_mode", "equals": True}]})
    lines = config_plan(params, "p", [FactRule.model_validate({"fact": "host.kernel", "equals": "6.1"})])
    assert [ln.split(":")[0].strip() for ln in lines] == ["config host.kernel", "config gpu.persistence_mode"]
    assert lines[0].endswith("[fail; p]") and lines[1].endswith("[fail; suite]")
    assert config_plan(kind.params(), "p", []) == [
        "   (no config rules in profile p: facts are recorded only)"]


def test_run_plan_names_no_kind() -> None:
    tree = ast.parse(PLAN.read_text(encoding="utf-8"))
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert "NAME" not in names
    # no kind's module: what every loading check shares (the after-load health judge) is not a kind
    kind_modules = {k.run.__module__.split(".")[2] for k in kinds().values()} | set(kinds())
    imported = {a.name for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module == "harness.checks" for a in n.names}
    assert not imported & kind_modules, imported & kind_modules
