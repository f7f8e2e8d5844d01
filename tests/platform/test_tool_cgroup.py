"""A tool's own cgroup (cgroup v2): a double-forked, setsid process that cleared its environment
(no run token, no process group of the tool's) is still ended with the tool. Where cgroup v2 cannot
be written, tools run as before and the token is the fallback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from clihelp import ROOT
from prochelp import assert_ends

from harness.platform import proc, toolcg

ESCAPE = """\
name: escape
checks:
  - id: escape
    kind: command
    params:
      argv: [sh, -c, "(setsid env -i sh -c 'sleep 300 & echo $! > {pidfile}' &); sleep 0.5; echo done"]
"""


def _usable() -> bool:
    cg = toolcg.make("probe0000")
    if cg is None:
        return False
    toolcg.remove(cg)
    return True


@pytest.mark.skipif(not _usable(), reason="no writable cgroup v2 here: the run token is the fallback")
def test_a_double_forked_setsid_child_with_no_environment_is_ended_with_its_tool(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    suite = tmp_path / "escape.yaml"
    suite.write_text(ESCAPE.format(pidfile=pidfile))
    base = toolcg.v2_root()
    assert base is not None
    before = set(base.glob("harness-tool-*"))  # other runs' (a test killed mid-run leaves its own)
    r = subprocess.run([sys.executable, "-m", "harness", "run", str(suite), "--profile", "generic",
                        "--output", str(tmp_path / "out"), "--history", "off"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 4, r.stdout + r.stderr  # recorded: judged nothing
    pid = int(pidfile.read_text())
    assert_ends(pid, 5, f"pid {pid} (no token, a session of its own) outlived its tool")
    # each tool's cgroup removed: none made since is left empty (a live one is another run's)
    left = [cg for cg in set(base.glob("harness-tool-*")) - before if _empty(cg)]
    assert left == []


def _empty(cg: Path) -> bool:
    """Whether a cgroup directory still stands with no process in it (gone meanwhile: no)."""
    try:
        return not (cg / "cgroup.procs").read_text().strip()
    except OSError:
        return False


def test_the_cgroup_v2_directory_is_found_pure_or_hybrid(tmp_path: Path) -> None:
    (tmp_path / "unified" / "a" / "b").mkdir(parents=True)
    hybrid = f"tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup2 {tmp_path / 'unified'} cgroup2 rw 0 0\n"
    assert toolcg.v2_root(hybrid, "4:memory:/x\n0::/a/b\n") == tmp_path / "unified" / "a" / "b"
    assert toolcg.v2_root(hybrid, "4:memory:/x\n") is None  # no v2 membership line
    assert toolcg.v2_root("tmpfs /sys/fs/cgroup tmpfs rw 0 0\n", "0::/\n") is None


def test_without_a_cgroup_tools_run_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolcg, "v2_root", lambda *a: None)
    res = proc.run(["sh", "-c", "echo hi"], tmp_path / "o", tmp_path / "e", 10)
    assert res.rc == 0 and (tmp_path / "o").read_text() == "hi\n"


@pytest.mark.skipif(not _usable(), reason="no writable cgroup v2 here")
def test_empty_tool_cgroups_a_killed_harness_left_are_swept() -> None:
    base = toolcg.v2_root()
    assert base is not None
    old, young = base / f"{toolcg.PREFIX}deadbeef00000000", base / f"{toolcg.PREFIX}deadbeef00000001"
    old.mkdir()
    young.mkdir()
    try:
        toolcg.sweep(base, now=young.stat().st_ctime + toolcg.STALE_S / 2)
        assert old.exists() and young.exists()  # young ones may be another run's
        toolcg.sweep(base, now=old.stat().st_ctime + toolcg.STALE_S + 1)
        assert not old.exists() and not young.exists()
    finally:
        for d in (old, young):
            toolcg.remove(d)
