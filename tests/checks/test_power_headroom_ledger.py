"""power_headroom's fio directories are scratch directories of the run's ledger: a SIGKILLed run's
directory on the data drive (device and inode recorded in RUN_DIR/.running) is removed by the next
run, and only that directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from clihelp import ROOT, write
from faulthelp import wait_for

LAUNCH = Path(__file__).parents[1] / "support" / "powerlaunch.py"
PARAMS = ("duration: 60, idle: 0.2, cooldown: 0, period: 0.25, backend: numpy, dtype: fp32, size: 32, "
          "cpu_workers: 1, vm_workers: 0, telemetry_period: 0.25, fio_size: 4m, bmc: {{kind: none}}, "
          "fio_dirs: [{data}]")


def _harness(tmp_path: Path, data: Path, lock: Path, *args: str) -> subprocess.Popen[str]:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"gpus": [], "bmc": {"node_w": 2000.0}}))
    suite = write(tmp_path / "power.yaml", "name: p\nchecks:\n  - id: power\n    kind: power_headroom\n"
                  f"    params: {{{PARAMS.format(data=data)}}}\n")
    return subprocess.Popen([sys.executable, str(LAUNCH), str(scenario), "run", str(suite), "--profile",
                             "generic", "--output", str(tmp_path / "out"), *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "HARNESS_HISTORY": "off", "HARNESS_LOCK_FILE": str(lock)})


def test_a_killed_run_s_fio_directory_is_recorded_and_reaped_by_the_next_run(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    keep = data / "harness-power-not-ours"  # the same prefix, not recorded: left alone
    keep.mkdir()
    lock = tmp_path / "run.lock"
    p = _harness(tmp_path, data, lock)
    try:
        wait_for(lambda: len(list(data.glob("harness-power-*"))) == 2, 60, "fio's directory")
        (made,) = set(data.glob("harness-power-*")) - {keep}
        (run_dir,) = [d for d in (tmp_path / "out").iterdir() if not d.name.startswith(".")]
        st = os.lstat(made)
        entry = {"path": str(made), "dev": st.st_dev, "ino": st.st_ino}

        def recorded() -> bool:  # the directory is made first, then recorded: wait for the ledger
            try:
                return entry in json.loads((run_dir / ".running").read_text()).get("scratch", [])
            except (OSError, ValueError):
                return False

        wait_for(recorded, 30, "the ledger's record of fio's directory")
        p.send_signal(signal.SIGKILL)  # the harness only: its tools live on, its finally never runs
        p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert made.exists()  # SIGKILL: nothing cleaned up
    nxt = write(tmp_path / "next.yaml",  # a loading check: it takes the lock exclusively and reaps
                'name: next\nchecks:\n  - {id: t, kind: command, params: {argv: ["true"]}}\n')
    again = subprocess.run([sys.executable, "-m", "harness", "run", str(nxt), "--profile", "generic",
                            "--output", str(tmp_path / "out2")], cwd=ROOT, text=True,
                           capture_output=True, timeout=120,
                           env={**os.environ, "HARNESS_HISTORY": "off", "HARNESS_LOCK_FILE": str(lock)})
    assert f"removed leftover scratch directory {made}" in again.stderr, again.stdout + again.stderr
    assert not made.exists() and keep.is_dir()
