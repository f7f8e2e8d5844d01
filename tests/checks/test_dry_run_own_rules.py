"""`harness run --dry-run` lists the rules a check kind adds itself from its params (its
`own_rules`: fixed-bound rules and sibling rules), and a real run judges with exactly those.

Real `harness` subprocesses. The ib_ports check reads a tree built from a real ibstat
(tests/support/ibsysfs.py) through its `sysfs_root` param; nic_ports reads this machine's real NIC.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from clihelp import dry_run_blocks as blocks
from clihelp import harness, results, run_dirs, write
from ibsysfs import h100_tree

from harness import siblings
from harness.checks import afterload
from harness.checks.registry import kinds
from harness.compare.rules import Rule, describe_rule
from harness.platform import facts

BARE = "name: bare\n"  # a profile without expectations: every rule listed is the suite's or the kind's


def dry_run(tmp_path: Path, suite: str, profile: str = BARE) -> dict[str, list[str]]:
    s, p = write(tmp_path / "s.yaml", suite), write(tmp_path / "p.yaml", profile)
    r = harness("run", str(s), "--profile", str(p), "--output", str(tmp_path / "r"), "--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (tmp_path / "r").exists()
    return blocks(r.stdout)


SUITE = """\
name: own
checks:
  - {id: nic, kind: nic_ports, params: {interfaces: [nosuch0], since: nic0, max_error_delta: 0,
                                        expect_speed_gbit: 400}}
  - {id: nic-plain, kind: nic_ports, params: {interfaces: [nosuch0]}}
  - {id: ib, kind: ib_ports, params: {expect_rate_gbit: 400}}
  - {id: rdma-write, kind: rdma, params: {test: ib_write_bw}}
  - {id: rdma-lat, kind: rdma, params: {test: ib_write_lat}}
  - {id: burn, kind: gpu_burn, params: {duration: 10}}
  - {id: dcgm, kind: gpu_burn, params: {engine: dcgm, sibling_temp_offset: null}}
  - {id: copies, kind: gpu_bandwidth, params: {engine: nvbandwidth, sibling_tolerance: 0.2}}
  - {id: drives, kind: fio, params: {targets: [/dev/nosuch0], sibling_tolerance: 0.15,
     jobs: [{name: r, rw: randread, bs: 4k, size: 1M, runtime: 1}]}}
  - id: audit
    kind: config_audit
    params: {rules: [{fact: host.shm_bytes, min: 1GiB, severity: warn}]}
"""


def test_dry_run_lists_every_rule_a_kind_adds_from_its_params(tmp_path):
    b = dry_run(tmp_path, SUITE)
    expect = [ln for ln in b["nic"] if ln.startswith("expect ")]
    assert expect == [
        "expect net.error_delta{} each: <= 0  [warn; check param max_error_delta 0]",
        "expect net.link_up{} each: >= 1  [fail; check param expect_speed_gbit 400]",
        "expect net.link_speed{} each: >= 50 GB/s  [fail; check param expect_speed_gbit 400]"]
    assert b["nic-plain"][-1] == "(no expectations: metrics are recorded only)"
    assert [ln for ln in b["ib"] if ln.startswith("expect ")] == [
        "expect ib.port_active{} each: >= 1  [fail; check param expect_rate_gbit 400]",
        "expect ib.rate{} each: >= 50 GB/s  [fail; check param expect_rate_gbit 400]"]
    # sibling rules: their bound is the median found at run time, so the tolerance is shown
    assert b["rdma-write"][-1] == ("expect rdma.bw_avg{} by device: >= 0.9 x the median of its siblings "
                                   "(3 or more)  [fail; sibling rule]")
    assert not any(ln.startswith("expect ") for ln in b["rdma-lat"])  # latency tests: no sibling rule
    sib = "the median of its siblings (3 or more)  [fail; sibling rule]"
    assert [ln for ln in b["burn"] if ln.startswith("expect ")] == [
        f"expect gpu_burn.tflops{{}} by gpu: >= 0.85 x {sib}",  # power-capped GPUs differ (SC22)
        "expect gpu.temp_max{} by gpu: <= the median of its siblings + 10 C (3 or more)  "
        "[fail; sibling rule]"]
    # dcgm judges itself: its built-in verdict, and the telemetry's, instead of "no expectations"
    assert [ln for ln in b["dcgm"] if ln.startswith(("verdict: ", "expect ", "("))] == [
        "verdict: every dcgmi diag -r 3 test must pass (a warning fails too); a run that skipped every "
        "hardware test is invalid",
        "verdict: DCGM's own internal errors and deployment warnings about the setup (persistence mode, a "
        "service or library) are errors of the environment, not the GPU's",
        "verdict: a GPU that stops answering NVML during the check fails (telemetry)",
        "verdict: a busy GPU's PCIe link below its maximum generation or width fails (telemetry)",
        *(f"verdict: {v}" for v in afterload.verdicts())]  # a load: health read before and after it
    assert afterload.verdicts()[0].startswith("on a node with GPUs, health is read before and after")
    assert any(ln.startswith("verdict: FAULTY (computation errors) fails its GPU") for ln in b["burn"])
    assert [ln.split(" by ")[0] for ln in b["copies"] if ln.startswith("expect ")] == [
        "expect gpu.h2d_bw{}", "expect gpu.d2h_bw{}", "expect gpu.p2p_bw{}"]  # no d2d_bw from nvbandwidth
    assert all(">= 0.8 x the median" in ln for ln in b["copies"] if ln.startswith("expect "))
    assert b["drives"][-1] == ("expect fio.bw{} by device: >= 0.85 x the median of its siblings "
                               "(3 or more)  [fail; sibling rule]")
    assert "config host.shm_bytes: >= 1 GiB  [warn; suite]" in b["audit"]


def test_a_profile_expectation_on_the_link_applies_to_nic_ports(tmp_path):
    profile = ("name: lab\nexpectations:\n"
               "  - {metric: net.link_speed, labels: {driver: mlx5_core}, min: 50, unit: GB/s}\n")
    b = dry_run(tmp_path, "name: s\nchecks:\n  - {id: nic, kind: nic_ports, params: {interfaces: [x0]}}\n",
                profile)
    assert "expect net.link_speed{driver=mlx5_core} each: >= 50 GB/s  [fail; lab]" in b["nic"]
    # a known multiple of the metric's unit is converted (400 Gb/s is 50 GB/s); another unit is an error
    bits = dry_run(tmp_path, "name: s\nchecks:\n  - {id: nic, kind: nic_ports, params: {interfaces: [x0]}}\n",
                   profile.replace("min: 50, unit: GB/s", "min: 400, unit: Gb/s"))
    assert "expect net.link_speed{driver=mlx5_core} each: >= 50 GB/s  [fail; lab]" in bits["nic"]
    bad = write(tmp_path / "bad.yaml", profile.replace("GB/s", "C"))
    r = harness("validate", str(bad))
    assert r.returncode == 2
    assert f"{bad}:3:" in r.stdout + r.stderr and "net.link_speed" in r.stdout + r.stderr


SAME = """\
name: same
checks:
  - id: ib
    kind: ib_ports
    params: {sysfs_root: 'ROOT', window_s: 0, expect_rate_gbit: 400}
  - id: nic
    kind: nic_ports
    params: {interfaces: [NIC], window_s: 0, max_error_delta: 0, expect_speed_gbit: 0.001}
"""


def test_the_run_judges_with_exactly_the_rules_the_dry_run_lists(tmp_path):
    ethtool = shutil.which("ethtool")
    nics = [p.name for p in facts.physical_nics()
            if ethtool and subprocess.run([ethtool, "-S", p.name], capture_output=True).returncode == 0]
    if not nics:
        pytest.skip("no ethtool, or no network interface on a device with ethtool statistics here")
    root = h100_tree(tmp_path / "infiniband")
    suite = SAME.replace("ROOT", str(root)).replace("NIC", nics[0])
    listed = dry_run(tmp_path, suite)
    s, p = tmp_path / "s.yaml", tmp_path / "p.yaml"
    out = tmp_path / "out"
    harness("run", str(s), "--profile", str(p), "--output", str(out))
    checks = {c["id"]: c for c in results(run_dirs(out)[0])["checks"]}
    for cid in ("ib", "nic"):
        judged = {(e["metric"], e["severity"], e["source"]) for e in checks[cid]["evaluations"]}
        shown = {(m.group(1), m.group(2), m.group(3)) for ln in listed[cid]
                 if (m := re.match(r"expect (\S+?)\{.*  \[(\w+); (.+)\]$", ln))}
        assert judged and judged == shown, cid
    # the real NIC: its error counters did not grow (window 0); ib: 4 Ethernet ports Down fail
    assert checks["ib"]["status"] == "failed"
    assert {e["metric"] for e in checks["nic"]["evaluations"]} >= {"net.error_delta", "net.link_up"}


def test_every_kinds_own_rules_are_about_metrics_it_produces():
    """A typo in an own rule's metric would make a rule that never judges (or always errors)."""
    checked = 0
    for kind in kinds().values():
        if kind.hooks.own_rules is None:
            continue
        params = kind.params.model_validate(_params_with_every_rule(kind.name))
        rules = kind.rules_of(params)
        assert rules, kind.name
        names = kind.metric_specs(params)
        for r in rules:
            metric = r.metric if isinstance(r, siblings.SiblingRule) else r.expectation.metric
            assert metric in names, (kind.name, metric)
            assert isinstance(r, (Rule, siblings.SiblingRule)) and describe_rule(r).startswith("expect ")
        checked += 1
    assert checked >= 6


def _params_with_every_rule(kind: str) -> dict:
    return {"nic_ports": {"max_error_delta": 0, "expect_speed_gbit": 400},
            "ib_ports": {"expect_rate_gbit": 400}, "fio": {"targets": ["/dev/nosuch0"]},
            "rdma": {}, "gpu_burn": {}, "gpu_bandwidth": {"engine": "bandwidthtest"}}[kind]


def test_quick_on_h200_lists_the_bf16_burn_reference_as_judged_only_where_measured():
    r = harness("run", "quick", "--profile", "h200-sxm-8x", "--dry-run")
    assert r.returncode == 0, r.stderr
    burn = blocks(r.stdout)["gpu-burn"]
    assert "expect gpu_burn.tflops{dtype=bf16} each: >= 711 TFLOPS  [warn, if measured; h200-sxm-8x]" in burn
    assert "expect gpu_burn.tflops{dtype=bf16} each: >= 632 TFLOPS  [fail, if measured; h200-sxm-8x]" in burn
    if shutil.which("gpu_burn") is None:  # this machine: neither PyTorch nor gpu_burn
        assert any("engine auto: no burn engine here" in ln for ln in burn), burn
