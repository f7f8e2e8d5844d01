"""A `command` check with `loads_node: false` is read-only: no GPU health read before and after it,
in `--dry-run` or in a real run, while a loading command keeps that read (kind.loads(params), not
the truthiness of the kind's `loads_node` hook, which for `command` is a function).

Real `harness` subprocesses; the real run on a node faked only at NVML and the PCI bus root."""

from __future__ import annotations

from pathlib import Path

from clihelp import dry_run_blocks as blocks
from clihelp import harness, write
from gpunode import H100, check, node
from pcisysfs import gpu_addresses, lines, write_tree

from harness.checks import afterload

SUITE = """\
name: commands
checks:
  - {id: reads, kind: command, params: {argv: ["true"], loads_node: false}}
  - {id: loads, kind: command, params: {argv: ["true"]}}
"""


def test_dry_run_shows_the_after_load_verdict_only_for_a_loading_command(tmp_path: Path):
    s, p = write(tmp_path / "s.yaml", SUITE), write(tmp_path / "p.yaml", "name: bare\n")
    r = harness("run", str(s), "--profile", str(p), "--output", str(tmp_path / "r"), "--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr
    b = blocks(r.stdout)
    after = [f"verdict: {v}" for v in afterload.verdicts()]
    assert not [ln for ln in b["reads"] if ln in after]
    assert [ln for ln in b["loads"] if ln in after] == after


def test_a_read_only_command_gets_no_after_load_health_read(tmp_path: Path):
    bus = gpu_addresses()
    root = write_tree(tmp_path / "devices", lines())
    r, rec = node(tmp_path, "--profile", "generic", suite=SUITE,
                  scenario={"gpus": [{"name": H100}] * 8, "bus_ids": [a[4:] for a in bus],
                            "pci_root": str(root)})
    assert rec is not None, r.stdout + r.stderr
    reads, loads = check(rec, "reads"), check(rec, "loads")
    assert reads["status"] == loads["status"] == "recorded", r.stdout + r.stderr
    assert "telemetry" in reads["details"] and "telemetry" in loads["details"]  # both on a GPU node
    assert "after_load" not in reads["details"]
    assert loads["details"]["after_load"]["gpus"] == 8
