"""A fleet job starts Python isolated, outside the fleet directory: nothing planted where the job
starts (slurmd's --chdir, the node's directory) is imported or read as a profile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from trusthelp import TINY

from harness.fleet import dispatch


def test_the_job_imports_nothing_and_reads_no_profile_from_where_it_starts(tmp_path: Path) -> None:
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY.format(python=sys.executable))
    node_dir = tmp_path / "fleet" / "nodes" / "n1"
    (node_dir / "yaml").mkdir(parents=True)
    proof = tmp_path / "imported"
    (node_dir / "yaml" / "__init__.py").write_text(f"open({str(proof)!r}, 'w')\n")  # shadows PyYAML
    (node_dir / "harness").mkdir()
    (node_dir / "harness" / "__init__.py").write_text(f"open({str(proof)!r}, 'w')\n")
    (node_dir / "profiles").mkdir()
    (node_dir / "profiles" / "generic.yaml").write_text(
        "name: generic\nexpectations:\n  - {metric: app.v, min: 5, unit: count, check: ok}\n")
    script = node_dir / "job.sh"
    script.write_text(dispatch.job_script("n1", node_dir, dispatch.JobOptions(str(suite))))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "PYTHON"))}
    env.update(SLURMD_NODENAME="n1", XDG_CONFIG_HOME=str(tmp_path / "config"),
               PYTHONPATH=str(node_dir))  # a variable of the caller's: -I ignores it too
    r = subprocess.run(["bash", str(script)], cwd=node_dir, env=env, capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not proof.exists()
    (run_dir,) = [p for p in node_dir.iterdir() if (p / "results.json").is_file()]
    doc = json.loads((run_dir / "results.json").read_text())
    assert doc["verdict"] == "ACCEPTED" and doc["profile"]["from"] == "shipped"
    assert json.loads((node_dir / "job-exit.json").read_text())["rc"] == 0
