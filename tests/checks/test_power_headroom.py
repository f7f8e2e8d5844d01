"""The power_headroom check through the real `harness run` CLI: real stress-ng, the real burn engine
(NumPy backend), the real runner, compare and report; only NVML (tests/support/fakenvml.py) and the BMC
(tests/support/fakebmc.py, SYNTHETIC scripted readings) are faked, in tests/support/powerlaunch.py."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from clihelp import ROOT, results, write
from clihelp import run_dirs as all_dirs
from faulthelp import alive, procs_with, wait_for

from harness.checks import power_headroom as ph
from harness.checks.base import CheckContext
from harness.checks.loadgroup import LoadGroup
from harness.config.bmc import BmcConfig
from harness.errors import ConfigError, SkipCheck, ToolError

LAUNCH = Path(__file__).parents[1] / "support" / "powerlaunch.py"
H100 = {"name": "NVIDIA H100 80GB HBM3", "power_w": 650.0}
FAST = ("duration: {duration}, idle: 0.5, cooldown: 0.5, period: 0.25, backend: numpy, dtype: fp32, "
        "size: 32, cpu_workers: 1, vm_workers: 1, vm_bytes: 16m, telemetry_period: 0.25, bmc: {{kind: none}}")


def run_dirs(output: Path) -> list[Path]:
    """Run directories under `output` (not the report's hidden template cache beside them)."""
    return [d for d in all_dirs(output) if not d.name.startswith(".")]


def suite(tmp_path: Path, duration: int = 2, timeout: str = "") -> Path:
    extra = f"\n    timeout: {timeout}" if timeout else ""
    return write(tmp_path / "power.yaml", f"""\
name: power-test
checks:
  - id: power
    kind: power_headroom{extra}
    params: {{{FAST.format(duration=duration)}}}
""")


def launch(tmp_path: Path, scenario: dict[str, Any], *args: str, env: dict[str, str] | None = None,
           duration: int = 2, timeout: str = "") -> subprocess.Popen[str]:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"gpus": [H100] * 8, **scenario}))
    cmd = [sys.executable, str(LAUNCH), str(path), "run", str(suite(tmp_path, duration, timeout)),
           "--profile", "dgx-h100", "--output", str(tmp_path / "out"), *args]
    return subprocess.Popen(cmd, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})})


def run(tmp_path: Path, scenario: dict[str, Any], **kw: Any) -> tuple[int, Path, dict[str, Any], str]:
    p = launch(tmp_path, scenario, **kw)
    out, err = p.communicate(timeout=180)
    assert (tmp_path / "out").is_dir(), out + err
    (run_dir,) = run_dirs(tmp_path / "out")
    (check,) = results(run_dir)["checks"]
    return p.returncode, run_dir, check, out + err


def metric(check: dict[str, Any], name: str) -> float:
    (v,) = [m["value"] for m in check["metrics"] if m["name"] == name and not m["labels"]]
    return float(v)


def fails(check: dict[str, Any]) -> dict[str, str]:
    return {e["metric"]: e["message"] for e in check["evaluations"] if e["outcome"] == "fail"}


def test_healthy_dgx_h100_passes_with_a_real_full_system_load(tmp_path: Path):
    code, run_dir, check, out = run(tmp_path, {"bmc": {"node_w_steps": [[0, 2100.0], [2, 9400.0]]}},
                                    env={"IPMI_PASSWORD": "s3cr3t-bmc-pass"})
    assert code == 0 and check["status"] == "passed", out
    assert metric(check, "power.node_peak") == 9400.0 and metric(check, "power.estimated") == 0.0
    assert metric(check, "power.usable_capacity") == 13200.0
    assert metric(check, "power.headroom_pct") == pytest.approx(100 * (1 - 9400 / 13200))
    assert metric(check, "power.gpu_peak") == 8 * 650.0
    (head,) = [e for e in check["evaluations"] if e["metric"] == "power.headroom_pct"]
    assert head["outcome"] == "pass" and head["low"] == 20 and head["source"] == "dgx-h100"
    assert any(e["message"] == "6 of 6 PSUs OK in every reading (before, load, cooldown); redundancy kept"
               for e in check["evaluations"])
    # the load really ran: stress-ng and the burn, side by side, each to its end
    runs = {"burn" if "harness.engines.burn" in r["argv"] else Path(r["argv"][0]).name: r
            for r in check["tool_runs"]}
    assert runs["stress-ng"]["rc"] == 0 and "--vm-bytes" in runs["stress-ng"]["argv"]
    assert "successful run completed" in (run_dir / runs["stress-ng"]["stderr_file"]).read_text() + \
        (run_dir / runs["stress-ng"]["stdout_file"]).read_text()
    assert runs["burn"]["rc"] == 0
    assert any(m["name"] == "gpu_burn.ok" and m["value"] == 1 for m in check["metrics"])
    series = json.loads((run_dir / check["details"]["power"]["file"]).read_text())
    assert {"before", "load", "cooldown"} <= set(series["phase"]) and len(series["gpu_w"]) == 8
    assert len(series["t"]) == len(series["node_w"]) == len(series["gpu_w"]["0"])
    html = (run_dir / "report.html").read_text()
    assert "Power headroom" in html and "28.8 %" in html and 'class="chart power"' in html
    assert "usable capacity" in html and "80% (20% headroom)" in html and "estimated</span>" not in html
    # no BMC secret anywhere in what the run keeps
    for f in run_dir.rglob("*"):
        if f.is_file():
            assert b"s3cr3t-bmc-pass" not in f.read_bytes(), f


@pytest.mark.parametrize("scenario, failing, message", [
    ({"bmc": {"node_w": 11000.0}}, "power.headroom_pct", "measured 16.7 %, expected >= 20 %"),
    ({"bmc": {"node_w": 9000.0, "lose_psu_at": 5}}, "psu.ok", "PSU3 failed "),
], ids=["below-20pct-headroom", "psu-lost-mid-load"])
def test_a_node_that_fails(tmp_path: Path, scenario, failing, message):
    code, run_dir, check, out = run(tmp_path, scenario)
    assert code == 1 and check["status"] == "failed", out
    assert message in fails(check)[failing]
    if failing == "psu.ok":
        assert fails(check)["psu.ok"].endswith("s into the load: Presence detected, Power Supply AC lost")
        assert "PSU3 not OK" in (run_dir / "report.html").read_text()  # marked on the chart
        # the series judge names no kind: the kind signs its verdicts
        psu = {e["source"] for e in check["evaluations"] if e["metric"].startswith("psu.")}
        assert psu == {"power_headroom"}
    assert "FAILED power" in out


def test_no_bmc_node_power_is_estimated_and_marked(tmp_path: Path):
    code, run_dir, check, out = run(tmp_path, {})
    assert code == 0 and check["status"] == "passed", out
    assert metric(check, "power.estimated") == 1.0
    assert metric(check, "power.node_peak") == 8 * 650.0 + 4600.0  # profile: 10.2 kW - 8 x 700 W
    info = check["details"]["power"]
    assert info["estimated"] is True and info["allowance_w"] == 4600.0
    assert "(estimated)" in check["message"]
    html = (run_dir / "report.html").read_text()
    assert "estimated</span>" in html and "4,600 W allowance" in html


def stress_group(run_dir: Path) -> list[int]:
    """PIDs in the process group of this run's stress-ng (its workers rename themselves)."""
    leaders = procs_with(str(run_dir), "stress-ng")
    if not leaders:
        return []
    pgid = os.getpgid(leaders[0])
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.getpgid(int(d.name)) == pgid and alive(int(d.name)):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def test_ctrl_c_mid_load_leaves_no_stress_ng_and_keeps_the_samples(tmp_path: Path):
    p = launch(tmp_path, {"bmc": {"node_w": 9000.0}}, duration=60)
    try:
        wait_for(lambda: (tmp_path / "out").exists() and run_dirs(tmp_path / "out")
                 and len(stress_group(run_dirs(tmp_path / "out")[0])) >= 2, 60, "stress-ng and its workers")
        run_dir = run_dirs(tmp_path / "out")[0]
        group = stress_group(run_dir)
        burn = procs_with("harness.engines.burn", under=p.pid)
        time.sleep(0.5)
        os.kill(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, out + err
    assert [pid for pid in group + burn if alive(pid)] == []
    assert stress_group(run_dir) == []
    (check,) = results(run_dir)["checks"]
    assert check["status"] == "not_run" and check["message"] == "interrupted by SIGINT while running"
    series = json.loads((run_dir / "raw" / "power" / "power.json").read_text())
    assert "load" in series["phase"]  # what was measured before the interrupt stays on disk


def test_timeout_kills_the_load(tmp_path: Path):
    t0 = time.monotonic()
    code, run_dir, check, out = run(tmp_path, {"bmc": {"node_w": 9000.0}}, duration=60, timeout="3s")
    assert time.monotonic() - t0 < 50
    assert code == 3 and check["status"] == "errored", out
    assert "timed out after 3 s" in check["message"]
    assert stress_group(run_dir) == []


# ---------------------------------------------------------------- units: argv, plan, load group, set-up

def test_argv_and_plan():
    p = ph.PowerHeadroomParams(duration=600, cpu_workers=4, vm_workers=2, vm_bytes="40%")
    assert ph.stress_argv(p, True, "/scratch") == [
        "stress-ng", "--cpu", "4", "--cpu-method", "matrixprod", "--vm", "2", "--vm-bytes", "40%",
        "--timeout", "600s", "--metrics-brief", "--temp-path", "/scratch"]
    assert ph.stress_argv(ph.PowerHeadroomParams(cpu_workers=0, vm_workers=0), False, "/s") is None
    assert ph.burn_argv(p)[1:] == ["-m", "harness.engines.burn", "--seconds", "600", "--dtype", "bf16",
                                   "--backend", "auto"]
    assert ph.cpu_workers(ph.PowerHeadroomParams(), True) == max(1, (os.cpu_count() or 1) - 1)
    planned = ph.plan(ph.PowerHeadroomParams(fio_dirs=["/data"]), {"gpus": [{}] * 8})
    assert [c.argv[0] for c in planned][1:] == ["stress-ng", "fio"]
    assert planned[0].note == ("bf16 burn on 8 GPU(s); 5 s idle, 300 s load, 30 s cool-down; node power from "
                               "the BMC (auto), else GPU power + allowance (estimated) every 1 s")
    assert "--directory=/data/harness-power-*" in planned[2].argv
    with pytest.raises(ValueError):
        ph.PowerHeadroomParams(vm_bytes="40%; rm -rf /")


def ctx(tmp_path: Path, gpus: int = 0, hardware: dict[str, Any] | None = None) -> CheckContext:
    return CheckContext("power", tmp_path, 60, False, False, {"gpus": [{"index": i} for i in range(gpus)]},
                        logging.getLogger("t"), hardware=hardware or {})


def test_load_group_stops_every_tool_and_starts_nothing_after_an_interrupt(tmp_path: Path):
    c = ctx(tmp_path)
    marker = f"{tmp_path}/never-created"
    with LoadGroup(c) as group:
        group.start("a", ["sleep", "30"], 60)
        group.start("b", ["sh", "-c", f"sleep 31; touch {marker}"], 60)
        wait_for(lambda: len(group._pids) == 2, 10, "both tools to start")
        pids = list(group._pids.values())
        assert group.running() and not group.wait(0.2)
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 10 and not any(alive(x) for x in pids)
    assert group.stopped_early and set(group.outcomes) == {"a", "b"}
    assert all(o.rc == -signal.SIGTERM for o in group.outcomes.values())  # type: ignore[union-attr]
    assert not Path(marker).exists()
    group.interrupted.set()
    with pytest.raises(ToolError, match="not started: the check is being stopped"):
        group.start("c", ["sleep", "1"], 5)


def test_set_up_errors_come_before_any_load(tmp_path: Path):
    none = ph.PowerHeadroomParams(bmc=BmcConfig(kind="none"))
    with pytest.raises(SkipCheck, match="no BMC configured and no GPU power to estimate from"):
        ph.run(none, ctx(tmp_path))
    with pytest.raises(ConfigError, match="no allowance for an estimate"):
        ph.run(none, ctx(tmp_path, gpus=8))
    bad = {"psu": {"count": 5, "rating_w": 3300, "redundancy": "N+N"}}
    with pytest.raises(ConfigError, match=r"profile hardware.psu: N\+N redundancy needs an even PSU count"):
        ph.run(none, ctx(tmp_path, gpus=8, hardware=bad))
    assert not (tmp_path / "raw").exists()  # nothing ran


def test_too_few_healthy_psus_before_the_load_fail_and_no_load_starts(tmp_path: Path, monkeypatch):
    from fakebmc import ScriptedBmc

    monkeypatch.setattr(ph, "open_bmc", lambda cfg: ScriptedBmc(down_at_start=("PSU1", "PSU2", "PSU5")))
    dgx = {"psu": {"count": 6, "rating_w": 3300, "redundancy": "4+2"}}
    c = ctx(tmp_path, hardware=dgx)
    out = ph.run(ph.PowerHeadroomParams(idle=0.2, period=0.1, cooldown=0, duration=30), c)
    assert c.tool_runs == [] and out.problems == ()  # nothing started: a valid, failing verdict
    assert out.details["notes"] == ["GPU load skipped: no NVIDIA GPU",
                                    "load not started: 3 healthy PSUs, fewer than the 4 that carry it (4+2)"]
    fails = {e.metric: e.message for e in out.findings if e.outcome.value == "fail"}
    assert fails["power.psus_ok"] == ("3 of 6 PSUs healthy before the load: fewer than the 4 that carry the "
                                      "load (4+2)")
    assert [e.message for e in out.findings if e.metric == "psu.ok"] == [
        f"PSU{i} not OK before the load: Absent" for i in (1, 2, 5)]
    assert (tmp_path / "raw" / "power" / "power.json").exists()


def test_real_bmc_simulator_end_to_end(tmp_path: Path):
    """ipmi_sim (OpenIPMI) over RMCP+ on loopback, read by real ipmitool through the check's
    real BMC source: healthy before the load; mid-load PSU2 loses AC, redundancy goes and the
    DCMI power reading climbs to 1,400 W of the 1,600 W one PSU carries."""
    from bmcsim import bmc_sim

    with bmc_sim(tmp_path / "sim") as sim:
        prof = write(tmp_path / "sim-node.yaml", """\
name: sim-node
extends: dgx-h100
hardware:
  psu: {count: 2, rating_w: 1600, redundancy: "1+1", max_system_power_w: 1500}
""")
        cfg = sim.config()
        bmc = (f"{{kind: ipmi, interface: lanplus, host: 127.0.0.1, port: {cfg.port}, user: {cfg.user}, "
               f"cipher_suite: 3, timeout_s: 30}}")
        path = write(tmp_path / "power.yaml", f"""\
name: power-sim
checks:
  - id: power
    kind: power_headroom
    params: {{{FAST.format(duration=25).replace("bmc: {kind: none}", "bmc: " + bmc).replace(
        "idle: 0.5", "idle: 1").replace("period: 0.25", "period: 0.5")}}}
""")
        scen = write(tmp_path / "scenario.json", json.dumps({"gpus": [H100] * 8}))
        p = subprocess.Popen([sys.executable, str(LAUNCH), str(scen), "run", str(path), "--profile",
                              str(prof), "--output", str(tmp_path / "out")], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **sim.env()})
        try:
            wait_for(lambda: (tmp_path / "out").exists() and run_dirs(tmp_path / "out")
                     and stress_group(run_dirs(tmp_path / "out")[0]), 60, "the load to start")
            # a 25 s load: on a loaded 2-core machine the console commands and each ipmitool
            # reading take seconds; the check must still read the BMC after these changes
            time.sleep(1.0)
            sim.set_dcmi(1400, 900, 1400, 1200)  # a file the DCMI module reads: at once
            sim.set_bits("psu2_status", 0, 3)  # presence detected + input (AC) lost
            sim.set_bits("redundancy", 1)  # redundancy lost
            out, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
    (run_dir,) = run_dirs(tmp_path / "out")
    (check,) = results(run_dir)["checks"]
    assert p.returncode == 1 and check["status"] == "failed", out + err
    assert metric(check, "power.node_peak") == 1400.0 and metric(check, "power.estimated") == 0.0
    f = fails(check)
    assert "measured 12.5 %, expected >= 20 %" in f["power.headroom_pct"]
    assert "failed" in f["psu.ok"] and "s into the load" in f["psu.ok"]
    assert f["psu.redundant"].startswith("the BMC reports PSU redundancy lost")
    assert check["details"]["power"]["source"] == f"ipmitool -I lanplus 127.0.0.1:{cfg.port}"
    assert sorted(p.name for p in (run_dir / "raw" / "power").glob("bmc-*.txt"))  # ipmitool's own output
    for file in run_dir.rglob("*"):
        if file.is_file():
            assert sim.password.encode() not in file.read_bytes(), file


def test_cpu_only_node_with_a_bmc_and_fio_on_a_data_directory(tmp_path: Path, monkeypatch):
    """No GPU: no burn (said so); stress-ng and fio run for real side by side, fio in a fresh
    subdirectory that is gone afterwards; node power from the (scripted) BMC."""
    from fakebmc import ScriptedBmc

    monkeypatch.setattr(ph, "open_bmc", lambda cfg: ScriptedBmc(psus=2, node_w=lambda n: 300.0 + 100 * n))
    data = tmp_path / "data"
    data.mkdir()
    c = ctx(tmp_path / "run", hardware={"psu": {"count": 2, "rating_w": 1600, "redundancy": "N+1"}})
    params = ph.PowerHeadroomParams(duration=2, idle=0.2, cooldown=0.2, period=0.25, cpu_workers=1,
                                    vm_workers=1, vm_bytes="16m", fio_dirs=[str(data)], fio_size="8m")
    out = ph.run(params, c)
    assert out.problems == (), out.problems
    assert sorted(Path(r.argv[0]).name for r in c.tool_runs) == ["fio", "stress-ng"]
    assert all(r.rc == 0 for r in c.tool_runs)
    assert list(data.iterdir()) == []  # fio's subdirectory removed
    assert out.details["notes"] == ["GPU load skipped: no NVIDIA GPU"]
    m = {x.name: x.value for x in out.metrics if not x.labels}
    assert m["power.usable_capacity"] == 1600.0 and m["power.estimated"] == 0.0
    assert m["power.headroom_pct"] == pytest.approx(100 * (1 - m["power.node_peak"] / 1600))
    assert "power.gpu_share_pct" not in m  # no GPU power to share


def test_a_bmc_that_stops_answering_is_an_environment_error_not_a_verdict(tmp_path: Path, monkeypatch):
    from fakebmc import ScriptedBmc

    hw = {"psu": {"count": 6, "rating_w": 3300, "redundancy": "4+2"}}
    quick = ph.PowerHeadroomParams(duration=2, idle=0.2, cooldown=0, period=0.25, cpu_workers=1, vm_workers=0)
    monkeypatch.setattr(ph, "open_bmc", lambda cfg: ScriptedBmc(fail_from=0))
    with pytest.raises(ToolError, match=re.escape("BMC (fake BMC (tests)) did not answer before the load: "
                                                  "ipmitool -I lanplus -H bmc.example: Unable to establish")):
        ph.run(quick, ctx(tmp_path / "a", hardware=hw))
    monkeypatch.setattr(ph, "open_bmc", lambda cfg: ScriptedBmc(fail_from=3))
    out = ph.run(quick, ctx(tmp_path / "b", hardware=hw))
    assert len(out.problems) == 1 and out.problems[0].startswith("the BMC answered ")
    assert out.problems[0].endswith(" readings during the load")


class _BurnOutput:
    """What the load group keeps of the burn: its stdout and exit status (the real engine's lines)."""

    def __init__(self, text: str, rc: int) -> None:
        self.text, self.rc = text, rc

    def stdout(self) -> str:
        return self.text

    def tail(self, n: int = 2000) -> str:
        return self.text[-n:]


def test_a_gpu_that_hangs_under_the_full_system_load_fails_by_name(tmp_path: Path):
    """Before: the hung GPU was only a problem of the burn (an invalid run, ERRORED); now it is a
    failure of that GPU, the other GPUs' results kept."""
    burn = ('{"event": "start", "backend": "torch", "dtype": "bf16", "devices": [0, 1]}\n'
            '{"event": "result", "gpu": 0, "iterations": 100, "verified": 10, "errors": 0, "tflops": 700.0}\n'
            '{"event": "error", "gpu": 1, "message": "hung: no result 330 s after it began burning; its '
            'process was killed (the other GPUs\' results are kept)"}\n{"event": "done"}\n')
    group = type("G", (), {"outcomes": {ph.BURN_NAME: _BurnOutput(burn, 1)}})()
    ctx = CheckContext("power", tmp_path, 600, False, False,
                       {"gpus": [{"pci_bus_id": "00000000:18:00.0"}, {"pci_bus_id": "00000000:2A:00.0"}]},
                       logging.getLogger("t"))
    metrics, problems, dead = ph._load_problems(ph.PowerHeadroomParams(), ctx, group)
    assert problems and [m.value for m in metrics if m.name == "gpu_burn.ok"] == [1.0, 0.0]
    (f,) = dead
    assert f.outcome.value == "fail" and f.labels == {"gpu": 1}
    assert f.message.startswith("GPU 1 (00000000:2A:00.0): did not finish the burn under the "
                                "full-system load: hung: no result 330 s")
