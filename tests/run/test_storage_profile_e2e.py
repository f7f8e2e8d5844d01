"""Issue 9's 'each against the profile': checkpoint time, per-job throughput and the feed ratio
of a real storage run on this machine's files, judged by a profile's expectations through the CLI.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write

pytestmark = pytest.mark.skipif(shutil.which("fio") is None and os.environ.get("CI") != "true",
                                reason="fio not installed (apt-get install fio)")

SUITE = """\
name: storage-e2e
checks:
  - id: checkpoint
    kind: fio
    params:
      target: {target}
      preset: checkpoint
      preset_options: {{checkpoint_size: 16M, gpus: 2}}
  - id: data-path
    kind: data_path
    params: {{target: {target}, total_size: 32M, workers: [1, 2], step_seconds: 0.5, gpus: 2}}
"""

# A site profile for this VM's disk: the GPUs need gpu_input_gbps each, a checkpoint must be
# durable within `persist` s and write at least `bw` GB/s.
PROFILE = """\
name: site-storage
extends: generic
hardware:
  gpu_input_gbps: {need}
expectations:
  - {{metric: fio.persist_time, labels: {{job: checkpoint}}, max: {persist}, unit: s}}
  - {{metric: fio.bw, labels: {{job: checkpoint, rw: write}}, min: {bw}, unit: GB/s}}
"""


def _run(tmp_path: Path, name: str, **bounds: float) -> dict:
    target = tmp_path / f"target-{name}"
    target.mkdir()
    suite = write(tmp_path / f"{name}.yaml", SUITE.format(target=target))
    profile = write(tmp_path / f"{name}-profile.yaml", PROFILE.format(**bounds))
    out = tmp_path / f"reports-{name}"
    res = harness("run", str(suite), "--profile", str(profile), "--output", str(out))
    (run_dir,) = run_dirs(out)
    doc = results(run_dir)
    doc["_rc"], doc["_stdout"] = res.returncode, res.stdout + res.stderr
    assert list(target.iterdir()) == []  # neither check leaves its files behind
    return doc


def _evaluations(doc: dict) -> dict[str, str]:
    return {e["metric"]: e["outcome"] for c in doc["checks"] for e in c["evaluations"]}


def test_storage_judged_by_the_profile_passes_and_fails(tmp_path: Path):
    ok = _run(tmp_path, "ok", need=0.0001, persist=600, bw=0.0001)
    assert ok["_rc"] == 0, ok["_stdout"]
    assert _evaluations(ok) == {"fio.persist_time": "pass", "fio.bw": "pass", "data_path.feed_ratio": "pass"}

    # the same node against a profile it cannot meet: a 1 ms checkpoint, 1 TB/s, 1 TB/s per GPU
    bad = _run(tmp_path, "bad", need=1000, persist=0.001, bw=1000)
    assert bad["_rc"] == 1, bad["_stdout"]
    assert bad["verdict"] == "REJECTED"
    assert _evaluations(bad) == {"fio.persist_time": "fail", "fio.bw": "fail", "data_path.feed_ratio": "fail"}
    dp = next(c for c in bad["checks"] if c["id"] == "data-path")
    assert "I/O-bound" in dp["message"] or "I/O-bound" in str(dp["details"])
    report = (run_dirs(tmp_path / "reports-bad")[0] / "report.html").read_text()
    assert "fio.persist_time" in report and "data_path.feed_ratio" in report
