"""Node verdicts from scheduler state + run results, the fleet analysis and its JSON/JUnit outputs,
the resume rule, and the batch script run by real bash (no Slurm needed here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fleet_samples import outcome, record

from harness.fleet import dispatch
from harness.fleet.analysis import analyse
from harness.fleet.collect import NodeStatus, judge
from harness.fleet.drain import resume_plan
from harness.fleet.layout import NodeJob, SeenJob
from harness.fleet.report import fleet_dict, render_junit
from harness.fleet.slurmtext import JobInfo, parse_sinfo_nodes
from harness.model import Status

DATA = Path(__file__).parents[1] / "data" / "slurm"


def seen(state: str, reason: str = "", exit_code: int | None = 0, note: str = "") -> SeenJob:
    job = JobInfo("42", state, reason, "n1", "harness-n1", exit_code, 0)
    return SeenJob(job, "2026-11-29T10:00:09Z", note)


JOB = NodeJob("n1", "42")


def test_an_accepted_run_of_a_completed_job_is_accepted():
    o = judge("n1", JOB, seen("COMPLETED"), {"rc": 0}, record("n1", 100.0), "nodes/n1/r")
    assert o.status is NodeStatus.ACCEPTED and o.reason == "all checks passed" and o.drain_reason == ""
    assert o.sku == "AMD EPYC, 2 CPUs, no GPU" and o.run_dir == "nodes/n1/r"


def test_a_failed_check_rejects_with_evidence_and_a_drain_reason():
    # harness exits 1 for a rejected node: Slurm calls the job FAILED, the node still reported
    o = judge("n1", JOB, seen("FAILED", "NonZeroExitCode", 1), {"rc": 1}, record("n1", 20.0))
    assert o.status is NodeStatus.REJECTED
    (ev,) = o.evidence
    assert (ev.check, ev.what, ev.kind) == ("app", "app.bw{gpu=0}", "failed")
    assert ev.detail.startswith("measured 20 GB/s, expected >= 50 GB/s")
    assert o.drain_reason == "harness: app app.bw{gpu=0} measured 20 GB/s, expected >= 50 GB/s"
    assert o.reason.startswith("app failed: app.bw{gpu=0} measured 20 GB/s")


def test_drain_reason_is_bounded():
    o = judge("n1", JOB, seen("FAILED", "", 1), None, record("n1", 1e-9 * 3.14159265358979))
    assert o.drain_reason.startswith("harness: app ") and len(o.drain_reason) <= 120


def test_an_errored_check_is_not_a_hardware_verdict():
    o = judge("n1", JOB, seen("FAILED", "", 1), {"rc": 1}, record("n1", 100.0, check_status=Status.ERRORED))
    assert o.status is NodeStatus.ERRORED
    assert o.reason == "app errored: errored: tool crashed"
    # drained only by --drain-unfit, with its own reason (issue #25 item 5)
    assert o.drain_reason.startswith("harness: ERRORED app ")


@pytest.mark.parametrize(("state", "reason", "rc", "expect"), [
    ("TIMEOUT", "TimeLimit", 0, "job 42 ended TIMEOUT (TimeLimit)"),
    ("NODE_FAIL", "", 0, "job 42 ended NODE_FAIL"),
    ("FAILED", "NonZeroExitCode", 127, "job 42 ended FAILED (NonZeroExitCode, exit 127)"),
])
def test_a_job_that_died_errors_with_the_schedulers_words(state, reason, rc, expect):
    partial = record("n1", 100.0, finished=False)
    o = judge("n1", JOB, seen(state, reason, rc), None, partial, output_tail="x\npython: not found\n")
    assert o.status is NodeStatus.ERRORED and o.reason.startswith(expect)
    assert "the run is incomplete" in o.reason and o.reason.endswith("last output: python: not found")
    assert o.evidence[0].check == "slurm-job" and o.record is partial


def test_pending_running_and_never_started():
    assert judge("n1", JOB, seen("PENDING", "Priority"), None, None).status is NodeStatus.PENDING
    r = judge("n1", JOB, seen("RUNNING"), None, None)
    assert r.status is NodeStatus.RUNNING and r.reason == "job 42 RUNNING"
    note = "never started: still PENDING (ReqNodeNotAvail) after 60 s; cancelled by harness"
    o = judge("n1", JOB, seen("CANCELLED", "", 0, note), None, None)
    assert o.status is NodeStatus.ERRORED and o.reason == note + "; it left no results"


def test_a_refused_submission_and_a_forgotten_job():
    o = judge("n9", NodeJob("n9", None, "sbatch refused: Invalid node name specified"), None, None, None)
    assert o.status is NodeStatus.ERRORED and o.reason == "sbatch refused: Invalid node name specified"
    gone = seen("GONE", "no longer known to Slurm", None)
    o = judge("n1", JOB, gone, {"rc": 1}, None)
    assert o.status is NodeStatus.ERRORED and "exit file says harness exited 1" in o.reason
    assert judge("n1", JOB, gone, {"rc": 0}, record("n1", 100.0)).status is NodeStatus.ACCEPTED


def test_resume_plan_resumes_only_harness_drains():
    nodes = parse_sinfo_nodes((DATA / "sinfo-nodes-harness-drains.txt").read_text())
    plan = {n: (what, why) for n, what, why in resume_plan(nodes, ["n1", "n2", "n3", "n4", "n9"])}
    assert plan["n1"][0] == "resume" and plan["n3"][0] == "resume"
    assert plan["n4"] == ("keep", "drained by someone else: operator: bad fan")
    assert plan["n2"] == ("keep", "not drained (idle)") and plan["n9"] == ("keep", "not known to Slurm")


def fleet():
    outs = [outcome(f"n{i}", record(f"n{i}", 100.0 + (i % 3) * 0.5)) for i in range(1, 9)]
    outs[1] = outcome("n2", record("n2", 60.0))  # passes its >= 50 floor, far below its siblings
    outs[2] = outcome("n3", record("n3", 100.0, errors=3))  # fails
    outs.append(outcome("n10", None, NodeStatus.ERRORED, "job 9 ended TIMEOUT (TimeLimit)"))
    return analyse(outs, suite="fleet-test", profile="lenient", submitted="2026-11-29T10:00:00Z",
                   generated="2026-11-29T10:05:00Z")


def test_fleet_verdict_order_drain_list_and_outlier():
    rep = fleet()
    assert rep.verdict == "REJECTED"
    assert [n.node for n in rep.nodes][:3] == ["n3", "n10", "n2"]  # rejected, errored, then the outlier
    assert rep.counts == {"ACCEPTED": 7, "REJECTED": 1, "ERRORED": 1, "INCOMPLETE": 0, "UNTESTED": 0,
                          "PENDING": 0, "RUNNING": 0}
    assert [n.node for n in rep.to_drain] == ["n3"]
    assert {(o.node, o.key.metric, o.better) for o in rep.outliers} == {
        ("n2", "app.bw", "higher"),  # passed its floor, yet far below its siblings
        ("n3", "app.errors", "lower")}  # the rejected node is also far from the fleet
    bw = next(o for o in rep.outliers if o.node == "n2")
    assert bw.key.labels == (("gpu", "0"),) and rep.better[bw.key] == "higher"  # implied by the min


def test_fleet_json_is_plain_json():
    doc = json.loads(json.dumps(fleet_dict(fleet()), allow_nan=False))
    assert doc["verdict"] == "REJECTED" and doc["nodes_total"] == 9
    assert doc["drain"] == [{"node": "n3", "reason": "harness: app app.errors measured 3, expected <= 0"}]
    assert sorted(doc["outlier_nodes"]) == ["n2", "n3"]
    assert next(o for o in doc["outliers"] if o["node"] == "n2")["deviation_pct"] < -39
    n2 = next(n for n in doc["nodes"] if n["node"] == "n2")
    assert n2["status"] == "ACCEPTED" and n2["outliers"][0]["metric"] == "app.bw"


def test_junit_has_a_testsuite_per_node():
    root = ET.fromstring(render_junit(fleet()))
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {f"n{i}" for i in range(1, 9)} | {"n10"}
    assert suites["n3"].get("failures") == "1" and suites["n1"].get("failures") == "0"
    job = suites["n10"].find("testcase[@name='job']/error")
    assert job is not None and "TIMEOUT" in job.get("message", "")
    assert root.get("errors") == str(sum(int(s.get("errors", "0")) for s in suites.values()))
    props = {p.get("name"): p.get("value") for p in suites["n3"].iter("property")}
    assert props["node_status"] == "REJECTED"


def test_fleet_junit_testcases_are_distinct_per_node():
    """GitLab merges testcases sharing (classname, name): 4 nodes x 3 cases must stay 12."""
    outs = [outcome(f"gpu{i:03d}", record(f"gpu{i:03d}", 100.0)) for i in range(1, 5)]
    rep = analyse(outs, suite="s", profile="p", submitted="2026-11-29T10:00:00Z",
                  generated="2026-11-29T10:05:00Z")
    root = ET.fromstring(render_junit(rep))
    cases = [(c.get("classname"), c.get("name")) for c in root.iter("testcase")]
    assert len(cases) == 12 and len(set(cases)) == 12
    assert ("gpu003.app", "app.bw{gpu=0}") in cases and ("gpu001.inventory", "run") in cases
    assert root.get("tests") == "12"


def test_fleet_junit_job_case_carries_its_node():
    root = ET.fromstring(render_junit(fleet()))
    job = [(c.get("classname"), c.get("name")) for c in root.iter("testcase") if c.get("name") == "job"]
    assert job == [("n10.slurm", "job")]


def test_sbatch_argv_pins_the_node_and_passes_options_verbatim(tmp_path: Path):
    opts = dispatch.JobOptions("/s.yaml", partition="gpu", account="ops", time_limit="30:00")
    argv = dispatch.sbatch_argv("gpu001", tmp_path, tmp_path / "job.sh", opts)
    assert argv[:2] == ["sbatch", "--parsable"] and argv[-1] == str(tmp_path / "job.sh")
    for a in ("--nodelist=gpu001", "--exclusive", "--no-requeue", "--nodes=1", "--partition=gpu",
              "--account=ops", "--time=30:00", f"--output={tmp_path}/slurm-%j.out"):
        assert a in argv


def test_nodes_expand_and_fold_through_nodeset():
    assert dispatch.expand_nodes("gpu[001-003],login1") == ["gpu001", "gpu002", "gpu003", "login1"]
    assert dispatch.fold_nodes(["n1", "n2", "n3", "n5"]) == "n[1-3,5]"
    from harness.errors import UsageError

    with pytest.raises(UsageError):
        dispatch.expand_nodes("gpu[001-")


def test_the_batch_script_quotes_every_value(tmp_path: Path):
    """Run the generated script with real bash; a fake 'python' records what it was given."""
    node_dir = tmp_path / "it's a \"dir\" with $HOME and `spaces`"
    node_dir.mkdir()
    record_file = tmp_path / "argv.json"
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexec " + sys.executable + " -c 'import json,os,sys; json.dump("
                    "{\"argv\": sys.argv[1:], \"lock\": os.environ.get(\"HARNESS_LOCK_FILE\"), "
                    "\"cwd\": os.getcwd(), \"pp\": os.environ.get(\"PYTHONPATH\")}, "
                    "open(os.environ[\"FAKE_OUT\"], \"w\")); sys.exit(1)' \"$@\"\n")
    fake.chmod(0o755)
    opts = dispatch.JobOptions("/suites/a b;rm -rf x.yaml", profile="p$(id)", python=str(fake),
                               history="/shared/h $(id).sqlite")
    script = node_dir / "job.sh"
    script.write_text(dispatch.job_script("n1", node_dir, opts))
    env = {"PATH": os.environ["PATH"], "SLURMD_NODENAME": "n1", "SLURM_JOB_ID": "77",
           "HARNESS_LOCK_FILE": str(tmp_path / "harness-{node}.lock"), "FAKE_OUT": str(record_file)}
    r = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    got = json.loads(record_file.read_text())
    root = str(Path(dispatch.__file__).resolve().parents[2])
    boot = f"import sys; sys.path.insert(0, {root!r}); from harness.cli.start import main; main()"
    assert got["argv"] == ["-I", "-c", boot, "run", "/suites/a b;rm -rf x.yaml", "--output", str(node_dir),
                           "--profile", "p$(id)", "--history", "/shared/h $(id).sqlite"]
    # isolated, from outside the fleet directory: no PYTHONPATH of its own (-I would ignore one)
    assert got["lock"] == str(tmp_path / "harness-n1.lock") and got["cwd"] == "/" and got["pp"] is None
    assert json.loads((node_dir / "job-exit.json").read_text())["rc"] == 1
    assert json.loads((node_dir / "job-exit.json").read_text())["job_id"] == "77"
    r = subprocess.run(["bash", str(script)], env={**env, "SLURMD_NODENAME": "n2"}, capture_output=True,
                       text=True, timeout=60)
    assert "this job is for n1 but runs on n2" in r.stderr


def test_an_unreadable_results_file_is_named_in_the_reason(tmp_path: Path):
    from harness.fleet.collect import load_record

    (tmp_path / "results.json").write_text('{"format_version": 1, "run_id": ')
    record, problem = load_record(tmp_path)
    assert record is None and problem.startswith(f"{tmp_path / 'results.json'}: unreadable: JSONDecodeError")
    o = judge("n1", JOB, seen("COMPLETED"), {"rc": 0}, None, results_problem=problem)
    assert o.status is NodeStatus.ERRORED and o.reason.endswith(problem)
    (tmp_path / "results.json").write_text('{"format_version": 99}')
    why = f"{tmp_path / 'results.json'}: format_version: 99 is not supported (this harness reads 1)"
    assert load_record(tmp_path) == (None, why)


def test_plain_progress_prints_each_transition_once():
    import io

    from harness.fleet.progress import PlainFleetProgress, bucket

    buf = io.StringIO()
    prog = PlainFleetProgress(2, buf)
    a = {"n1": seen("PENDING", "Priority")}
    prog.update(a)
    prog.update(a)  # nothing changed: nothing printed
    prog.update({"n1": seen("RUNNING"), "n2": seen("FAILED", "NonZeroExitCode", 1)})
    lines = [ln[9:] for ln in buf.getvalue().splitlines()]
    assert lines == ["  n1: job 42 PENDING (Priority)", "2 node(s): 2 pending, 0 running, 0 done, 0 failed",
                     "  n1: job 42 RUNNING", "  n2: job 42 FAILED (NonZeroExitCode, exit 1)",
                     "2 node(s): 0 pending, 1 running, 1 done, 0 failed"]
    assert bucket(seen("FAILED", "", 1)) == "done"  # harness said REJECTED: the node reported
    assert bucket(seen("FAILED", "", 127)) == "failed" and bucket(seen("TIMEOUT", "TimeLimit")) == "failed"
