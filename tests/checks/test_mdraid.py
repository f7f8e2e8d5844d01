"""The mdraid kind: skipped on a kernel without md (this machine), an error when arrays are
named, and judged against the generic profile on real /proc/mdstat captures fed to its edge."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from harness.checks import mdraid
from harness.checks.base import CheckContext
from harness.compare.judge import evaluate, status_of
from harness.compare.rules import Rule
from harness.config import load_profile
from harness.errors import HarnessError, SkipCheck
from harness.model import Status
from harness.platform import storage

DATA = Path(__file__).parents[1] / "data" / "mdstat"
NO_MD = not Path("/proc/mdstat").exists()


def ctx(tmp_path: Path) -> CheckContext:
    return CheckContext("md", tmp_path, 60, False, False, {}, logging.getLogger("t"))


@pytest.mark.skipif(not NO_MD, reason="this kernel has the md driver")
def test_without_the_md_driver_it_is_skipped_unless_arrays_are_named(tmp_path):
    with pytest.raises(SkipCheck, match=r"^no md driver: /proc/mdstat is missing$"):
        mdraid.KIND.run(mdraid.MdraidParams(), ctx(tmp_path))
    with pytest.raises(HarnessError, match="arrays md0 expected, but /proc/mdstat is missing") as e:
        mdraid.KIND.run(mdraid.MdraidParams(arrays=["md0"]), ctx(tmp_path))
    assert not isinstance(e.value, SkipCheck)


@pytest.fixture
def mdstat_text(monkeypatch):
    """Feed a captured /proc/mdstat to the check's edge (this kernel cannot make md arrays)."""
    def use(name: str) -> None:
        text = (DATA / name).read_text()
        monkeypatch.setattr(storage, "read_mdstat", lambda proc_root=None: text)
    return use


def judge(out):
    rules = [Rule(e, "generic") for e in load_profile("generic").profile.expectations
             if e.metric.startswith("md.")]
    return evaluate(rules, out.metrics)


def test_degraded_mirrors_fail_against_the_generic_profile(tmp_path, mdstat_text):
    mdstat_text("hdo-site-issue404-mdadm-mail-four-raid1-degraded-failed.txt")
    out = mdraid.KIND.run(mdraid.MdraidParams(), ctx(tmp_path))
    assert out.problems == ()
    evs = judge(out)
    assert status_of(evs) is Status.FAILED
    failed = sorted((e.metric, e.labels["array"]) for e in evs if e.outcome.value == "fail")
    assert failed == sorted((m, a) for m in ("md.degraded", "md.disks_failed")
                            for a in ("md0", "md1", "md2", "md3"))
    assert out.summary.endswith("DEGRADED: md0, md3, md1, md2")
    assert (tmp_path / "raw" / "md" / "mdstat.txt").read_text().startswith("Personalities")


def test_healthy_nvme_raid0_passes(tmp_path, mdstat_text):
    mdstat_text("node_exporter-issue500-gce-nvme-raid0.txt")
    out = mdraid.KIND.run(mdraid.MdraidParams(arrays=["md0"]), ctx(tmp_path))
    assert status_of(judge(out)) is Status.PASSED
    assert out.summary == "1 md array(s): md0 raid0"


def test_named_arrays_narrow_the_check_and_must_exist(tmp_path, mdstat_text):
    mdstat_text("netdata-issue2193-nested-raid0-over-raid1-bitmap.txt")
    out = mdraid.KIND.run(mdraid.MdraidParams(arrays=["md1"]), ctx(tmp_path))
    assert {m.labels.get("array") for m in out.metrics} == {"md1", None}  # None: md.arrays
    with pytest.raises(HarnessError, match=r"md arrays md9 not found .* \(present: md2, md0, md1\)"):
        mdraid.KIND.run(mdraid.MdraidParams(arrays=["md9"]), ctx(tmp_path))


def test_no_arrays_is_skipped(tmp_path, monkeypatch):
    text = "Personalities : \nunused devices: <none>\n"
    monkeypatch.setattr(storage, "read_mdstat", lambda proc_root=None: text)
    with pytest.raises(SkipCheck, match="no md arrays"):
        mdraid.KIND.run(mdraid.MdraidParams(), ctx(tmp_path))
