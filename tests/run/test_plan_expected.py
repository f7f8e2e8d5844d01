"""Which checks the profile expects a measurement from (plan.expected_by): the rule behind UNTESTED."""

from __future__ import annotations

from pathlib import Path

from clihelp import write

from harness.checks.registry import kinds
from harness.config import load_profile, load_suite
from harness.run.plan import build

SUITE = """\
name: s
checks:
  - {id: inventory, kind: inventory}
  - {id: nvme-health, kind: nvme_health}
  - {id: md-raid, kind: mdraid}
  - {id: scratch, kind: fio, params: {jobs: [{name: r, rw: read, size: 1M, runtime: 1}]},
     expect: [{metric: fio.bw, min: 0.001, unit: GB/s}]}
"""


def expected(tmp_path: Path, profile_text: str) -> dict[str, str]:
    suite = write(tmp_path / "s.yaml", SUITE)
    profile = write(tmp_path / "p.yaml", profile_text)
    return {pc.id: pc.expected_by for pc in build(load_suite(suite, kinds()), load_profile(profile))}


def test_the_hardware_block_expects_the_checks_its_rules_apply_to(tmp_path: Path):
    got = expected(tmp_path, "name: sku\nhardware: {nvme_count: 4, memory_min_bytes: 1024}\n")
    assert got["nvme-health"] == "profile sku (hardware) expects it: nvme.count >= 4"
    assert got["inventory"].startswith("profile sku (hardware) expects it: host.")
    assert got["md-raid"] == "" and got["scratch"] == ""  # the suite's own expect: does not count


def test_metric_only_rules_expect_nothing_and_named_ones_do(tmp_path: Path):
    got = expected(tmp_path, "name: generic-like\nexpectations:\n"
                   "  - {metric: md.degraded, max: 0, unit: count}\n"  # wherever md is measured
                   "  - {metric: fio.bw, check: scratch, labels: {job: r}, min: 0.01, unit: GB/s}\n"
                   "  - {metric: nvme.media_errors, check: nvme-health, max: 0, unit: count,"
                   " if_measured: true}\n")
    assert got["md-raid"] == "" and got["nvme-health"] == "" and got["inventory"] == ""
    assert got["scratch"] == "profile generic-like expects it: fio.bw{job=r} >= 10 MB/s"


def test_the_shipped_generic_profile_expects_no_drive_check(tmp_path: Path):
    """A node without NVMe or md must not be UNTESTED under generic: its drive rules name metrics."""
    suite = load_suite(Path(__file__).parents[2] / "suites" / "storage.yaml", kinds())
    got = {pc.id: pc.expected_by for pc in build(suite, load_profile("generic"))}
    assert got["nvme-health"] == "" and got["md-raid"] == "" and got["nvme-all-read"] == ""
