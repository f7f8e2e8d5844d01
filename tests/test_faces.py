"""Each package of harness/ says what it offers (issue #27, "Faces"): an `__all__` of real names, its
public submodules (or, for config, the names it imports), and a module outside a package imports of it
only what that face offers. Read with `ast` and `importlib.util.find_spec`: no submodule is imported,
and a package's __init__ imports none eagerly (start-up time: tests/fleet/test_startup.py)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
from importgraph import edges

HARNESS = Path(__file__).resolve().parent.parent / "harness"
PACKAGES = sorted(p.name for p in HARNESS.iterdir() if (p / "__init__.py").is_file())
# config's face is names re-exported from loader/paths/schema (it imports them); its other modules
# (models, kinds, bmc, ...) are used by the layers above by module, so the import rule is not its.
FACE_OF_MODULES = [p for p in PACKAGES if p != "config"]


def _all(package: str) -> list[str]:
    tree = ast.parse((HARNESS / package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list) and all(isinstance(v, str) for v in value)
            return value
    raise AssertionError(f"harness/{package}/__init__.py has no __all__")


def _imported_in_init(package: str) -> set[str]:
    """The names harness/<package>/__init__.py binds by importing them."""
    tree = ast.parse((HARNESS / package / "__init__.py").read_text(encoding="utf-8"))
    return {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}


def test_the_twelve_packages_and_config_are_all_there() -> None:
    assert {"audit", "checks", "cli", "config", "engines", "export", "fleet", "history", "parsers",
            "platform", "report", "run", "series"} <= set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_has_an_all_of_real_names(package: str) -> None:
    names = _all(package)
    assert names and len(names) == len(set(names)) and names == sorted(names), names
    bound = _imported_in_init(package)
    missing = [n for n in names
               if n not in bound and importlib.util.find_spec(f"harness.{package}.{n}") is None]
    assert not missing, f"harness.{package}.__all__ names what is neither a submodule nor imported: {missing}"


@pytest.mark.parametrize("package", FACE_OF_MODULES)
def test_no_package_init_imports_a_submodule_eagerly(package: str) -> None:
    assert not _imported_in_init(package), f"harness/{package}/__init__.py imports: start-up pays for it"


def test_modules_outside_a_package_import_only_its_face() -> None:
    faces = {p: set(_all(p)) for p in FACE_OF_MODULES}
    bad = []
    for e in edges(HARNESS):
        dst, src = e.dst.split("."), e.src.split(".")
        if len(dst) < 3 or dst[1] not in faces or (len(src) > 1 and src[1] == dst[1]):
            continue
        if dst[2] not in faces[dst[1]]:
            bad.append(f"  {e.src}:{e.line} -> {e.dst} (not in harness.{dst[1]}.__all__)")
    assert not bad, "imports of what a package does not offer:\n" + "\n".join(bad)
