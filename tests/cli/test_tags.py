"""`harness run -t/--tags`: select checks by tag (a check's own or the suite's default tags), as
ReFrame and SuperBench do; what it leaves out is recorded and counted like --only (issue #28): an
expected check left out by --tags keeps the run from ACCEPTED."""

from __future__ import annotations

import subprocess
from pathlib import Path

from clihelp import harness, results, run_dirs, write

SUITE = """\
name: tagged
defaults: {tags: [node]}
checks:
  - id: inventory
    kind: inventory
    tags: [inventory]
  - id: app
    kind: command
    tags: [app, fast]
    params:
      argv: [echo, "rate 7.5"]
      metrics:
        - {name: app.rate, unit: GB/s, regex: 'rate (?P<value>[0-9.]+)'}
    expect: [{metric: app.rate, min: 1, unit: GB/s}]
"""
# the hardware block makes inventory a check the profile expects
EXPECTING = "name: vm\nhardware: {memory_min_bytes: 1048576}\n"
NOTHING = "name: none\n"


def _run(tmp_path: Path, profile: str, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    suite = write(tmp_path / "tagged.yaml", SUITE)
    prof = write(tmp_path / "p.yaml", profile)
    out = tmp_path / "out"
    r = harness("run", str(suite), "--profile", str(prof), "--output", str(out), "--history", "off", *args)
    dirs = run_dirs(out) if out.is_dir() else []
    return r, (results(dirs[0]) if dirs else {})


def test_tags_select_and_what_they_leave_out_is_recorded(tmp_path: Path) -> None:
    r, rec = _run(tmp_path, NOTHING, "-t", "app")
    assert r.returncode == 0, r.stdout + r.stderr  # nothing expects inventory here
    assert [c["id"] for c in rec["checks"]] == ["app"]
    assert rec["suite"]["tags_selected"] == ["app"]
    assert [(lo["id"], lo["option"]) for lo in rec["left_out"]] == [("inventory", "--tags")]


def test_an_expected_check_left_out_by_tags_is_untested(tmp_path: Path) -> None:
    r, rec = _run(tmp_path, EXPECTING, "--tags", "fast", "--quiet")
    assert r.returncode == 4, r.stdout + r.stderr
    assert rec["verdict"] == "UNTESTED"
    assert "UNTESTED left out by --tags, though expected: inventory |" in r.stdout, r.stdout
    # the suite's default tag selects every check: nothing is left out, the run is judged
    r, rec = _run(tmp_path / "all", EXPECTING, "-t", "node")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [c["id"] for c in rec["checks"]] == ["inventory", "app"] and rec["left_out"] == []


def test_the_dry_run_names_what_tags_leave_out_and_an_unknown_tag_is_bad_input(tmp_path: Path) -> None:
    r, _ = _run(tmp_path, EXPECTING, "-t", "app,fast", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "inventory left out by --tags" in r.stdout and "the run will be UNTESTED" in r.stdout
    r, rec = _run(tmp_path, EXPECTING, "-t", "ap")
    assert r.returncode == 2 and not rec
    assert "no check of" in r.stderr and "has tag(s) ap (did you mean 'app'?)" in r.stderr
    assert "its tags: app, fast, inventory, node" in r.stderr
