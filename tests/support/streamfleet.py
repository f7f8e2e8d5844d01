"""A fleet of n nodes for the streaming and pool tests: runs with a recorded check and repeated
values (one slow node, one failed), a job that died, one pending, an unreadable results.json and
two hand-edited ones; and the outputs a fleet report writes of it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from fleet_samples import record

from harness import results
from harness.fleet import collect, commands, layout
from harness.fleet import report as fleet_report
from harness.fleet.layout import Manifest, NodeJob, SeenJob
from harness.fleet.slurmtext import JobInfo
from harness.model import CheckResult, Metric, RunRecord, Status
from harness.report import prometheus as prom


def _extra(rec: RunRecord, i: int) -> RunRecord:
    """A recorded check (its junit case counts its metrics) and a metric repeated three times."""
    reps = [Metric("app.lat", 10.0 + i % 4 + r * 0.5, "us", {"repeat": r, "size": 4096}) for r in range(3)]
    rec_check = CheckResult("ckpt", "fio", Status.RECORDED, "wrote 1 GiB", "2026-11-29T10:00:02Z", 1.0,
                            (Metric("ckpt.bw", 2.0 + i / 100, "GB/s", {"job": "w&r"}), *reps))
    return replace(rec, checks=(*rec.checks, rec_check))


def make_fleet(root: Path, n: int) -> None:
    """n nodes with runs (one slow, one failed), one whose job died, one pending, one unreadable."""
    nodes = [f"n{i:03d}" for i in range(n)]
    for i, nd in enumerate(nodes):
        bw = 30.0 if i == 7 else 60.0 if i == 3 else 100.0 + i % 5
        d = layout.node_dir(root, nd) / f"{nd}-20261129T100000Z"
        d.mkdir(parents=True)
        results.write(d, _extra(record(nd, bw, cpus=64 + i % 2), i))
    extra = ["gone", "waiting", "broken", "odd", "nounit"]
    bad = layout.node_dir(root, "broken") / "broken-20261129T100000Z"
    bad.mkdir(parents=True)
    (bad / "results.json").write_text('{"format_version": 1, "checks": [{"id": 1}]}')
    for nd, edit in (("odd", _odd), ("nounit", _no_unit)):  # hand-edited files: refused alike both ways
        d = layout.node_dir(root, nd) / f"{nd}-20261129T100000Z"
        d.mkdir(parents=True)
        results.write(d, record(nd, 101.0))
        doc = json.loads((d / "results.json").read_text())
        edit(doc["checks"][1]["metrics"][0])
        (d / "results.json").write_text(json.dumps(doc))
    jobs = {nd: NodeJob(nd, str(100 + i)) for i, nd in enumerate([*nodes, *extra])}
    done = {nd: SeenJob(JobInfo(jobs[nd].job_id or "", "FAILED" if nd == "n007" else "COMPLETED", "", nd,
                                "h", 0, 0), "2026-11-29T10:31:00Z") for nd in [*nodes, *extra[2:]]}
    done["gone"] = SeenJob(JobInfo(jobs["gone"].job_id or "", "NODE_FAIL", "", "gone", "h", 1, 0), "t")
    done["waiting"] = SeenJob(JobInfo(jobs["waiting"].job_id or "", "PENDING", "Priority", "", "h", None, 0),
                              "t")
    layout.save_manifest(root, Manifest("/s.yaml", "stream", None, (*nodes, *extra), "2026-11-29T10:00:00Z",
                                        jobs))
    layout.save_jobs(root, done)


def _odd(metric: dict[str, Any]) -> None:
    """Labels as a list of pairs with a nested value, the value as text: the schema refuses the labels."""
    metric["labels"] = [["gpu", 0], ["path", {"a": [1, 2]}]]
    metric["value"] = "101.5"


def _no_unit(metric: dict[str, Any]) -> None:
    del metric["unit"]


def full_load_run(run_dir: Path) -> tuple[RunRecord | None, list[Any], str]:
    """The reference: whole records, as `load_record` builds them."""
    rec, why = collect.load_record(run_dir)
    return rec, collect.record_metrics(rec) if rec is not None else [], why


def report_outputs(root: Path, out: Path) -> dict[str, str]:
    rep = commands.analyse_dir(root, poll=False)
    out.mkdir()
    paths = fleet_report.write(out, rep)
    texts = {k: p.read_text() for k, p in paths.items()}
    texts["prom"] = prom.exposition([s for n in rep.nodes for s in fleet_report.fleet_samples(rep, n.node)])
    return texts
