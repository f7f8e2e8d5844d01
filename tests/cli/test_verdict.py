"""A verdict needs a measurement (issue #20): the false greens, reproduced through the real CLI.

Each run is `python -m harness run ...` in a subprocess, with real fio where a check measures.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write

from harness.history.store import SqliteStore

NO_GPU = shutil.which("nvidia-smi") is None and not Path("/proc/driver/nvidia").exists()
NO_DRIVES = not Path("/sys/class/nvme").exists() and not Path("/proc/mdstat").exists()


def _run(tmp_path: Path, *args: str, history: str = "off") -> tuple[int, str, dict, Path]:
    out = tmp_path / "reports"
    r = harness("run", *args, "--output", str(out), "--history", history,
                env={"HARNESS_LOCK_FILE": str(tmp_path / "run.lock")})
    assert "Traceback" not in r.stderr, r.stderr
    (run_dir,) = run_dirs(out)
    return r.returncode, r.stdout, results(run_dir), run_dir


@pytest.mark.parametrize("args, skipped", [
    pytest.param(("suites/quick.yaml", "--only", "gpu-health,gpu-burn"), 2,
                 marks=pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")),
    pytest.param(("storage", "--only", "nvme-health,md-raid"), 2,
                 marks=pytest.mark.skipif(not NO_DRIVES, reason="this machine has NVMe or md")),
])
def test_a_run_whose_checks_all_skipped_is_untested_and_exits_4(tmp_path: Path, args, skipped):
    code, out, doc, run_dir = _run(tmp_path, *args)
    assert code == 4, out
    assert out.startswith(f"UNTESTED: 0 passed, 0 recorded, 0 warned, 0 failed, 0 errored, {skipped} skipped")
    assert f"  UNTESTED no check judged anything ({skipped} skipped)" in out
    assert doc["verdict"] == "UNTESTED" and {c["status"] for c in doc["checks"]} == {"skipped"}
    assert doc["format_version"] == 1 and doc["counts"]["recorded"] == 0
    html = (run_dir / "report.html").read_text()
    assert '<div class="word">UNTESTED</div>' in html and "Not accepted, nothing failed" in html
    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("errors") == "1" and suite.get("failures") == "0"
    verdict = suite.find("testcase[@name='verdict']/error")
    assert verdict is not None and verdict.get("type") == "untested"
    # the quiet one-liner (Slurm prolog) says the same and keeps the code
    q = harness("run", *args, "--quiet", "--output", str(tmp_path / "q"), "--history", "off",
                env={"HARNESS_LOCK_FILE": str(tmp_path / "run.lock")})
    assert q.returncode == 4 and q.stdout.startswith("harness: UNTESTED: 0 passed"), q.stdout


CHECKPOINT = """\
name: ckpt
checks:
  - id: inventory
    kind: inventory
  - id: checkpoint
    kind: fio
    params:
      preset: checkpoint
      preset_options: {checkpoint_size: 4M, gpus: 1}
"""


def test_a_preset_fio_job_without_expectations_is_recorded_not_passed(tmp_path: Path):
    suite = write(tmp_path / "ckpt.yaml", CHECKPOINT)
    bare = write(tmp_path / "bare.yaml", "name: bare\n")  # no hardware block, no expectations
    store = tmp_path / "history.sqlite"
    code, out, doc, run_dir = _run(tmp_path, str(suite), "--only", "checkpoint", "--profile", str(bare),
                                   history=str(store))
    assert code == 4, out
    assert out.startswith("UNTESTED: 0 passed, 1 recorded, ")
    assert "  UNTESTED no check judged anything (1 recorded)" in out
    (chk,) = doc["checks"]
    assert chk["status"] == "recorded" and chk["evaluations"] == []
    assert any(m["name"] == "fio.persist_time" for m in chk["metrics"])
    html = (run_dir / "report.html").read_text()
    assert 'class="badge b-recorded"' in html and "Recorded, not judged" in html
    assert 'class="badge b-passed"' not in html
    case = ET.parse(run_dir / "junit.xml").getroot().find("testsuite/testcase[@classname='checkpoint']")
    assert case is not None and (case.findtext("system-out") or "").startswith("RECORDED, not judged")
    with SqliteStore(store) as s:  # a recorded check measured validly: history keeps its metrics
        stored = s.metrics([doc["run_id"]])[doc["run_id"]]
    assert {cid for cid, _ in stored} == {"checkpoint"} and len(stored) == len(chk["metrics"])


def test_a_recorded_check_beside_a_judged_one_is_accepted(tmp_path: Path):
    suite = write(tmp_path / "ckpt.yaml", CHECKPOINT)
    memory = write(tmp_path / "mem.yaml", "name: mem\nhardware: {memory_min_bytes: 1048576}\n")
    code, out, doc, _ = _run(tmp_path, str(suite), "--profile", str(memory))
    assert code == 0, out
    assert out.startswith("ACCEPTED: 1 passed, 1 recorded, ") and "UNTESTED" not in out
    assert [c["status"] for c in doc["checks"]] == ["passed", "recorded"]


PROBE = """\
name: probe
checks:
  - id: inventory
    kind: inventory
  - id: gpu-probe
    kind: command
    needs: [gpu]
    params: {argv: [nvidia-smi]}
"""


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
@pytest.mark.parametrize("rule, code", [
    ("{metric: command.duration, check: gpu-probe, max: 60, unit: s}", 4),  # names the check
    ("{metric: command.duration, check: gpu-probe, max: 60, unit: s, if_measured: true}", 0),
    ("{metric: command.duration, max: 60, unit: s}", 0),  # only a metric: applies wherever measured
])
def test_a_skipped_check_the_profile_expects_makes_the_run_untested(tmp_path: Path, rule: str, code: int):
    suite = write(tmp_path / "probe.yaml", PROBE)
    profile = write(tmp_path / "p.yaml", f"name: p\nhardware: {{memory_min_bytes: 1048576}}\n"
                                         f"expectations:\n  - {rule}\n")
    got, out, doc, run_dir = _run(tmp_path, str(suite), "--profile", str(profile))
    assert got == code, out
    probe = doc["checks"][1]
    assert probe["status"] == "skipped" and probe["message"].startswith("no NVIDIA GPU")
    assert doc["checks"][0]["status"] == "passed"  # the run judged something: only the skip counts
    if code == 4:
        assert probe["expected_by"] == "profile p expects it: command.duration <= 60 s"
        assert "  UNTESTED gpu-probe skipped (no NVIDIA GPU: " in out
        assert "), but profile p expects it: command.duration <= 60 s" in out
        assert "Skipped, but profile p expects it" in (run_dir / "report.html").read_text()
    else:
        assert probe["expected_by"] == "" and doc["verdict"] == "ACCEPTED"


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
def test_a_hand_edited_verdict_is_not_believed(tmp_path: Path):
    suite = write(tmp_path / "probe.yaml", PROBE)
    bare = write(tmp_path / "bare.yaml", "name: bare\n")
    code, out, doc, run_dir = _run(tmp_path, str(suite), "--only", "gpu-probe", "--profile", str(bare))
    assert code == 4 and doc["verdict"] == "UNTESTED", out
    # the verdict in results.json is an output: a re-render computes it from the checks again
    text = (run_dir / "results.json").read_text().replace('"verdict": "UNTESTED"', '"verdict": "ACCEPTED"')
    (run_dir / "results.json").write_text(text)
    (run_dir / "report.html").unlink()
    assert harness("report", str(run_dir)).returncode == 0
    assert '<div class="word">UNTESTED</div>' in (run_dir / "report.html").read_text()
