"""What keeps the harness's own time around a tool short: no collector passes during start-up
(its objects then frozen out of later passes), and no cycle sweep at exit."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.run import session as app

ROOT = Path(__file__).resolve().parents[2]


def test_a_refused_start_leaves_the_collector_on(tmp_path: Path):
    suite = tmp_path / "bad.yaml"
    suite.write_text("name: bad\nchecks: []\n")
    with pytest.raises(ConfigError):
        app.run(suite=str(suite), profile="generic", output=tmp_path / "reports")
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_run_unfreezes_what_start_up_froze(tmp_path: Path):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: one\nchecks:\n  - {id: ok, kind: command, params: {argv: [/bin/true]},\n"
                     "     expect: [{metric: command.duration, max: 3600, unit: s}]}\n")
    code = app.run(suite=str(suite), profile="generic", output=tmp_path / "reports", argv=("harness",),
                   inventory_probe=lambda: {"host": {"hostname": "node"}})
    assert code == 0 and gc.isenabled() and gc.get_freeze_count() == 0


def test_the_cli_leaves_live_objects_to_the_os_at_exit():
    # an atexit handler registered before main() runs after main's (last in, first out)
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
            "sys.argv = ['harness', '--version']\n"
            "from harness.cli.main import main\n"
            "main()\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "frozen True"
