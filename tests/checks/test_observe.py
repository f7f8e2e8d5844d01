"""The `observe` kind: a suite runs a real workload step under the stall doctor; results.json,
report.html and the Prometheus export carry the verdict; suite rules judge its shares; the v2
cpu.max path is followed on a tree; hostile names stay text."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write
from observetree import v2_tree

from harness.checks.observe import ObserveParams
from harness.checks.observer import Observer
from harness.model import RunRecord
from harness.report.prometheus import exposition, run_samples
from harness.series.stall import diagnose

SUITE = """\
name: observe-demo
checks:
  - id: step
    kind: observe
    params:
      command: [stress-ng, --cpu, "0", -t, "3", -q]
      interval: 0.5
    expect:
      - {metric: observe.share, labels: {resource: storage}, max: 0.5, unit: ratio}
      - {metric: observe.share, labels: {resource: cpu}, max: 0.1, unit: ratio}
  - id: failing-step
    kind: observe
    params:
      command: [sh, -c, "sleep 0.6; exit 3"]
      interval: 0.2
"""


def test_a_suite_step_under_observation_reaches_results_report_and_prometheus(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    r = harness("run", str(write(tmp_path / "s.yaml", SUITE)), "--output", str(out), "--history", "off")
    assert r.returncode == 1, r.stdout + r.stderr  # the cpu rule rejects: the step was cpu-bound
    run_dir = run_dirs(out)[0]
    doc = results(run_dir)
    step, failing = doc["checks"]
    assert step["status"] == "failed" and step["details"]["primary"] == "cpu"
    assert step["message"].startswith("cpu-bound: ")
    shares = {m["labels"]["resource"]: m["value"] for m in step["metrics"] if m["name"] == "observe.share"}
    assert set(shares) == {"storage", "cpu", "memory", "network", "shm"} and shares["cpu"] >= 0.5
    outcomes = {e["labels"]["resource"]: e["outcome"] for e in step["evaluations"]}
    assert outcomes == {"storage": "pass", "cpu": "fail"}
    primary = next(m for m in step["metrics"] if m["name"] == "observe.primary")
    assert primary["labels"] == {"resource": "cpu"}
    series = json.loads((run_dir / step["details"]["series"]["file"]).read_text())
    assert series["scope"] == "command" and len(series["ticks"]) >= 4
    assert step["tool_runs"][0]["argv"][0].endswith("stress-ng")
    # the observed work failing is no hardware verdict: the run is not valid
    assert failing["status"] == "errored"
    assert "exit 3: the observed work did not complete" in failing["problems"][0]

    html = (run_dir / "report.html").read_text()
    assert "What held the work back: cpu" in html and 'class="chart"' in html and "node CPUs busy" in html

    prom = exposition(run_samples(RunRecord.from_dict(doc), "node1"))
    assert 'harness_observe_share_ratio{check="step",node="node1",resource="cpu"}' in prom


def test_dry_run_shows_the_command_or_the_equivalent_observe_line(tmp_path: Path) -> None:
    suite = write(tmp_path / "s.yaml", "name: d\nchecks:\n  - id: node\n    kind: observe\n"
                  "    params: {duration: 90s, pids: [1]}\n")
    r = harness("run", str(suite), "--dry-run", "--output", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    assert "harness observe --duration 90 --interval 1 --pid 1" in r.stdout


@pytest.mark.parametrize("params, message", [
    ({"command": ["true"], "pids": [1]}, "not both"),
    ({"thresholds": {"nosuch": 1}}, "unknown observe threshold"),
    ({"interval": "10ms"}, "at least 0.05"),
    ({"command": []}, "at least 1"),
])
def test_params_a_careless_suite_could_write_are_refused(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ObserveParams.model_validate(params)


def test_a_cgroup_v2_cpu_max_quota_is_named_from_a_tree(tmp_path: Path) -> None:
    pid = 4242
    stat = Path("/proc/stat").read_text()
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "stat").write_text(stat)
    proc_stat = f"{pid} (python) R 1 {pid} {pid} 0 -1 0 0 0 0 0 {{cpu}} 0 0 0 20 0 1 0 777 0 100 0\n"
    (tmp_path / "proc" / str(pid)).mkdir()
    (tmp_path / "proc" / str(pid) / "stat").write_text(proc_stat.format(cpu=0))
    v2_tree(tmp_path, pid, 0, 0, 0, 0)
    obs = Observer((pid,), scope="command", root=tmp_path)
    obs.sample()
    for i in range(1, 4):  # three ticks: the job ran 0.5 CPU and was throttled in 9 of 10 periods
        time.sleep(0.1)
        v2_tree(tmp_path, pid, 50_000 * i, 10 * i, 9 * i, 45_000 * i)
        (tmp_path / "proc" / str(pid) / "stat").write_text(proc_stat.format(cpu=5 * i))
        obs.sample()
    w = obs.window(0.1)
    assert w.cgroup == "/job.slice/train" and w.quota_file == "cpu.max of /job.slice/train"
    assert w.ticks[-1].cg_throttled == pytest.approx(0.9) and w.ticks[-1].cg_quota == 0.5
    d = diagnose(w)
    assert d.primary == "cpu"
    assert "throttled by its cgroup quota of 0.5 CPUs (cpu.max of /job.slice/train): " \
        "stopped in 90% of periods" in d.verdict
    assert w.sources["cgroup"] == "ok" and w.sources["disks"] == "no /proc/diskstats"


def test_a_workload_moving_cgroups_gives_no_rate_across_the_move(tmp_path: Path) -> None:
    """A wrapper enters its cgroup and execs the job: the first tick must not subtract the root
    cgroup's counters from the new one's (that read as -805 MB/s once)."""
    from observetree import write

    def tree(where: str, read: int) -> None:
        write(tmp_path, {"proc/stat": Path("/proc/stat").read_text(),
                         "proc/9/stat": "9 (fio) D 1 9 9 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 555 0 10 0\n",
                         "proc/9/cgroup": f"2:blkio:{where}\n1:cpu:/\n",
                         f"sys/fs/cgroup/blkio{where}/blkio.throttle.io_service_bytes": f"7:0 Read {read}\n",
                         f"sys/fs/cgroup/blkio{where}/blkio.throttle.read_bps_device": "7:0 1000000\n",
                         "sys/fs/cgroup/cpu/cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n"})

    tree("/", 10**12)
    obs = Observer((9,), root=tmp_path)
    obs.sample()
    tree("/job", 0)
    time.sleep(0.05)
    obs.sample()
    tree("/job", 100_000)
    time.sleep(0.05)
    obs.sample()
    first, second = obs.window(0.05).ticks
    assert first.io == {} and second.io["7:0"].read_bps > 0
    assert obs.window(0.05).io_limit_file == "blkio.throttle.read_bps_device of /job"


def test_a_profile_sets_thresholds_and_the_suite_wins_by_name() -> None:
    from harness.checks.observe import KIND

    p = ObserveParams.model_validate({"thresholds": {"min_share": 0.5}})
    merged = KIND.with_profile(p, {"observe": {"min_share": 0.3, "disk_util": 0.8}})
    assert merged.thresholds == {"min_share": 0.5, "disk_util": 0.8}
    assert KIND.with_profile(p, {}) is p


def test_a_profile_with_observe_thresholds_validates(tmp_path: Path) -> None:
    prof = write(tmp_path / "site.yaml",
                 "name: site\nextends: generic\nhardware:\n  observe: {disk_util: 0.8}\n")
    r = harness("validate", str(prof))
    assert r.returncode == 0, r.stderr
