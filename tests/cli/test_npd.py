"""node-problem-detector: `harness run --npd` and deploy/npd/ keep NPD's custom plugin contract
(tests/support/npdplugin.py: exit 0 OK, 1 NonOK, other Unknown; the message is stdout cut to 80
bytes), run for real through the CLI and the plugin script."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import npdplugin as npd
import pytest
from clihelp import ROOT, harness, write

from harness.cli.quiet import NPD_MAX, npd_line
from harness.model import CheckResult, RunRecord, Status

DEPLOY = ROOT / "deploy" / "npd"
LENIENT = "name: lenient\nhardware:\n  memory_min_bytes: 1048576\nexpectations: []\n"


DF = "[df, -B1, --output=avail, /tmp]"
METRIC = "        - {name: prolog.tmp_free, unit: B, better: higher, regex: '(?P<value>[0-9]+)\\s*$'}\n"


def _suite(tmp_path: Path, name: str, expect: str = "", argv: str = DF) -> Path:
    return write(tmp_path / f"{name}.yaml", f"name: {name}\nchecks:\n  - id: tmp-space\n    kind: command\n"
                 f"    params:\n      argv: {argv}\n      loads_node: false\n      metrics:\n"
                 + METRIC + (f"    expect:\n      - {expect}\n" if expect else ""))


CASES = {
    "accepted": ("{metric: prolog.tmp_free, min: 1, unit: B}", None, npd.OK, "ACCEPTED"),
    "rejected": ("{metric: prolog.tmp_free, min: 1.0e+18, unit: B}", None, npd.NONOK, "REJECTED"),
    "errored": ("{metric: prolog.tmp_free, min: 1, unit: B}", "[/nonexistent/df-tool]", npd.UNKNOWN,
                "ERRORED"),
    "untested": ("", None, npd.UNKNOWN, "UNTESTED"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_npd_keeps_the_plugin_contract(tmp_path: Path, case: str):
    expect, argv, status, verdict = CASES[case]
    suite = _suite(tmp_path, case, expect, *([argv] if argv else []))
    profile = write(tmp_path / "lenient.yaml", LENIENT)
    doc = npd.load(DEPLOY / "harness-prolog-monitor.json")
    rule = doc["rules"][0]
    args = [a for a in rule["args"] if a != "prolog"]
    args[args.index("/var/lib/harness/health")] = str(tmp_path / "health")
    got, message, raw = npd.invoke(doc, rule, [sys.executable, "-m", "harness", *args[:1], str(suite),
                                               *args[1:], "--profile", str(profile)],
                                   env={"HARNESS_LOCK_FILE": str(tmp_path / "lock"), "PYTHONPATH": str(ROOT)})
    assert (got, message.split()[1]) == (status, verdict), raw
    assert len(raw.strip()) <= NPD_MAX and message == raw.decode().strip()  # nothing for NPD to cut
    assert raw.count(b"\n") == 1


def test_the_quiet_line_would_be_cut_by_npd_and_the_npd_line_is_not():
    bad = CheckResult("gpu-health", "gpu_health", Status.FAILED, "GPU 3: 12 retired pages pending, "
                      "row remapping failed, XID 79 (fell off the bus) — drain the node")
    rec = RunRecord("gpu017-20260101T000000Z", "gpu017", {"name": "prolog"}, {"name": "h100"},
                    "2026-01-01T00:00:00Z", "2026-01-01T00:00:04Z", 4.0, {}, (bad,), "0.1.0")
    line = npd_line(rec, 1)
    assert len(line.encode()) <= NPD_MAX and line.startswith("harness REJECTED | FAILED gpu-health: GPU 3")
    assert line.endswith("...")
    assert len(npd_line(rec, 1, limit=40).encode()) == 40
    multibyte = CheckResult("x", "command", Status.FAILED, "é" * 100)
    cut = npd_line(RunRecord("r", "n", {}, {}, "", "", 0.0, {}, (multibyte,), "1"), 1)
    assert len(cut.encode()) <= NPD_MAX and "\ufffd" not in cut  # never half a character


def test_monitor_configs_are_valid_for_npd():
    for name in ("harness-health-monitor.json", "harness-prolog-monitor.json"):
        doc = npd.load(DEPLOY / name)
        assert npd.problems(doc, exists=lambda p: True) == [], name
        (cond,) = doc["conditions"]
        assert cond["type"] == "HarnessUnhealthy" and doc["rules"][0]["condition"] == cond["type"]
        assert doc["pluginConfig"]["max_output_length"] == NPD_MAX
    broken = npd.load(DEPLOY / "harness-health-monitor.json")
    broken["rules"][0]["timeout"] = "1h"
    assert npd.problems(broken, exists=lambda p: True) == [
        "rule HarnessRejected: timeout above the global timeout"]


def _status(path: Path, rc: int, line: str, age_s: float = 0.0) -> None:
    path.write_text(f"{rc}\n{line}\n")
    t = time.time() - age_s
    os.utime(path, (t, t))


@pytest.mark.parametrize(("rc", "age", "want"), [(0, 0, npd.OK), (1, 0, npd.NONOK), (3, 0, npd.UNKNOWN),
                                                 (4, 0, npd.UNKNOWN), (1, 3600, npd.UNKNOWN)])
def test_the_plugin_script_reports_the_daemonsets_status(tmp_path: Path, rc: int, age: float, want: str):
    doc = npd.load(DEPLOY / "harness-health-monitor.json")
    rule = dict(doc["rules"][0])
    status = tmp_path / "npd.status"
    _status(status, rc, f"harness VERDICT{rc} | FAILED gpu-health: GPU 3", age)
    got, message, _ = npd.invoke(doc, rule, [str(DEPLOY / "harness-health.sh"), str(status), "900"])
    assert got == want
    assert message == (f"harness VERDICT{rc} | FAILED gpu-health: GPU 3" if age == 0
                       else f"harness: health status is {message.split()[4]} s old")


def test_the_plugin_script_without_a_status_is_unknown(tmp_path: Path):
    doc = npd.load(DEPLOY / "harness-health-monitor.json")
    got, message, _ = npd.invoke(doc, doc["rules"][0], [str(DEPLOY / "harness-health.sh"),
                                                        str(tmp_path / "none")])
    assert (got, message) == (npd.UNKNOWN, "harness: no health status yet")


def test_npd_with_dry_run_prints_the_plan(tmp_path: Path):
    r = harness("run", str(_suite(tmp_path, "plan", "{metric: prolog.tmp_free, min: 1, unit: B}")), "--npd",
                "--dry-run", "--profile", str(write(tmp_path / "l.yaml", LENIENT)))
    assert r.returncode == 0 and "tmp-space" in r.stdout
