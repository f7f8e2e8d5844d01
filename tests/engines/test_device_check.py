"""The GPU device check rehearsed without a GPU (issue 21): benchmarks/gpu_device_check.sh with
HARNESS_DEVICE_REHEARSAL=1 runs the whole flow on the NVML fake and the NumPy backend, and the
carried wheel set resolves for CPython 3.12 with nothing from an index."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).parents[2]
WHEELS = ROOT / ".device" / "wheels" / "cp312"

pytestmark = pytest.mark.slow


def test_the_rehearsal_runs_every_step_passes_its_burn_and_hands_back_two_files(tmp_path: Path):
    out = tmp_path / "out"
    env = {**os.environ, "HARNESS_DEVICE_REHEARSAL": "1", "PY": sys.executable, "OUT": str(out),
           "BURN_S": "4", "DEV": str(tmp_path / "no-device-dir")}
    env.pop("WORK", None)
    p = subprocess.run([str(ROOT / "benchmarks" / "gpu_device_check.sh")], env=env, capture_output=True,
                       text=True, timeout=280, check=False)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    (work,) = re.findall(r"work directory (\S+)\)", p.stdout)
    w = Path(work)
    try:
        assert w.parent == Path("/tmp") and w.name.startswith("gpu-device-check.")  # not under $OUT
        # the GPU machine hands back at most 8 files, 2 folders down: exactly the archive and the summary
        assert sorted(x.name for x in out.iterdir()) == ["device-check.tar.gz", "summary.txt"]
        with tarfile.open(out / "device-check.tar.gz") as tar:
            names = set(tar.getnames())
        for need in ("./steps.log", "./summary.txt", "./summary.json", "./suite.yaml",
                     "./raw/nvml-sampler.out", "./raw/burn-engine.out", "./raw/copy-engine.out",
                     "./raw/harness-run.rc"):
            assert need in names, need
        assert any(n.startswith("./runs/") and n.endswith("results.json") for n in names)
        assert not any(n.startswith(("./build", "./site", "./fake")) for n in names)
        rcs = {n: (w / "raw" / n).read_text().strip()
               for n in ("harness-version.rc", "nvml-sampler.rc", "burn-engine.rc", "copy-engine.rc",
                         "summary.rc")}
        assert set(rcs.values()) == {"0"}, rcs
        sampler = (w / "raw" / "nvml-sampler.out").read_text()
        assert "GPU 0: power 702.0 W (instantaneous), 1-s average 650.0 W" in sampler
        assert "GPU 1: power 650.0 W (1-s average)" in sampler and "mean sample cost" in sampler
        summary = json.loads((w / "summary.json").read_text())
        burn = summary["checks"]["burn-builtin"]
        # the CPU burn stands in for both fake GPUs (was: "reported 1 of the 2 GPUs", errored)
        assert burn["status"] == "passed", burn
        assert sorted({m[1]["gpu"] for m in burn["metrics"] if m[0] == "gpu_burn.tflops"}) == [0, 1]
        assert "budget" not in (w / "steps.log").read_text()  # nothing skipped for time
    finally:
        shutil.rmtree(w, ignore_errors=True)


@pytest.mark.skipif(not WHEELS.is_dir(), reason="run benchmarks/gpu_device_prep.sh first")
def test_the_carried_wheels_resolve_every_dependency_for_python_3_12(tmp_path: Path):
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    report = tmp_path / "report.json"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
                        "--report", str(report), "--ignore-installed", "--no-index",
                        "--find-links", str(WHEELS), "--only-binary=:all:",
                        "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
                        "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
                        "--target", str(tmp_path / "t"), *deps],
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    got = {i["metadata"]["name"].lower().replace("_", "-") for i in json.loads(report.read_text())["install"]}
    assert {"pydantic", "pydantic-core", "pyyaml", "jinja2", "click", "rich", "nvidia-ml-py"} <= got
