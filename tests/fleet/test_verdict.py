"""Fleet nodes that judged nothing are UNTESTED, and every node's reason names the checks that did
not simply pass (issue #20): the pure judge, the fleet verdict, and `harness fleet` on real runs."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from clihelp import harness, write
from fleet_samples import outcome, record

from harness.fleet import layout
from harness.fleet.analysis import analyse
from harness.fleet.collect import REASON_CHECKS, NodeStatus, judge, reason_of
from harness.fleet.html import render_html
from harness.fleet.layout import Manifest, NodeJob, SeenJob
from harness.fleet.progress import bucket
from harness.fleet.slurmtext import JobInfo
from harness.model import CheckResult, RunRecord, Status

JOB = NodeJob("n1", "42")


def seen(state: str = "COMPLETED", rc: int | None = 0) -> SeenJob:
    return SeenJob(JobInfo("42", state, "", "n1", "harness-n1", rc, 0), "2026-11-29T10:00:09Z")


def with_checks(rec: RunRecord, *extra: CheckResult) -> RunRecord:
    return replace(rec, checks=(*rec.checks, *extra))


SKIP = CheckResult("nvme-health", "nvme_health", Status.SKIPPED, "no NVMe devices")
WARN = CheckResult("gpu-burn", "gpu_burn", Status.WARNED, "GPU 3 ran hot")
RECORDED = CheckResult("ckpt", "fio", Status.RECORDED, "wrote 1 GiB")


def test_accepted_with_warned_and_skipped_checks_says_so():
    o = judge("n1", JOB, seen(), {"rc": 0}, with_checks(record("n1", 100.0), WARN, SKIP, RECORDED))
    assert o.status is NodeStatus.ACCEPTED
    assert o.reason == ("2 passed; warned: gpu-burn; skipped: nvme-health (no NVMe devices); "
                        "recorded, not judged: ckpt")
    assert "all checks passed" not in o.reason
    clean = judge("n1", JOB, seen(), {"rc": 0}, record("n1", 100.0))
    assert clean.reason == "all checks passed"


def test_a_node_whose_checks_all_skipped_is_untested_not_accepted():
    rec = replace(record("n1", 100.0), checks=(SKIP, replace(SKIP, id="md-raid", message="no md arrays")))
    o = judge("n1", JOB, seen("FAILED", 4), {"rc": 4}, rec)
    assert o.status is NodeStatus.UNTESTED  # nothing measured badly: drained by --drain-unfit only
    assert o.drain_reason == ("harness: UNTESTED no check judged anything (2 skipped); skipped: "
                              "nvme-health (no NVMe devices), md-raid (no md arrays)")[:120].rstrip()
    assert o.reason == ("no check judged anything (2 skipped); skipped: nvme-health (no NVMe devices), "
                        "md-raid (no md arrays)")


def test_an_expected_skip_is_named_once():
    exp = replace(SKIP, expected_by="profile sku (hardware) expects it: nvme.count >= 4 count")
    o = judge("n1", JOB, seen("FAILED", 4), {"rc": 4}, with_checks(record("n1", 100.0), exp, WARN))
    assert o.status is NodeStatus.UNTESTED
    assert o.reason == ("nvme-health skipped (no NVMe devices), but profile sku (hardware) expects it: "
                        "nvme.count >= 4 count; warned: gpu-burn")


def test_rejected_and_errored_reasons_name_the_other_checks():
    errored = CheckResult("ib", "rdma", Status.ERRORED, "ib_write_bw not found")
    o = judge("n1", JOB, seen("FAILED", 1), {"rc": 1}, with_checks(record("n1", 20.0), errored, SKIP))
    assert o.status is NodeStatus.REJECTED
    assert o.reason.startswith("app failed: app.bw{gpu=0} measured 20 GB/s")
    assert o.reason.endswith("; errored: ib; skipped: nvme-health (no NVMe devices)")
    o = judge("n1", JOB, seen("FAILED", 3), {"rc": 3}, with_checks(record("n1", 100.0), errored, WARN))
    assert o.status is NodeStatus.ERRORED
    assert o.reason == "ib errored: ib_write_bw not found; warned: gpu-burn"


def test_a_long_or_hostile_list_stays_one_bounded_line():
    many = [replace(SKIP, id=f"s{i}", message="why\n" + "x" * 500) for i in range(REASON_CHECKS + 3)]
    rec = with_checks(record("n1", 100.0), *many)
    reason = reason_of(rec, NodeStatus.ACCEPTED, ())
    assert "\n" not in reason and reason.endswith(" and 3 more") and len(reason) < 1000


def test_the_fleet_verdict_ranks_untested_below_incomplete_and_above_accepted():
    rec = record("n1", 100.0)
    untested = replace(rec, checks=(SKIP,))
    nodes = [outcome("a1", rec), outcome("u1", untested)]
    rep = analyse(nodes, suite="s", profile="p", submitted="", generated="")
    assert rep.verdict == "UNTESTED" and [n.node for n in rep.nodes] == ["u1", "a1"]
    assert rep.counts["UNTESTED"] == 1 and rep.to_drain == []
    rep = analyse([*nodes, outcome("p1", None, NodeStatus.PENDING, "waiting")], suite="s", profile="p",
                  submitted="", generated="")
    assert rep.verdict == "INCOMPLETE"  # a node without a verdict yet outranks an untested one
    assert analyse([], suite="s", profile="p", submitted="", generated="").verdict == "UNTESTED"
    html = render_html(analyse(nodes, suite="s", profile="p", submitted="", generated=""))
    assert '<div class="banner UNTESTED">' in html and "Untested nodes (1)" in html


def test_a_job_that_exited_4_reported_its_node():
    assert bucket(seen("FAILED", 4)) == "done" and bucket(seen("FAILED", 2)) == "failed"


# ------------------------------------------------------------------ the CLI, on real runs

SUITE = """\
name: mixed
checks:
  - id: inventory
    kind: inventory
  - id: gpu-probe
    kind: command
    needs: [gpu]
    params: {argv: [nvidia-smi]}
  - id: hot
    kind: command
    params:
      argv: [/bin/echo, "temp 90"]
      metrics: [{name: app.temp, unit: C, regex: "temp (?P<value>[0-9]+)"}]
    expect: [{metric: app.temp, max: 80, unit: C, severity: warn}]
"""


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU")
def test_fleet_status_and_report_name_skipped_and_warned_checks(tmp_path: Path):
    fleet = tmp_path / "fleet"
    suite = write(tmp_path / "mixed.yaml", SUITE)
    profile = write(tmp_path / "p.yaml", "name: p\nhardware: {memory_min_bytes: 1048576}\n")
    env = {"HARNESS_LOCK_FILE": str(tmp_path / "run.lock"), "HARNESS_HISTORY": "off"}
    runs = {"n1": ("--only", "gpu-probe"), "n2": ()}  # n1: everything skipped; n2: passed, warned, skipped
    for node, only in runs.items():
        r = harness("run", str(suite), *only, "--profile", str(profile), "--output",
                    str(layout.node_dir(fleet, node)), env=env)
        assert r.returncode == (4 if only else 0), r.stdout + r.stderr
    jobs = {n: NodeJob(n, str(i)) for i, n in enumerate(runs, 1)}
    layout.save_manifest(fleet, Manifest(str(suite), "mixed", str(profile), tuple(runs),
                                         "2026-11-29T10:00:00Z", jobs))
    layout.save_jobs(fleet, {  # as Slurm left them: harness's exit status is the job's
        "n1": SeenJob(JobInfo("1", "FAILED", "NonZeroExitCode", "n1", "h", 4, 0), "2026-11-29T10:01:00Z"),
        "n2": SeenJob(JobInfo("2", "COMPLETED", "", "n2", "h", 0, 0), "2026-11-29T10:01:00Z")})
    st = harness("fleet", "status", str(fleet))
    assert st.returncode == 4, st.stdout + st.stderr
    lines = {ln.split()[0]: ln for ln in st.stdout.splitlines() if ln.startswith("n")}
    assert " UNTESTED " in lines["n1"]
    # --only left out inventory, which the profile's hardware block expects (host.memory)
    assert "no check judged anything (1 skipped); inventory left out by --only, but profile" in lines["n1"]
    assert "; skipped: gpu-probe (no NVIDIA GPU" in lines["n1"]
    assert " ACCEPTED " in lines["n2"] and "all checks passed" not in lines["n2"]
    assert "1 passed; warned: hot; skipped: gpu-probe (no NVIDIA GPU" in lines["n2"]
    rep = harness("fleet", "report", str(fleet))
    assert rep.returncode == 4 and rep.stdout.startswith("UNTESTED: 2 node(s): 1 accepted, 1 untested;")
    doc = json.loads((fleet / "fleet.json").read_text())
    assert doc["verdict"] == "UNTESTED" and doc["counts"]["UNTESTED"] == 1 and doc["drain"] == []
    reasons = {n["node"]: n["reason"] for n in doc["nodes"]}
    assert reasons["n2"].startswith("1 passed; warned: hot; skipped: gpu-probe (")
    assert "Untested nodes (1)" in (fleet / "fleet.html").read_text()
