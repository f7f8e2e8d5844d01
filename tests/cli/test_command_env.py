"""A command check's env key `A=B` or a NUL in a value is bad input (exit 2, file:line), not an
internal error when the program starts (exit 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelp import harness, write

SUITE = """\
name: env
checks:
  - id: probe
    kind: command
    params:
      argv: [true]
      env: {ENV}
"""


@pytest.mark.parametrize("env", ['{"A=B": "1"}', '{OK: "a\\0b"}'])
def test_a_bad_env_is_exit_2_for_run_and_validate(tmp_path: Path, env: str):
    suite = write(tmp_path / "env.yaml", SUITE.replace("{ENV}", env))
    for args in (("validate", str(suite)),
                 ("run", str(suite), "--profile", "generic", "--output", str(tmp_path / "out"))):
        r = harness(*args, env={"HARNESS_HISTORY": "off"})
        assert r.returncode == 2, r.stdout + r.stderr
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr
        assert f"{suite}:7:" in r.stderr and "env" in r.stderr
    assert not (tmp_path / "out").exists()
