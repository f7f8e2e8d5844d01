"""`harness audit capture` on this real node, through the CLI: it never blesses a known-bad state,
never weakens its parent's rules, and writes node-scaled facts as portable minimums; plus the
same rules on facts chosen to be bad, so each branch is exercised whatever this node is like."""

from __future__ import annotations

from pathlib import Path

import yaml
from clihelp import harness, write

from harness.audit.capture import capture_plan, portable, render
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
    assert r.returncode == 0, r.stderr
    text = out.read_text()
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
