"""Issue #25 item 6 for the bandwidth checks: GPU 6's PCIe link at x8 of x16 while nvbandwidth
and NCCL measure (8 fake H100s, busy; stand-ins printing real 8 x H100 captures) fails the
bandwidth check that measured it, naming the GPU, and is reported once: under gpu-health when that
judged it first, else under the first bandwidth check, never again under NCCL. Before, only
gpu-health and burns judged the link, so a suite of bandwidth checks passed a node with a link
trained down."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from clihelp import ROOT, results, run_dirs, write
from pcisysfs import gpu_addresses, lines, write_tree

LAUNCH = ROOT / "tests" / "support" / "nodelaunch.py"
DATA = ROOT / "tests" / "data"
D2H = DATA / "nvbandwidth" / "nvbandwidth_v0.10.0_8x_h100_device_to_host_memcpy_ce.txt"
NCCL = DATA / "nccl-tests" / "all_reduce_h100_2node_16rank_oci.txt"
H100 = {"name": "NVIDIA H100 80GB HBM3"}  # busy: the fake's default utilisation is 100%
HEALTH = """\
  - id: gpu-health
    kind: gpu_health
    params: {xid_source: none}
"""
SUITE = """\
name: links
checks:
{health}  - id: gpu-bandwidth
    kind: gpu_bandwidth
    settle: {{enabled: false}}
    params: {{tests: [device_to_host_memcpy_ce], sibling_tolerance: null}}
  - id: nccl
    kind: nccl
    settle: {{enabled: false}}
    params: {{minbytes: 1G, maxbytes: 16G}}
"""


def node(tmp_path: Path, health: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    bins = tmp_path / "bin"
    bins.mkdir()
    for name, capture in (("nvbandwidth", D2H), ("all_reduce_perf", NCCL)):
        exe = bins / name
        exe.write_text(f'#!/bin/sh\nsleep 0.5\ncat "{capture}"\n')  # a few telemetry samples meanwhile
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    gpus = [H100] * 6 + [{**H100, "pcie": [5, 5, 8, 16]}] + [H100]
    spec = write(tmp_path / "scenario.json", json.dumps(
        {"gpus": gpus, "bus_ids": [a[4:] for a in gpu_addresses()],
         "pci_root": str(write_tree(tmp_path / "devices", lines()))}))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(LAUNCH), str(spec), "run",
                        str(write(tmp_path / "s.yaml", SUITE.format(health=health))),
                        "--profile", "h100-sxm-8x", "--output", str(out), "--history", "off", "--quiet"],
                       cwd=ROOT, text=True, capture_output=True, timeout=180,
                       env={**os.environ, "PATH": f"{bins}{os.pathsep}{os.environ['PATH']}"})
    (run_dir,) = run_dirs(out)
    return r, results(run_dir)


def link_fails(check: dict) -> list[dict]:
    return [e for e in check["evaluations"] if e["outcome"] == "fail" and e["metric"].startswith("gpu.pcie")]


def test_a_link_trained_down_fails_the_bandwidth_check_that_measured_it(tmp_path: Path):
    r, rec = node(tmp_path, health="")
    checks = {c["id"]: c for c in rec["checks"]}
    (fault,) = link_fails(checks["gpu-bandwidth"])
    assert fault["metric"] == "gpu.pcie_width" and fault["labels"]["gpu"] == 6, fault
    assert "PCIe link trained down: Gen5 x8 of Gen5 x16" in fault["message"]
    assert checks["gpu-bandwidth"]["status"] == "failed" and r.returncode == 1, r.stdout + r.stderr
    assert not link_fails(checks["nccl"])  # the same link: reported once
    assert r.stdout.count("gpu.pcie_width") == 1, r.stdout


def test_after_gpu_health_judged_it_the_bandwidth_checks_do_not_repeat_it(tmp_path: Path):
    r, rec = node(tmp_path, health=HEALTH)
    checks = {c["id"]: c for c in rec["checks"]}
    assert len(link_fails(checks["gpu-health"])) == 1
    assert not link_fails(checks["gpu-bandwidth"]) and not link_fails(checks["nccl"])
    assert r.stdout.count("gpu.pcie_width") == 1, r.stdout
