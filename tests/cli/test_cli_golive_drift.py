"""Acceptance, then quarterly, on one node through `harness run`: the quarterly suite's `vs: golive`
rules are judged against the acceptance run although its fio jobs run longer (a longer run measures
the same thing), and where go-live has no value the page says why. The suites are the shipped ones
cut to the checks this machine can run for real (inventory, fio) with shorter runtimes; the GPU,
NCCL and RDMA rules' pairing is held by tests/history/test_golive_pairs.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from clihelp import ROOT, harness, results, run_dirs, write

PROFILE = """\
name: lenient
hardware:
  memory_min_bytes: 1048576
expectations:
  - {metric: fio.iops, labels: {job: randread_4k, rw: read}, min: 10, unit: IOPS}
"""


def cut(suite: str, runtime: int, **job_change: Any) -> str:
    """The shipped suite with only inventory and fio-quick, fio jobs `runtime` s on 16 MiB files."""
    doc = yaml.safe_load((ROOT / "suites" / f"{suite}.yaml").read_text())
    doc["checks"] = [c for c in doc["checks"] if c["id"] in ("inventory", "fio-quick")]
    fio = next(c for c in doc["checks"] if c["id"] == "fio-quick")
    fio["params"]["jobs"] = [{**j, "runtime": runtime, "size": "16M", "iodepth": 4,
                              **(job_change if j["name"] == "seqread_1m" else {})}
                             for j in fio["params"]["jobs"]]
    return yaml.safe_dump(doc, sort_keys=False)


def run(tmp_path: Path, name: str, text: str, store: Path) -> dict[str, Any]:
    out = tmp_path / name
    r = harness("run", str(write(tmp_path / f"{name}.yaml", text)), "--profile",
                str(write(tmp_path / "lenient.yaml", PROFILE)), "--output", str(out), "--history", str(store),
                timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    (run_dir,) = run_dirs(out)
    doc = results(run_dir)
    doc["_html"] = (run_dir / "report.html").read_text()
    return doc


def test_quarterly_judges_every_golive_rule_against_the_acceptance_run(tmp_path: Path):
    store = tmp_path / "history.sqlite"
    golive = run(tmp_path, "acceptance", cut("acceptance", 1), store)
    assert golive["verdict"] == "ACCEPTED"
    q = run(tmp_path, "quarterly", cut("quarterly", 2), store)
    assert q["history"]["golive"]["run_id"] == golive["run_id"]
    drift = next(c for c in q["checks"] if c["kind"] == "drift")
    judged = {(e["metric"], e["labels"]["job"]) for e in drift["evaluations"]
              if e["labels"]["vs"] == "go-live"}
    jobs = {"randread_4k", "randwrite_4k", "seqread_1m", "seqwrite_1m"}
    assert judged == {(m, j) for m in ("fio.iops", "fio.bw") for j in jobs}, drift.get("details")
    notes = drift["details"].get("notes", [])
    assert not [n for n in notes if "fio-quick" in n and "go-live" in n], notes  # all paired with go-live
    # the rules this machine cannot measure say so; none says the go-live lacks a value
    assert any(n.startswith("nccl.busbw: no such metric measured in this run") for n in notes)
    assert all(t["golive"] is not None for t in q["history"]["trends"] if t["check"] == "fio-quick")


def test_where_go_live_has_no_value_the_page_says_why(tmp_path: Path):
    store = tmp_path / "history.sqlite"
    run(tmp_path, "acceptance", cut("acceptance", 1), store)
    q = run(tmp_path, "quarterly", cut("quarterly", 1, bs="2M"), store)  # another block size
    why = "ran check fio-quick with parameters that measure something else"
    drift = next(c for c in q["checks"] if c["kind"] == "drift")
    assert any(why in n for n in drift["details"]["notes"]), drift["details"]
    trend = next(t for t in q["history"]["trends"] if t["check"] == "fio-quick")
    assert trend["golive"] is None and why in trend["golive_missing"]
    html = q["_html"]
    assert "Not compared with an earlier run" in html and why in html
    assert 'class="golive-why"' in html
    json.dumps(q["history"])  # plain JSON
