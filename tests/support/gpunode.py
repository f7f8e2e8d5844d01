"""A node faked only at NVML and the PCI bus root, run through the real CLI (tests/support/nodelaunch.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from clihelp import ROOT, results, run_dirs, write

LAUNCH = Path(__file__).parent / "nodelaunch.py"
H100 = "NVIDIA H100 80GB HBM3"
SUITE = """\
name: gpu-node
checks:
  - id: inventory
    kind: inventory
  - id: gpu-health
    kind: gpu_health
    params: {xid_source: none}
"""


NODE_MEMORY = 2_150_000_000_000  # MemTotal of a 2 TB HGX H100 node: the profile's host memory floor holds


def node(tmp_path: Path, *args: str, scenario: dict[str, Any], path_dir: Path | None = None,
         suite: str = SUITE) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    spec = write(tmp_path / "scenario.json", json.dumps({"memory_bytes": NODE_MEMORY, **scenario}))
    out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"  # one per run: each record its own
    env = {**os.environ}
    if path_dir is not None:
        env["PATH"] = f"{path_dir}:{env['PATH']}"
    r = subprocess.run([sys.executable, str(LAUNCH), str(spec), "run", str(write(tmp_path / "s.yaml", suite)),
                        "--output", str(out), *args], cwd=ROOT, text=True, capture_output=True,
                       timeout=180, env=env)
    dirs = run_dirs(out) if out.is_dir() else []
    return r, (results(dirs[0]) if dirs else None)


def check(rec: dict[str, Any], cid: str) -> dict[str, Any]:
    return next(c for c in rec["checks"] if c["id"] == cid)
