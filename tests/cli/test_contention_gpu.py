"""Issue #25 item 4, GPUs during the measurement: another process that starts on a GPU while a burn
measures (8 fake H100s, the process scripted to appear in NVML's process list partway through)
makes the check ERRORED "contended during the measurement: gpu: ..." naming the GPU, the pid and
its memory; its numbers are kept, not judged as hardware. Before, the gate looked only before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from clihelp import ROOT, results, run_dirs

SITE = ROOT / "tests" / "support" / "faultnode"
H100 = {"name": "NVIDIA H100 80GB HBM3", "util": 0.0, "temp": 35.0}
SUITE = """\
name: burn
defaults:
  # this shared test machine's own CPU load is let through: the GPUs are what this test is about
  contention: {timeout: 2s, runnable_per_cpu: 1000, cpu_some: 100%, mem_some: 100%, steal: 100%,
               mem_available: 0}
checks:
  - id: gpu-burn
    kind: gpu_burn
    settle: {enabled: false}
    params: {engine: builtin, backend: numpy, dtype: fp32, size: 48, duration: 4, telemetry_period: 0.1,
             sibling_tolerance: null}
"""


def burn(tmp_path: Path, processes: object) -> tuple[int, str, dict]:
    """One `harness run` of the burn; the record with the report's text under "_html"."""
    gpus = [dict(H100) for _ in range(8)]
    gpus[2]["processes"] = processes
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"gpus": gpus}))
    (tmp_path / "burn.yaml").write_text(SUITE)
    out = tmp_path / "out"
    env = {**os.environ, "FAULT_NODE": str(scenario), "HARNESS_CONTENTION": "gate",
           "PYTHONPATH": os.pathsep.join([str(SITE), str(ROOT)])}
    r = subprocess.run([sys.executable, "-m", "harness", "run", str(tmp_path / "burn.yaml"), "-o", str(out),
                        "--history", "off", "--profile", "generic"], cwd=tmp_path, env=env, text=True,
                       capture_output=True, timeout=180, check=False)
    (run_dir,) = run_dirs(out)
    doc = {**results(run_dir), "_html": (run_dir / "report.html").read_text()}
    return r.returncode, r.stdout + r.stderr, doc


def test_a_gpu_process_that_starts_mid_burn_makes_it_contended(tmp_path: Path):
    # NVML's process list of GPU 2 is empty for its first 15 temperature reads (the gate before the
    # check reads 1, the burn's telemetry about 10 a second), then a 70 GiB process is on it
    code, out, doc = burn(tmp_path, {"after": 15, "then": [[4242, 70 << 30]], "before": []})
    assert code == 3, out
    (c,) = doc["checks"]
    msg = c["message"]
    assert c["status"] == "errored" and msg.startswith("contended during the measurement: gpu: "), msg
    assert "GPU 2: pid 4242 (70.0 GiB)" in msg
    ev = c["details"]["contention"]
    assert "gpu_processes" not in ev["before"]  # not there before the burn
    assert ev["during"]["gpu_processes"] == ["GPU 2: pid 4242 (70.0 GiB)"]
    assert c["metrics"] and not c["evaluations"]  # measured, kept, not judged
    assert doc["verdict"] == "ERRORED"
    # the report's typed contention section: what contended and how much
    html = doc["_html"]
    section = html[html.index("<h3>Competing load</h3>"):]
    section = section[:section.index("</div>")]
    assert "During the measurement (" in section and "windows contended)" in section
    assert "Other processes on the GPUs: GPU 2: pid 4242 (70.0 GiB)" in section
    assert "runnable tasks of other processes per CPU" in section and "<td class=\"num\">1000</td>" in section


def test_without_one_the_burn_is_judged(tmp_path: Path):
    code, out, doc = burn(tmp_path, [])
    (c,) = doc["checks"]
    assert c["status"] == "passed" and code == 0, out
    assert "gpu_processes" not in c["details"]["contention"]["during"]
    assert "<h3>Competing load</h3>" not in doc["_html"]  # nothing contended: nothing drawn
