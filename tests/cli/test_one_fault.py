"""Issue #25 item 6: one fault is reported once, under the check that measured it. With GPU 6 at
PCIe x8 of x16 (8 fake H100s, busy), a prolog-like suite used to fail `tmp-space` (a df) with
"gpu.pcie_width{gpu=6}" too, and a burn after gpu-health reported it again."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from clihelp import ROOT, results, run_dirs, write
from pcisysfs import gpu_addresses, lines, write_tree

LAUNCH = Path(__file__).parents[1] / "support" / "nodelaunch.py"
BURN_LOG = Path(__file__).parents[1] / "data" / "gpu-burn" / \
    "gpu_burn_k80_2gpu_doubles_ok_interleaved_child_output.txt"
H100 = {"name": "NVIDIA H100 80GB HBM3"}
PROLOG = """\
name: gate
checks:
  - id: inventory
    kind: inventory
  - id: gpu-health
    kind: gpu_health
    params: {xid_source: none}
  - id: tmp-space
    kind: command
    params:
      argv: [df, -B1, --output=avail, /tmp]
      loads_node: false
      metrics:
        - {name: prolog.tmp_free, unit: B, better: higher, regex: '(?P<value>[0-9]+)\\s*$'}
"""


def node(tmp_path: Path, suite: str, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    root = write_tree(tmp_path / "devices", lines())
    gpus = [H100] * 6 + [{**H100, "pcie": [5, 5, 8, 16]}] + [H100]
    spec = write(tmp_path / "scenario.json", json.dumps(
        {"gpus": gpus, "bus_ids": [a[4:] for a in gpu_addresses()], "pci_root": str(root)}))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(LAUNCH), str(spec), "run", str(write(tmp_path / "s.yaml", suite)),
                        "--profile", "h100-sxm-8x", "--output", str(out), "--history", "off", *args],
                       cwd=ROOT, text=True, capture_output=True, timeout=180, env={**os.environ})
    (run_dir,) = run_dirs(out)
    return r, results(run_dir)


def by_id(rec: dict) -> dict[str, dict]:
    return {c["id"]: c for c in rec["checks"]}


def link_fails(check: dict) -> list[dict]:
    return [e for e in check["evaluations"] if e["outcome"] == "fail" and e["metric"].startswith("gpu.pcie")]


def test_a_df_beside_busy_gpus_is_not_blamed_for_a_gpu_link(tmp_path: Path):
    r, rec = node(tmp_path, PROLOG, "--quiet")
    assert r.returncode == 1, r.stdout + r.stderr
    checks = by_id(rec)
    assert checks["tmp-space"]["status"] == "recorded", checks["tmp-space"]
    assert not link_fails(checks["tmp-space"]) and not link_fails(checks["inventory"])
    (fault,) = link_fails(checks["gpu-health"])
    assert fault["metric"] == "gpu.pcie_width" and fault["labels"]["gpu"] == 6
    line = r.stdout.strip()
    assert line.count("gpu.pcie_width") == 1 and "FAILED tmp-space" not in line, line


def test_a_burn_after_gpu_health_does_not_report_the_same_link_again(tmp_path: Path):
    exe = tmp_path / "gpu_burn"
    exe.write_text(f'#!/bin/sh\nsleep 1.5\ncat "{BURN_LOG}"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    suite = PROLOG + f"""\
  - id: gpu-burn
    kind: gpu_burn
    params: {{binary: "{exe}", duration: 3, telemetry_period: 0.1}}
    settle: {{enabled: false}}
"""
    r, rec = node(tmp_path, suite)
    assert r.returncode == 1, r.stdout + r.stderr
    checks = by_id(rec)
    assert [e["labels"]["gpu"] for e in link_fails(checks["gpu-health"])] == [6]
    burn = checks["gpu-burn"]
    assert not link_fails(burn), link_fails(burn)
    (note,) = burn["details"]["reported_under_other_checks"]
    assert note.startswith("gpu.pcie_width{gpu=6}: PCIe link trained down") and \
        note.endswith("reported under gpu-health")
