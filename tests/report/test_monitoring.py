"""monitoring/: the rules pass promtool, their alerts fire on bad nodes (promtool test rules), and a
real Prometheus scraping a real Pushgateway, fed by real `harness run`s (NVML faked at its edge,
tests/support/powerlaunch.py), answers every dashboard panel's query and every rule's expression."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from clihelp import ROOT, harness
from promhelp import need, prometheus, pushgateway, query

from harness.report import prometheus as prom

MONITORING = ROOT / "monitoring"
RULE_FILES = sorted(MONITORING.glob("*.yml"))
DASHBOARD = MONITORING / "harness-dashboard.json"
RULES_TEST = ROOT / "tests" / "data" / "monitoring" / "harness-rules_test.yml"
DCGM_RULES = MONITORING / "dcgm" / "harness-dcgm-rules.yml"
DCGM_TEST = ROOT / "tests" / "data" / "monitoring" / "harness-dcgm-rules_test.yml"
LAUNCH = ROOT / "tests" / "support" / "powerlaunch.py"
SELECTOR = re.compile(r"\bharness_[A-Za-z0-9_]+(?:\{[^}]*\})?")
H100 = {"name": "NVIDIA H100 80GB HBM3", "power_w": 650.0}
SUITE = """\
name: monitoring-e2e
drift:
  - {metric: power.node_peak, max_rise_pct: 50}
checks:
  - id: power
    kind: power_headroom
    params: {duration: 2, idle: 0.5, cooldown: 0.5, period: 0.25, backend: numpy, dtype: fp32, size: 32,
             cpu_workers: 1, vm_workers: 1, vm_bytes: 16m, telemetry_period: 0.25, bmc: {kind: none}}
"""


def rules() -> list[dict[str, Any]]:
    return [r for f in RULE_FILES for g in yaml.safe_load(f.read_text())["groups"] for r in g["rules"]]


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL with the node variable set to all nodes) of every dashboard target."""
    doc = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"].replace("$node", ".*")) for p in doc["panels"] for t in p["targets"]]


def test_rules_pass_promtool_check():
    exe = need("promtool", "prometheus")
    assert RULE_FILES, "no rule files in monitoring/"
    r = subprocess.run([exe, "check", "rules", *map(str, RULE_FILES)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 12 rules found" in r.stdout


def test_alerts_fire_on_bad_nodes_and_stay_quiet_on_good_ones():
    exe = need("promtool", "prometheus")
    r = subprocess.run([exe, "test", "rules", RULES_TEST.name], cwd=RULES_TEST.parent, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_rules_and_dashboard_name_only_families_the_harness_exports():
    """A typo in a family name would make a panel or an alert silently empty."""
    from harness import catalog

    known = {prom.family(n, s.unit) + ("_total" if prom.is_counter(n) else "")
             for n, s in catalog.METRICS.items()} | set(prom.HELP) | {"harness_run_timestamp_seconds"}
    exprs = [r["expr"] for r in rules()] + [q for _, q in panel_queries()]
    used = {m.group(0).split("{")[0] for e in exprs for m in SELECTOR.finditer(e)}
    assert used and used <= known, used - known
    doc = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    titles = {p["title"] for p in doc["panels"]}
    assert {"Fleet verdicts", "GPU temperature (hottest per check)", "GPU power (peak per check)",
            "GPU throttling", "PSU headroom at peak load", "Drift since reference"} <= titles
    assert all(t["datasource"]["uid"] == "${datasource}" for p in doc["panels"] for t in p["targets"])
    alerts = {r["alert"] for r in rules() if "alert" in r}
    assert {"HarnessNodeRejected", "HarnessGpuThrottling", "HarnessPsuHeadroomLow", "HarnessDrift"} <= alerts


def test_dcgm_join_rules_pass_promtool_and_join_on_uuid_in_base_units():
    """monitoring/dcgm: dcgm-exporter's MHz, % and MiB become Hz, ratios and bytes, Hostname becomes
    node, and a GPU renumbered in a pod still meets its harness series (on UUID, not gpu)."""
    exe = need("promtool", "prometheus")
    r = subprocess.run([exe, "check", "rules", str(DCGM_RULES)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "SUCCESS: 5 rules found" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([exe, "test", "rules", DCGM_TEST.name], cwd=DCGM_TEST.parent, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def test_per_gpu_and_per_node_bars_are_capped_and_link_to_the_report():
    """At 1,000 nodes a bar per node x GPU is 8,000 bars: bar gauges show a topk/bottomk; every panel
    with a node's series links to that run's report.html (<node>/<run>/ of the results volume)."""
    doc = json.loads(DASHBOARD.read_text())
    assert any(v["name"] == "reports" and v["type"] == "textbox" for v in doc["templating"]["list"])
    for p in doc["panels"]:
        exprs = [t["expr"] for t in p["targets"]]
        if p["type"] == "bargauge":
            assert all(re.match(r"(top|bottom)k\(16, ", e) for e in exprs), (p["title"], exprs)
        if p["type"] == "bargauge" or p["id"] in (2, 6):
            (link,) = p["fieldConfig"]["defaults"]["links"]
            assert link["url"].startswith("${reports}/") and link["url"].endswith("/report.html"), p["title"]
            assert all("group_left(run)" in e and "harness_run_info" in e for e in exprs), p["title"]


def _run(tmp_path: Path, scenario: Path, suite: Path) -> Path:
    before = set((tmp_path / "out").glob("*")) if (tmp_path / "out").is_dir() else set()
    r = subprocess.run([sys.executable, str(LAUNCH), str(scenario), "run", str(suite),
                        "--profile", "dgx-h100", "--output", str(tmp_path / "out"),
                        "--history", str(tmp_path / "history.sqlite")],
                       cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    (run_dir,) = [d for d in set((tmp_path / "out").glob("*")) - before if (d / "results.json").is_file()]
    return run_dir


def _wait_for(url: str, expr: str, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while True:
        got = query(url, expr)
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


@pytest.mark.slow
def test_real_prometheus_answers_every_panel_and_rule(tmp_path: Path):
    need("prometheus", "prometheus")
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"gpus": [H100] * 8}))
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    _run(tmp_path, scenario, suite)
    run_dir = _run(tmp_path, scenario, suite)  # the second run judges drift against the first
    with pushgateway(tmp_path) as gw:
        r = harness("fleet", "export", str(run_dir), "--pushgateway", gw)
        assert r.returncode == 0, r.stdout + r.stderr
        with prometheus(tmp_path, gw.removeprefix("http://"), RULE_FILES) as url:
            # one scrape and one rule evaluation after that (1 s each), bounded
            assert _wait_for(url, 'harness_run_verdict{verdict="ACCEPTED"} == 1')
            recorded = [r["record"] for r in rules() if "record" in r]
            for name in recorded:
                assert _wait_for(url, name, 30), f"recording rule {name} has no data"
            for title, expr in panel_queries():
                assert query(url, expr), f"panel {title!r}: {expr} returned no data"
            for rule in rules():
                got = query(url, rule["expr"])
                if "record" in rule:
                    assert got, f"{rule['record']}: {rule['expr']} returned no data"
                    continue
                # a healthy node fires no alert; each selector inside the alert must still find series
                assert got == [], f"alert {rule['alert']} fired on a healthy run: {got}"
                for sel in SELECTOR.findall(rule["expr"]):
                    assert query(url, sel), f"alert {rule['alert']}: {sel} returned no series"
            # the values arrive in base units with dcgm-exporter's GPU labels
            (temp,) = query(url, 'harness_gpu_temperature_max_celsius{gpu="3"}')
            assert temp["metric"]["UUID"] == "GPU-00000003-fake" and float(temp["value"][1]) == 62.0
            (headroom,) = query(url, "harness_power_headroom_ratio")
            assert 0.2 < float(headroom["value"][1]) < 1.0
            (change,) = query(url, 'harness_drift_change_ratio{metric="harness_power_node_peak_watts"}')
            assert float(change["value"][1]) == 0.0
            health = [r for g in _rules_api(url) for r in g["rules"]]
            assert len(health) == len(rules()) and all(r["health"] == "ok" for r in health), health


def _rules_api(url: str) -> list[dict[str, Any]]:
    from promhelp import api

    groups: list[dict[str, Any]] = api(url, "rules")["groups"]
    return groups
