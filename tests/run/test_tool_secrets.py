"""No tool inherits the harness's secrets: REDFISH_PASSWORD, IPMI_PASSWORD, a profile's own
password variable or anything named like a secret is left out of every tool's environment (and so
out of every srun rank's, which inherits srun's); the run token still reaches the tool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from clihelp import ROOT, run_dirs

SUITE = """\
name: env
checks:
  - id: env
    kind: command
    params:
      argv: [{python}, -c, "import os, json; print(json.dumps(sorted(os.environ)))"]
"""

SECRETS = {"REDFISH_PASSWORD": "hunter2", "IPMI_PASSWORD": "hunter3", "BMC_PW": "hunter4",
           "MY_SITE_SECRET": "hunter5", "VAULT_TOKEN": "hunter6", "NCCL_DEBUG": "WARN"}


def test_tools_never_inherit_secrets(tmp_path: Path) -> None:
    suite = tmp_path / "env.yaml"
    suite.write_text(SUITE.format(python=sys.executable))
    out = tmp_path / "out"
    env = {**os.environ, **SECRETS}
    r = subprocess.run([sys.executable, "-m", "harness", "run", str(suite), "--profile", "generic",
                        "--output", str(out), "--history", "off"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 4, r.stdout + r.stderr  # recorded, judged nothing
    (run_dir,) = run_dirs(out)
    saved = "".join(p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())
    seen = next(json.loads(line) for line in saved.splitlines() if line.startswith('["'))
    assert not {"REDFISH_PASSWORD", "IPMI_PASSWORD", "BMC_PW", "MY_SITE_SECRET", "VAULT_TOKEN"} & set(seen)
    assert "NCCL_DEBUG" in seen and "HARNESS_RUN_TOKEN" in seen
    assert not any(f"hunter{i}" in saved for i in range(2, 7))
