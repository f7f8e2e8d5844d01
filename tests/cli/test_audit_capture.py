"""`harness audit capture` on this real node, through the CLI: it never blesses a known-bad state,
never weakens its parent's rules, and writes node-scaled facts as portable minimums; plus the
same rules on facts chosen to be bad, so each branch is exercised whatever this node is like."""

from __future__ import annotations

from pathlib import Path

import yaml
from clihelp import harness, write

from harness.audit.capture import capture_plan, portable, render
from harness.audit.judge import judge_rule
from harness.config.factrule import FactRule
from harness.facts import Fact

GIB = 1024**3
PB = 1024**5

PARENT = """\
name: strict-parent
config:
  - {fact: host.clock_synced, equals: true, severity: fail}
  - {fact: host.shm_bytes, min: 1PiB}
  - {fact: host.nofile, min: 16, severity: fail}
"""


def _facts(text: str) -> dict[str, object]:
    doc = yaml.safe_load(text)
    return {r["fact"]: r for r in doc["config"] if not r.get("labels")}


def test_capture_on_this_node_never_weakens_the_parent_or_blesses_defects(tmp_path: Path):
    # before: clock_synced equals false replaced the parent's equals true; shm and nproc were
    # this node's exact values, which other nodes of the SKU cannot meet
    parent = write(tmp_path / "strict-parent.yaml", PARENT)
    out = tmp_path / "golden.yaml"
    r = harness("audit", "capture", "-o", str(out), "--extends", str(parent))
    # the parent's 1 PiB shm rule fails here and stays in force: not a golden node, exit 1 (the
    # file is still written, saying so)
    assert r.returncode == 1, r.stderr
    assert "NOT a golden node" in r.stdout and "which stays in force: host.shm_bytes" in r.stderr
    text = out.read_text()
    assert "# NOT a golden node: it fails" in text
    rules = _facts(text)
    warned = r.stderr
    # the parent's shm minimum (1 PiB) fails here: reported, never replaced by a weaker one
    assert "host.shm_bytes" not in rules and "not captured: host.shm_bytes" in warned
    clock = rules.get("host.clock_synced")
    if clock is None:  # this node's clock is not synced: said so, the parent's rule stays
        assert "host.clock_synced" in warned
    else:
        assert clock["equals"] is True and "severity" not in clock  # the parent's fail kept
    for fact, bad in (("host.time_sync_daemon", "none"), ("host.irqbalance", False),
                      ("host.clock_synced", False)):
        assert rules.get(fact, {}).get("equals", object()) != bad, fact
    nofile = rules.get("host.nofile")
    assert nofile is None or (nofile.get("min", 16) >= 16 and "severity" not in nofile)
    nproc = rules.get("host.nproc")
    if nproc is not None and "min" in nproc:
        assert nproc["min"] % 10 ** max(len(str(nproc["min"])) - 2, 0) == 0 and "portable" in nproc["note"]
    assert harness("validate", str(out)).returncode == 0
    r = harness("run", "prolog", "--profile", str(out), "--only", "config-audit", "--output",
                str(tmp_path / "r"), env={"HARNESS_HISTORY": "off"})
    assert r.returncode == 1 and "host.shm_bytes" in r.stdout, r.stdout + r.stderr  # the parent's rule
    assert "host.nofile" not in r.stdout  # what was captured passes on the node it came from


def test_known_bad_states_and_parent_failures_are_reported_not_pinned():
    facts = [Fact("host.clock_synced", False, "s"), Fact("host.time_sync_daemon", "none", "s"),
             Fact("host.irqbalance", False, "s"), Fact("host.swap_bytes", 8 * GIB, "s"),
             Fact("host.shm_bytes", 25275990016, "s"), Fact("host.nproc", 96363, "s"),
             Fact("host.nofile", 1048576, "s"), Fact("host.thp", "madvise", "s")]
    parent = [FactRule(fact="host.swap_bytes", max=0, severity="warn"),
              FactRule(fact="host.shm_bytes", min=int(21.5 * GIB)),
              FactRule(fact="host.nofile", min=65536, severity="fail"),
              FactRule(fact="host.thp", one_of=["madvise", "never"], severity="warn")]
    rules, refused = capture_plan(facts, parent)
    by = {r["fact"]: r for r in rules}
    assert not {"host.clock_synced", "host.time_sync_daemon", "host.irqbalance", "host.swap_bytes"} & set(by)
    assert any(w.startswith("host.swap_bytes: this node fails the parent's rule") for w in refused)
    assert any("the clock is not synchronised" in w for w in refused)
    # 23.5 GiB of shm: 90% rounded down to 21 GiB, but never below the parent's 21.5 GiB
    assert portable(25275990016, "B") == 21 * GIB and by["host.shm_bytes"]["min"] == int(21.5 * GIB)
    assert by["host.nproc"]["min"] == 86000 and portable(96363, "count") == 86000
    assert by["host.nofile"] == {"fact": "host.nofile", "min": 1048576}  # equal or stricter, severity fail
    assert by["host.thp"] == {"fact": "host.thp", "equals": "madvise", "severity": "warn"}
    text = render("g", "p", facts, "evil\nconfig:\n- {fact: host.nproc, min: 1}", "2026-01-01T00:00:00Z",
                  parent)
    doc = yaml.safe_load(text)
    assert set(doc) == {"name", "extends", "description", "config"}
    assert [r for r in doc["config"] if r["fact"] == "host.nproc"] == [by["host.nproc"]]


# Issue #25 item 8: what a golden config pins, per fact.
IN_FORCE = """\
name: site-parent
config:
  - {fact: host.memlock, equals: unlimited}
  - {fact: host.nofile, min: 1000000000}
  - {fact: host.kernel_cmdline.iommu, equals: pt}
"""


def test_capture_pins_site_invariants_not_what_is_absent_or_node_local(tmp_path: Path):
    """Before: lib.nccl/lib.cudnn/net.ofed_version pinned as "absent", the exact kernel, MTU exactly,
    host.container exactly: a sibling with NCCL installed, a newer kernel or jumbo frames failed."""
    out = tmp_path / "golden.yaml"
    r = harness("audit", "capture", "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load(out.read_text())
    assert not [x for x in doc["config"] if x.get("equals") == "absent"]
    facts = {x["fact"] for x in doc["config"]}
    assert not facts & {"host.container", "host.cuda_visible_devices", "host.nvidia_visible_devices",
                        "host.cgroup_memory_limit", "host.cgroup_cpu_quota"}
    kernel = next(x for x in doc["config"] if x["fact"] == "host.kernel")
    assert "equals" not in kernel and kernel["min_version"] and kernel["severity"] == "warn"
    for rule in doc["config"]:
        if rule["fact"] == "net.mtu" or rule["fact"].startswith("lib."):
            assert "equals" not in rule, rule
    if "absent" in out.read_text():  # a library this node lacks is listed, never pinned
        assert "# absent on this node, so not pinned" in out.read_text()


def test_a_sibling_with_nccl_a_newer_kernel_and_jumbo_frames_passes_the_golden_config():
    node = [Fact("host.kernel", "6.1.0-27-amd64", "s"), Fact("lib.nccl", "absent", "s"),
            Fact("lib.cudnn", "absent", "s"), Fact("net.ofed_version", "absent", "s"),
            Fact("lib.cuda_runtime", "12.4", "s"), Fact("net.mtu", 1400, "s", {"nic": "ens5"}),
            Fact("host.container", "docker", "s"), Fact("host.os", "Ubuntu 22.04.4 LTS", "s")]
    sibling = [Fact("host.kernel", "6.1.0-28-amd64", "s"), Fact("lib.nccl", "2.21.5", "s"),
               Fact("lib.cudnn", "9.1.0", "s"), Fact("net.ofed_version", "24.04-0.6.6", "s"),
               Fact("lib.cuda_runtime", "12.6", "s"), Fact("net.mtu", 9000, "s", {"nic": "ib0"}),
               Fact("host.container", "none", "s"), Fact("host.os", "Ubuntu 22.04.4 LTS", "s")]
    rules, _ = capture_plan(node)
    assert {r["fact"] for r in rules} == {"host.kernel", "lib.cuda_runtime", "net.mtu", "host.os"}
    for r in rules:
        rule = FactRule(**r)
        assert all(o.outcome == "pass" for o in judge_rule(rule, "golden", sibling)), r
    older = [Fact("host.kernel", "5.15.0-91-generic", "s")]
    (kernel,) = [FactRule(**r) for r in rules if r["fact"] == "host.kernel"]
    assert [o.outcome for o in judge_rule(kernel, "golden", older)] == ["warn"]


def test_capture_on_a_node_that_fails_parent_rules_in_force_is_not_golden(tmp_path: Path):
    """Before: exit 0 and "Every rule below passes on that node" while memlock, nofile and iommu of
    the parent, which stay in force, failed on it."""
    parent = write(tmp_path / "site-parent.yaml", IN_FORCE)
    out = tmp_path / "golden.yaml"
    r = harness("audit", "capture", "-o", str(out), "--extends", str(parent))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "NOT a golden node: it fails" in r.stdout
    failing = [ln for ln in r.stderr.splitlines() if ln.startswith("error: this node fails")]
    named = {ln.split("which stays in force: ")[1].split(":")[0] for ln in failing}
    # this node's limits and command line: each rule of the parent that fails here is named
    assert named and named <= {"host.memlock", "host.nofile", "host.kernel_cmdline.iommu"}
    assert "host.nofile" in named  # no node allows a billion open files
    assert "# NOT a golden node" in out.read_text()
    run = harness("run", "prolog", "--profile", str(out), "--only", "config-audit", "--output",
                  str(tmp_path / "r"), env={"HARNESS_HISTORY": "off"})
    assert run.returncode == 1  # what the capture said: a run with this profile rejects the node
