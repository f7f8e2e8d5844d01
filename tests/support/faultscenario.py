"""Whole `harness run` runs on a node faked at its GPU edges with fault scenarios that unfold during
the run (tests/support/faultnode/sitecustomize.py), for the end-to-end fault tests.

`run(tmp_path, gpus, burn_faults=..., ...)` writes the scenario, the site's own `acceptance` suite
(./suites/acceptance.yaml, which `harness run acceptance` finds before the shipped one) cut to its GPU
checks and a short burn (gpu-health, gpu-burn: the builtin burn on NumPy stand-ins, one per fake
GPU, its TFLOPS sibling rule off: CPU stand-ins are not same-SKU GPUs), a fake dmesg that prints
the scenario's kernel log, and runs `python -m harness run acceptance -q` for real with a bound;
it returns what a test asserts on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clihelp import ROOT

SITE = Path(__file__).resolve().parent / "faultnode"
H200 = {"name": "NVIDIA H200"}


def pci(gpu: int) -> str:
    """The fake's PCI bus id of a GPU (tests/support/fakenvml.py)."""
    return f"00000000:{0x18 + 0x10 * gpu:02X}:00.0"


def xid_line(gpu: int, code: int, text: str) -> str:
    """A kernel-log XID line for the fake GPU, as the driver prints it (tests/data/xid)."""
    return f"[6781741.548779] NVRM: Xid (PCI:0000:{0x18 + 0x10 * gpu:02x}:00): {code}, pid='<unknown>', " \
           f"name=<unknown>, {text}"


SUITE = """\
name: acceptance
description: the acceptance suite's GPU checks with a short burn (fault tests)
tags: [acceptance]
defaults: {{timeout: 5m}}
checks:  # (the inventory check is left out: it judges this machine's NVMe drives against the profile)
  - id: gpu-health
    kind: gpu_health
    timeout: 2m
  - id: gpu-burn
    kind: gpu_burn
    settle: {{enabled: false}}
    params: {{engine: builtin, backend: numpy, dtype: fp32, size: 48, duration: {duration},
              hang_grace: {grace}, telemetry_period: 0.1, sibling_tolerance: null}}
"""


@dataclass(frozen=True)
class Run:
    code: int
    seconds: float
    quiet: str  # the --quiet line
    record: dict[str, Any]
    run_dir: Path
    stderr: str

    def check(self, check_id: str) -> dict[str, Any]:
        (c,) = [c for c in self.record["checks"] if c["id"] == check_id]
        return c

    def fails(self, check_id: str) -> dict[tuple[str, Any], str]:
        """(metric, gpu) -> message of each failing evaluation of a check."""
        return {(e["metric"], e["labels"].get("gpu")): e["message"]
                for e in self.check(check_id)["evaluations"] if e["outcome"] == "fail"}

    def page_one(self) -> str:
        """The report's first printed page: the cover (verdict, what failed, the node, sign-off)."""
        html = (self.run_dir / "report.html").read_text()
        start = html.index('<section class="cover">')
        return html[start:html.index("</section>", html.index("signoff", start))]


def run(tmp_path: Path, gpus: list[dict[str, Any]], *, burn_faults: dict[int, dict[str, Any]] | None = None,
        kernel_log: str = "", nvml_timeout_s: float = 1.0, duration: int = 2, grace: int = 3,
        profile: str | None = None, bound_s: float = 150.0) -> Run:
    """One `harness run` of the scenario, killed (and failed) past `bound_s`."""
    log = tmp_path / "kernel.log"
    log.write_text(kernel_log)
    scenario = {"gpus": gpus, "burn_faults": {str(k): v for k, v in (burn_faults or {}).items()},
                "kernel_log": str(log), "nvml_timeout_s": nvml_timeout_s}
    (tmp_path / "scenario.json").write_text(json.dumps(scenario))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    dmesg = bin_dir / "dmesg"
    dmesg.write_text(f'#!/bin/sh\ncat "{log}"\n')
    dmesg.chmod(0o755)
    suite = tmp_path / "suites" / "acceptance.yaml"  # a site's own acceptance suite: ./suites first
    suite.parent.mkdir(exist_ok=True)
    suite.write_text(SUITE.format(duration=duration, grace=grace))
    out = tmp_path / "reports"
    env = {**os.environ, "FAULT_NODE": str(tmp_path / "scenario.json"),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join([str(SITE), str(ROOT)])}
    env.pop("HARNESS_SUITES_PATH", None)
    argv = [sys.executable, "-m", "harness", "run", "acceptance", "-q", "-o", str(out), "--history", "off"]
    if profile:
        argv += ["--profile", profile]
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=bound_s,
                       check=False)
    seconds = time.monotonic() - t0
    (run_dir,) = [d for d in out.iterdir() if (d / "results.json").is_file()]
    record = json.loads((run_dir / "results.json").read_text())
    return Run(p.returncode, seconds, p.stdout.strip(), record, run_dir, p.stderr)
