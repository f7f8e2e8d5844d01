"""Helpers for tests that drive the real `harness` command in a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def harness(*args: str, cwd: Path | None = None, timeout: float = 180,
            env: dict[str, str] | None = None, clear: bool = False) -> subprocess.CompletedProcess[str]:
    """`python -m harness ARGS`, its environment ours updated by `env` (only `env` with clear)."""
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd or ROOT, text=True,
                          capture_output=True, timeout=timeout,
                          env=dict(env or {}) if clear else {**os.environ, **(env or {})})


def run_dirs(output: Path) -> list[Path]:
    """The run directories in an output directory (not its hidden .template-cache)."""
    return sorted(p for p in output.iterdir() if p.is_dir() and not p.name.startswith("."))


def results(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "results.json").read_text())


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


QUICK_FIO = """\
name: quick
checks:
  - id: inventory
    kind: inventory
  - id: fio
    kind: fio
    params:
      jobs:
        - {name: randread_4k, rw: randread, bs: 4k, iodepth: 8, size: 16M, runtime: 1}
        - {name: seqwrite_1m, rw: write, bs: 1M, iodepth: 4, size: 16M, runtime: 1}
"""

PASS_PROFILE = """\
name: lenient
hardware:
  memory_min_bytes: 1048576
expectations:
  - {metric: fio.iops, labels: {job: randread_4k, rw: read}, min: 10, unit: IOPS}
  - {metric: fio.bw, labels: {job: seqwrite_1m, rw: write}, min: 0.0001, unit: GB/s}
"""


def dry_run_blocks(text: str) -> dict[str, list[str]]:
    """The dry run's lines per check id ('3. rdma-write  [rdma]  ...' starts a block)."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if m := re.match(r"^\d+\. (\S+)  \[", line):
            current = out.setdefault(m.group(1), [])
        elif current is not None and line.strip():
            current.append(line.strip())
    return out
