"""Issue #25 item 1: checks left out by --only/--skip that the profile or an acceptance suite expects
make the run UNTESTED (exit 4), never ACCEPTED; results.json, the --quiet line, JUnit and page 1 of
report.html name what was left out and by which option. Driven through the CLI on 8 fake H100s
(fake NVML, the PCI bus of a real HGX H100 capture)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml
from clihelp import ROOT, harness, results, run_dirs, write
from faulthelp import procs_with, start, wait_for
from pcisysfs import gpu_addresses, lines, write_tree

LAUNCH = Path(__file__).parents[1] / "support" / "nodelaunch.py"
H100 = "NVIDIA H100 80GB HBM3"
ACCEPTANCE = [c["id"] for c in yaml.safe_load((ROOT / "suites" / "acceptance.yaml").read_text())["checks"]]
KEPT = ("inventory", "gpu-health")  # what runs here on fake GPUs in a second
# the issue's --skip gpu-burn,dcgm-diag,power-headroom,ib-ports-start,ib-ports, and the rest too
SKIPPED = [i for i in ACCEPTANCE if i not in KEPT]


# the H100 profile but for its host memory floor (1 TiB): this test machine is a small VM
PROFILE = "name: h100-vm\nextends: h100-sxm-8x\nhardware: {memory_min_bytes: 1048576}\n"


def node(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    root = write_tree(tmp_path / "devices", lines())
    args = (*args, "--profile", str(write(tmp_path / "h100-vm.yaml", PROFILE)))
    spec = write(tmp_path / "scenario.json", json.dumps(
        {"gpus": [{"name": H100}] * 8, "bus_ids": [a[4:] for a in gpu_addresses()], "pci_root": str(root)}))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(LAUNCH), str(spec), "run", *args, "--output", str(out)],
                       cwd=ROOT, text=True, capture_output=True, timeout=180, env={**os.environ})
    (run_dir,) = run_dirs(out)
    return r, run_dir


def by_id(rec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {lo["id"]: lo for lo in rec["left_out"]}


def test_acceptance_with_the_burns_skipped_is_untested_and_says_what_was_left_out(tmp_path: Path):
    """`--skip gpu-burn,...` of the acceptance suite used to be ACCEPTED, exit 0, "0 skipped"."""
    assert {"gpu-burn", "dcgm-diag", "power-headroom", "ib-ports-start", "ib-ports"} <= set(SKIPPED)
    r, run_dir = node(tmp_path, "acceptance", "--skip", ",".join(SKIPPED))
    assert r.returncode == 4, r.stdout + r.stderr
    rec = results(run_dir)
    assert rec["verdict"] == "UNTESTED"
    assert [c["id"] for c in rec["checks"]] == ["inventory", "gpu-health"]
    left = by_id(rec)
    assert list(left) == SKIPPED
    assert {lo["option"] for lo in left.values()} == {"--skip"}
    # the profile's hardware block wants 8 HCAs: ib-ports measures them
    assert left["ib-ports"]["expected_by"].startswith("profile h100-vm (hardware) expects it: "
                                                      "ib.hca_count >= 8")
    # nothing in the profile names dcgm-diag: the acceptance suite's every check gates go-live
    assert left["dcgm-diag"]["expected_by"] == "suite acceptance is an acceptance suite: every check " \
                                               "of it gates go-live"
    assert "UNTESTED dcgm-diag left out by --skip, but suite acceptance is an acceptance suite" in r.stdout
    # JUnit: a skipped case per check left out, naming the option; the verdict case errors
    junit = ET.parse(run_dir / "junit.xml").getroot()
    skipped = {c.get("classname"): c.find("skipped") for c in junit.iter("testcase")
               if c.find("skipped") is not None}
    burn = skipped["gpu-burn"]
    assert burn is not None and burn.get("message", "").startswith("gpu-burn left out by --skip, but ")
    verdict = next(c for c in junit.iter("testcase") if c.get("name") == "verdict")
    error = verdict.find("error")
    assert error is not None and "power-headroom left out by --skip" in error.get("message", "")
    # page 1 of the report (before the check list) names them and the option
    page = (run_dir / "report.html").read_text()
    first = page[:page.index('id="summary"')]
    assert "Left out of this run" in first
    assert "<code>dcgm-diag</code> by <code>--skip</code>" in first


def test_only_inventory_quiet_is_untested_and_the_line_lists_what_was_left_out(tmp_path: Path):
    """`--only inventory --quiet` used to print "ACCEPTED: 1 passed"."""
    r, run_dir = node(tmp_path, "acceptance", "--only", "inventory", "--quiet")
    assert r.returncode == 4, r.stdout + r.stderr
    line = r.stdout.strip()
    others = ", ".join(i for i in ACCEPTANCE if i != "inventory")
    assert line.startswith("harness: UNTESTED: 1 passed | UNTESTED left out by --only, though expected: "
                           f"{others} | report "), line
    rec = results(run_dir)
    assert rec["verdict"] == "UNTESTED" and len(rec["left_out"]) == len(ACCEPTANCE) - 1
    assert all(lo["option"] == "--only" and lo["expected_by"] for lo in rec["left_out"])


def test_leaving_out_what_nothing_expects_is_still_accepted_and_named(tmp_path: Path):
    """A suite that is not an acceptance suite, a check no profile rule expects: the run is
    ACCEPTED, and the record and the quiet line still say what --skip left out."""
    suite = write(tmp_path / "s.yaml", "name: lab\nchecks:\n  - id: inventory\n    kind: inventory\n"
                  "  - id: hello\n    kind: command\n    params: {argv: [\"true\"]}\n")
    r, run_dir = node(tmp_path, str(suite), "--skip", "hello", "--quiet")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ACCEPTED: 1 passed | left out by --skip: hello | report " in r.stdout
    rec = results(run_dir)
    assert rec["left_out"] == [{"id": "hello", "kind": "command", "option": "--skip", "expected_by": ""}]


def test_a_resumed_run_keeps_what_was_left_out(tmp_path: Path):
    """--resume takes the selection from the record: what --skip left out stays left out, named,
    and the finished acceptance run is still UNTESTED, never ACCEPTED."""
    suite = write(tmp_path / "slow.yaml", """\
name: slow-acceptance
tags: [acceptance]
checks:
  - id: first
    kind: command
    params: {argv: [/bin/true]}
    expect: [{metric: command.duration, max: 3600, unit: s}]
  - id: slow
    kind: command
    params:
      argv: [python3, -c, "import os, time; time.sleep(float(os.environ.get('SLOW_S', '60')))"]
    expect: [{metric: command.duration, max: 3600, unit: s}]
  - id: burn
    kind: command
    params: {argv: [/bin/true]}
""")
    out = tmp_path / "reports"
    p = start("run", str(suite), "--profile", "generic", "--skip", "burn", "--output", str(out), cwd=tmp_path)
    try:
        wait_for(lambda: run_dirs(out) if out.exists() else [], 60, "the run directory")
        wait_for(lambda: procs_with("SLOW_S", "python3", under=p.pid), 60, "the slow check")
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130
    (run_dir,) = run_dirs(out)
    r = harness("run", "--resume", str(run_dir), env={"SLOW_S": "0"})
    assert r.returncode == 4, r.stdout + r.stderr
    rec = results(run_dir)
    assert [c["status"] for c in rec["checks"]] == ["passed", "passed"] and rec["verdict"] == "UNTESTED"
    assert [(lo["id"], lo["option"]) for lo in rec["left_out"]] == [("burn", "--skip")]
    assert "suite slow-acceptance is an acceptance suite" in rec["left_out"][0]["expected_by"]
