"""`harness list` says where each suite and profile was found; `harness list --tools` what each kind needs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from clihelp import ROOT, harness


def test_list_shows_where_each_suite_was_found_and_what_it_hides(tmp_path: Path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "smoke.yaml").write_text("name: mine\nchecks: []\n")
    (tmp_path / "suites" / "mine.yml").write_text("name: mine\nchecks: []\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "HARNESS_SUITES_PATH": ""}
    r = harness("list", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    smoke = next(ln for ln in lines if ln.split()[:1] == ["smoke"])
    assert smoke.split()[1:3] == ["cwd", str(tmp_path / "suites" / "smoke.yaml")]
    assert f"(hides {ROOT / 'suites' / 'smoke.yaml'})" in smoke
    quick = next(ln for ln in lines if ln.split()[:1] == ["quick"])
    assert quick.split()[1:3] == ["package", str(ROOT / "suites" / "quick.yaml")]
    assert any(ln.split()[:1] == ["mine"] for ln in lines)
    path = lines[lines.index("suite search path (first found wins):") + 1:][:4]
    assert [ln.split()[0] for ln in path] == ["cwd", "user", "system", "package"]
    assert path[1].endswith("(absent)") and str(tmp_path / "cfg" / "harness" / "suites") in path[1]


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_list_tools_reports_the_real_fio_and_hints_for_what_is_missing():
    r = harness("list", "--tools")
    assert r.returncode == 0, r.stderr
    version = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    lines = r.stdout.splitlines()
    at = lines.index("fio: ready")
    assert lines[at + 1].split()[:3] == ["fio", "found", version.removeprefix("fio-")]
    assert lines[-1].endswith("check kinds ready on this machine")
    if shutil.which("all_reduce_perf") is None:
        assert "nccl: NOT READY" in lines
        assert any("install: build github.com/NVIDIA/nccl-tests" in ln for ln in lines)
