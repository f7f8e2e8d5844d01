"""`harness run` in-process on a node faked at the NVML edge (fake pynvml, tests only) with a
stand-in gpu_burn printing a real captured output: the real runner, telemetry hook, compare,
results and report. The silent throttle: GPU 1 is power-capped in 40% of the samples, which
gpu_burn never mentions; the profile allows 5%."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from fakenvml import POWER_CAP, FakeGpu, install

from harness.model import RunRecord
from harness.run import session as app

SAMPLE = (Path(__file__).parents[1] / "data" / "gpu-burn"
          / "gpu_burn_k80_2gpu_doubles_ok_interleaved_child_output.txt")
PROFILE = """\
name: e2e-h200x2
hardware: {gpu: {models: ["NVIDIA H200"], count: 2}}
expectations:
  - {metric: gpu.throttle_pct, labels: {reason: power_cap}, max: 5, unit: "%"}
"""


def suite(tmp_path: Path) -> Path:
    exe = tmp_path / "gpu_burn"
    exe.write_text(f'#!/bin/sh\nsleep 1.5\ncat "{SAMPLE}"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    path = tmp_path / "suite.yaml"
    path.write_text(f"""\
name: e2e
checks:
  - id: gpu-health
    kind: gpu_health
    params: {{xid_source: none}}
  - id: gpu-burn
    kind: gpu_burn
    params: {{binary: "{exe}", duration: 5, telemetry_period: 0.1}}
    settle: {{enabled: false}}  # the fake GPUs are busy throughout: nothing to wait for
""")
    return path


def run(tmp_path: Path, monkeypatch, gpus: list[FakeGpu]) -> tuple[int, Path, RunRecord]:
    install(monkeypatch, gpus)
    (tmp_path / "p.yaml").write_text(PROFILE)
    out = tmp_path / "reports"
    code = app.run(suite=str(suite(tmp_path)), profile=str(tmp_path / "p.yaml"), output=out)
    (run_dir,) = [p for p in out.iterdir() if (p / "results.json").is_file()]
    return code, run_dir, RunRecord.from_dict(json.loads((run_dir / "results.json").read_text()))


def test_silent_power_cap_throttle_fails_the_burn(tmp_path: Path, monkeypatch, capsys):
    gpus = [FakeGpu(), FakeGpu(reasons=lambda n: POWER_CAP if n % 5 < 2 else 0, sm_clock=1755.0)]
    code, run_dir, rec = run(tmp_path, monkeypatch, gpus)
    assert code == 1 and rec.verdict == "REJECTED"
    health, burn = rec.checks
    assert health.status.value == "passed", health.message
    assert burn.status.value == "failed", burn.message
    pct = {m.labels["gpu"]: m.value for m in burn.metrics
           if m.name == "gpu.throttle_pct" and m.labels["reason"] == "power_cap"}
    assert pct[0] == 0.0 and 30.0 <= pct[1] <= 50.0  # 2 of every 5 samples, cut at a whole second
    (bad,) = [e for e in burn.evaluations if e.outcome.value == "fail"]
    assert bad.metric == "gpu.throttle_pct" and bad.labels == {"gpu": 1, "reason": "power_cap"}
    assert bad.high == 5 and bad.measured == pct[1]
    # the burn itself was fine: gpu_burn's numbers and its verdict are there
    tf = {m.labels["gpu"]: m.value for m in burn.metrics if m.name == "gpu_burn.tflops"}
    assert tf == {0: 0.735, 1: 0.786}
    assert any(e.message == "all 2 GPUs OK, no computation errors" for e in burn.evaluations)
    assert any(e.message == "2 busy GPU(s) at their maximum PCIe link (Gen5 x16)" for e in burn.evaluations)
    clocks = {m.labels["gpu"]: m.value for m in burn.metrics if m.name == "gpu.sm_clock_mean"}
    assert clocks == {0: 1980.0, 1: 1755.0}
    tele = burn.details["telemetry"]
    assert tele["file"] == "raw/gpu-burn/telemetry.json" and 12 <= tele["samples"] <= 22
    saved = json.loads((run_dir / tele["file"]).read_text())
    assert set(saved["gpus"]) == {"0", "1"} and len(saved["t"]) == tele["samples"]
    html = (run_dir / "report.html").read_text()
    assert "GPU telemetry" in html and html.count("<polyline") >= 6
    assert "GPU 1: power_cap" in html  # the shaded throttle spans carry their reason
    assert "FAILED gpu-burn" in capsys.readouterr().out


def test_a_gpu_lost_mid_burn_and_a_link_trained_down(tmp_path: Path, monkeypatch):
    gpus = [FakeGpu(pcie=(4, 5, 8, 16)), FakeGpu(lost_after=4)]
    code, _run_dir, rec = run(tmp_path, monkeypatch, gpus)
    health, burn = rec.checks
    assert code == 1
    assert health.status.value == "failed"  # x8 of x16 even at idle
    fails = {(e.metric, e.labels.get("gpu")): e.message for e in burn.evaluations
             if e.outcome.value == "fail"}
    # GPU 0's link is one fault, reported once: under gpu-health, which failed it first (issue #25)
    assert ("gpu.pcie_gen", 0) not in fails
    (seen,) = burn.details["reported_under_other_checks"]
    assert seen.startswith("gpu.pcie_gen{gpu=0}: PCIe link trained down: Gen4 x8 of Gen5 x16 while busy")
    assert seen.endswith("; reported under gpu-health")
    # named with its PCI address, as the operator must find it
    assert fails[("gpu.lost", 1)].startswith("GPU 1 (00000000:28:00.0) stopped answering NVML")


def test_no_gpu_node_skips_with_the_reason(tmp_path: Path, monkeypatch):
    install(monkeypatch, [], fail_init="yes")
    out = tmp_path / "r"
    code = app.run(suite=str(suite(tmp_path)), profile="generic", output=out)
    (run_dir,) = [p for p in out.iterdir() if (p / "results.json").is_file()]
    rec = json.loads((run_dir / "results.json").read_text())
    assert code == 4 and rec["verdict"] == "UNTESTED"  # both skipped: nothing judged, not accepted
    assert [(c["status"], c["message"]) for c in rec["checks"]] == [
        ("skipped", "no NVIDIA GPU: NVML not loadable: Unknown")] * 2


def test_the_profile_marks_the_hot_gpu_against_its_siblings(tmp_path: Path, monkeypatch):
    """The issue's example rule `gpu.temp_max <= median + 10 C`, stated in the profile, with the
    real runner, compare and report; min_siblings 2 because the captured gpu_burn ran 2 GPUs."""
    install(monkeypatch, [FakeGpu(temp=62.0), FakeGpu(temp=85.0)])
    (tmp_path / "p.yaml").write_text(
        "name: hot-sibling\nhardware: {gpu: {models: [\"NVIDIA H200\"], count: 2}}\nexpectations:\n"
        "  - {metric: gpu.temp_max, sibling: {max_above: 10, min_siblings: 2}, unit: C,\n"
        "     note: cooling of one GPU}\n")
    out = tmp_path / "reports"
    code = app.run(suite=str(suite(tmp_path)), profile=str(tmp_path / "p.yaml"), output=out)
    (run_dir,) = [p for p in out.iterdir() if (p / "results.json").is_file()]
    rec = RunRecord.from_dict(json.loads((run_dir / "results.json").read_text()))
    assert code == 1 and rec.verdict == "REJECTED"
    burn = rec.checks[1]
    (bad,) = [e for e in burn.evaluations if e.metric == "gpu.temp_max" and e.outcome.value == "fail"]
    assert bad.labels == {"gpu": 1} and bad.measured == 85.0 and bad.high == 83.5
    assert bad.message == ("gpu1 measured 85 C, 11.5 C above the median 73.5 C of its 2 siblings (by gpu); "
                           "allowed 10 C") and bad.source == "hot-sibling"
    html = (run_dir / "report.html").read_text()
    assert "11.5 C above the median 73.5 C" in html


def test_a_burn_tool_that_fails_while_a_gpu_falls_off_the_bus_fails_that_gpu(tmp_path: Path, monkeypatch):
    """gpu_burn aborts (exit 1, no result) while NVML loses GPU 1: before, the ToolError made the check
    ERRORED (exit 3, never drained) and the telemetry's finding was dropped with it."""
    install(monkeypatch, [FakeGpu(), FakeGpu(lost_after=4)])
    exe = tmp_path / "gpu_burn"
    exe.write_text("#!/bin/sh\nsleep 1.5\n"
                   "echo \"Couldn't init a GPU test: an illegal memory access\"\nexit 1\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "s.yaml").write_text(f"""\
name: e2e
checks:
  - id: gpu-burn
    kind: gpu_burn
    params: {{binary: "{exe}", duration: 5, telemetry_period: 0.1}}
    settle: {{enabled: false}}
""")
    (tmp_path / "p.yaml").write_text(PROFILE)
    out = tmp_path / "reports"
    code = app.run(suite=str(tmp_path / "s.yaml"), profile=str(tmp_path / "p.yaml"), output=out)
    (run_dir,) = [p for p in out.iterdir() if (p / "results.json").is_file()]
    burn = RunRecord.from_dict(json.loads((run_dir / "results.json").read_text())).checks[0]
    assert code == 1 and burn.status.value == "failed", burn.message
    (lost,) = [e for e in burn.evaluations if e.outcome.value == "fail"]
    assert lost.metric == "gpu.lost" and lost.labels == {"gpu": 1}
    assert lost.message.startswith("GPU 1 (00000000:28:00.0) stopped answering NVML")
    assert burn.problems[0].startswith("gpu-burn: exit 1: gpu_burn: Couldn't init a GPU test")
