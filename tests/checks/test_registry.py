"""The registry: every listed module really holds the kind of that name; lookups are lazy."""

from __future__ import annotations

import subprocess
import sys

from harness.checks.registry import MODULES, get, kinds


def test_every_entry_names_its_own_kind():
    assert list(kinds()) == list(MODULES)
    for name in MODULES:
        assert get(name).name == name
    assert {k.name for k in kinds().values()} == set(MODULES)


def test_looking_up_one_kind_imports_only_that_kind():
    code = ("import sys; from harness.checks.registry import get; get('fio'); "
            "print(sorted(m for m in sys.modules if m.startswith('harness.checks.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = out.strip().strip("[]").replace("'", "").split(", ")
    assert "harness.checks.fio" in loaded
    assert "harness.checks.gpu_burn" not in loaded and "harness.checks.nccl" not in loaded
