"""Issue #30: a command imports what it needs. `harness fleet report` loads no suite machinery
(harness.config, YAML, the check kinds: only `fleet run` sends a suite), and `harness run` never
loads numpy (only the fleet statistics use it). Read with `python -X importtime`, in a child."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from clihelp import ROOT
from fleetdirs import make_fleet

SUITE = 'name: one\nchecks:\n  - id: app\n    kind: command\n    params:\n      argv: ["true"]\n'


def _imported(*argv: str, cwd: Path) -> set[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness", *argv], capture_output=True,
                       text=True, cwd=cwd, env=env, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    return {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_fleet_report_loads_no_suite_machinery(tmp_path: Path):
    make_fleet(tmp_path, {})
    mods = _imported("fleet", "report", str(tmp_path), cwd=tmp_path)
    assert "harness.fleet.commands" in mods and "numpy" in mods  # the statistics need numpy
    assert not {"harness.config", "harness.config.loader", "yaml", "harness.checks.registry"} & mods


def test_harness_run_loads_no_numpy(tmp_path: Path):
    (tmp_path / "one.yaml").write_text(SUITE)
    mods = _imported("run", "one.yaml", "--output", str(tmp_path / "out"), "--history", "off", cwd=tmp_path)
    assert "harness.run.session" in mods and "harness.config" in mods
    assert "numpy" not in mods and "harness.fleet.stats" not in mods


def test_a_small_fleet_report_loads_no_process_pool_nor_exporter(tmp_path: Path):
    """A fleet below the pool's size is read in-process, and nothing is exported unless asked."""
    make_fleet(tmp_path, {})
    mods = _imported("fleet", "report", str(tmp_path), cwd=tmp_path)
    assert "harness.fleet.pool" in mods
    assert not {"multiprocessing", "concurrent.futures.process", "harness.report.prometheus",
                "harness.platform.pushgateway"} & mods
