"""Acceptance, then quarterly, on one node through `harness run`: the quarterly suite's `vs: golive`
rules are judged against the acceptance run although its fio jobs run longer (a longer run measures
the same thing), and where go-live has no value the page says why. The suites are the shipped ones
cut to the checks this machine can run (inventory, real fio; NCCL on 8 fake H100s with a stand-in
all_reduce_perf printing real output), lengths shortened; the pairing of every other `vs: golive`
rule (GPU burn, H2D/D2H/P2P, RDMA) is held on the planned digests by tests/history/test_golive_pairs.py."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from clihelp import ROOT, harness, results, run_dirs, write
from pcisysfs import lines, write_tree

PROFILE = """\
name: lenient
hardware:
  memory_min_bytes: 1048576
expectations:
  - {metric: fio.iops, labels: {job: randread_4k, rw: read}, min: 10, unit: IOPS}
"""


KEEP = ("inventory", "fio-quick")


def cut(suite: str, runtime: int, keep: tuple[str, ...] = KEEP, **job_change: Any) -> str:
    """The shipped suite with only the checks in `keep`, fio jobs `runtime` s on 16 MiB files."""
    doc = yaml.safe_load((ROOT / "suites" / f"{suite}.yaml").read_text())
    doc["checks"] = [c for c in doc["checks"] if c["id"] in keep]
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


NCCL_H100 = ROOT / "tests" / "data" / "nccl-tests" / "all_reduce_h100_2node_16rank_oci.txt"
LAUNCH = ROOT / "tests" / "support" / "nodelaunch.py"


def gpu_run(tmp_path: Path, name: str, text: str, store: Path, bins: Path) -> dict[str, Any]:
    """`harness run` on 8 fake H100s (NVML and the PCI bus faked, tests/support/nodelaunch.py)."""
    spec = tmp_path / "node.json"
    if not spec.exists():
        pci = write_tree(tmp_path / "pci", lines())
        idle = {"name": "NVIDIA H100 80GB HBM3", "util": 0.0, "temp": 35.0}  # settled at once
        spec.write_text(json.dumps({"gpus": [idle] * 8, "pci_root": str(pci)}))
    out = tmp_path / name
    argv = [sys.executable, str(LAUNCH), str(spec), "run", str(write(tmp_path / f"{name}.yaml", text)),
            "--profile", str(write(tmp_path / "lenient.yaml", PROFILE)), "--output", str(out),
            "--history", str(store)]
    r = subprocess.run(argv, cwd=ROOT, text=True, capture_output=True, timeout=120,
                       env={**os.environ, "PATH": f"{bins}:{os.environ['PATH']}"})
    assert r.returncode == 0, r.stdout + r.stderr
    (run_dir,) = run_dirs(out)
    return results(run_dir)


def test_nccl_busbw_against_go_live_on_an_8_gpu_node(tmp_path: Path):
    """The shipped nccl checks of acceptance and quarterly pair: nccl.busbw vs go-live is judged."""
    bins = tmp_path / "bin"
    bins.mkdir()
    fake = bins / "all_reduce_perf"  # a stand-in printing a real 8 x H100 nccl-tests output
    fake.write_text(f'#!/bin/sh\ncat "{NCCL_H100}"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    store = tmp_path / "history.sqlite"
    keep = ("inventory", "nccl", "fio-quick")
    golive = gpu_run(tmp_path, "acceptance", cut("acceptance", 1, keep), store, bins)
    assert golive["verdict"] == "ACCEPTED", [(c["id"], c["status"], c.get("message"))
                                             for c in golive["checks"]]
    q = gpu_run(tmp_path, "quarterly", cut("quarterly", 2, keep), store, bins)
    drift = next(c for c in q["checks"] if c["kind"] == "drift")
    judged = [e for e in drift["evaluations"]
              if e["metric"] == "nccl.busbw" and e["labels"]["vs"] == "go-live"]
    assert judged and all(e["outcome"] == "pass" for e in judged), drift
    assert "since go-live" in judged[0]["message"]


def errors_suite(name: str, counter: Path, errors: int, tags: str = "", drift: str = "") -> str:
    """A suite whose one measuring check reads `errors` counted errors from `counter` (same parameters
    in every run: the series pair)."""
    counter.write_text(f"errors {errors}\n")
    return f"""\
name: {name}
{tags}checks:
  - id: inventory
    kind: inventory
  - id: app
    kind: command
    params:
      argv: [cat, "{counter}"]
      metrics:
        - {{name: app.errors, unit: count, better: lower, regex: 'errors (?P<value>[0-9]+)'}}
    expect:
      - {{metric: app.errors, reference: 0, upper: 5, unit: count}}
{drift}"""


def test_a_percent_limit_against_a_go_live_value_of_0_is_a_note_not_a_pass(tmp_path: Path):
    """A counter at 0 at go-live and at 3 a quarter later: `rise <= 50%` of 0 cannot be computed, so
    the rule says so (a note), where it used to pass ("reference is 0, percent limits do not
    apply"). A suite expectation with reference 0 keeps its tolerance absolute (<= 5 errors), and
    `harness compare` gives the pair no percent either."""
    store = tmp_path / "history.sqlite"
    counter = tmp_path / "counter"
    golive = run(tmp_path, "acceptance", errors_suite("acc", counter, 0, tags="tags: [acceptance]\n"), store)
    assert golive["verdict"] == "ACCEPTED"
    rules = ("drift:\n"
             "  - {metric: app.errors, check: app, vs: golive, max_rise_pct: 50, severity: fail}\n"
             "  - {metric: app.errors, vs: golive, max_growth: 2, severity: warn}\n")
    q = run(tmp_path, "quarterly", errors_suite("quarter", counter, 3, drift=rules), store)
    app = next(c for c in q["checks"] if c["id"] == "app")
    (own,) = app["evaluations"]
    assert (own["outcome"], own["low"], own["high"]) == ("pass", None, 5.0)  # absolute: <= 5 count
    drift = next(c for c in q["checks"] if c["kind"] == "drift")
    (grew,) = drift["evaluations"]  # the growth rule is judged; the percent rule is not
    assert (grew["outcome"], grew["reference"], grew["high"]) == ("warn", 0.0, 2.0), grew
    assert grew["message"].startswith("drifted: +3 count since go-live"), grew["message"]
    assert "app/app.errors: no reference to compare with (go-live value is 0)" in drift["details"]["notes"]
    assert drift["status"] == "warned" and q["verdict"] == "ACCEPTED"  # a warning, nothing failed
    (a,), (b,) = run_dirs(tmp_path / "acceptance"), run_dirs(tmp_path / "quarterly")
    r = harness("compare", str(a), str(b), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = [row for row in json.loads(r.stdout)["rows"] if row["metric"] == "app.errors"]
    assert (row["a"], row["b"], row["delta_pct"]) == (0.0, 3.0, None)
