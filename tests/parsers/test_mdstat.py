"""The /proc/mdstat parser on every real sample in tests/data/mdstat, plus edge cases.

Per array: (active, degraded, failed, spare, missing or None for raid0, (action, pct) or None),
read by hand from each file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from samples import covers, sample_names

from harness.parsers import mdstat
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "mdstat"
SAMPLES = sample_names("mdstat")

EXPECTED: dict[str, dict[str, tuple]] = {
    "node_exporter-issue500-gce-nvme-raid0.txt": {
        "md0": ("raid0", 1, 0, 0, 0, None, None)},
    "netdata-issue2193-nested-raid0-over-raid1-bitmap.txt": {
        "md2": ("raid0", 1, 0, 0, 0, None, None),
        "md0": ("raid1", 1, 0, 0, 0, 0, None),
        "md1": ("raid1", 1, 0, 0, 0, 0, None)},
    "hdo-site-issue404-mdadm-mail-four-raid1-degraded-failed.txt": {
        name: ("raid1", 1, 1, 1, 0, 1, None) for name in ("md0", "md3", "md1", "md2")},
    "check_raid-issue43-raid6-recovery-6-4-indented-paste.txt": {
        "md0": ("raid6", 1, 1, 0, 0, 2, ("recovery", 19.6))},
    "procfs-pr676-raid5-replacement-R-spare-S-recovery.txt": {  # (R) replacing: not degraded
        "md0": ("raid5", 1, 0, 0, 1, 0, ("recovery", 1.4))},
    "node_exporter-fixture-composite-many-states.txt": {
        "md3": ("raid6", 1, 0, 0, 0, 0, None),
        "md127": ("raid1", 1, 0, 0, 0, 0, None),
        "md0": ("raid1", 1, 0, 0, 0, 0, None),
        "md4": ("raid1", 0, 0, 0, 0, 0, None),
        "md6": ("raid1", 1, 1, 0, 0, 1, ("recovery", 8.5)),
        "md8": ("raid1", 1, 0, 0, 0, 0, ("resync", 8.5)),
        "md7": ("raid6", 1, 1, 0, 0, 1, None),
        "md9": ("raid1", 1, 0, 0, 0, 0, None),  # resync=DELAYED: no percentage
        "md10": ("raid0", 1, 0, 0, 0, None, None),
        "md11": ("raid1", 1, 0, 0, 0, 0, None),  # (auto-read-only), resync=PENDING
        "md12": ("raid0", 1, 0, 0, 0, None, None)},  # md219 is an IMSM container: not judged
}


test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)


def _by_array(r):
    out: dict[str, dict] = {}
    for m in r.metrics:
        if m.name != "md.arrays":
            out.setdefault(m.labels["array"], {"level": m.labels.get("level")})[m.name] = (
                (m.labels["action"], m.value) if m.name == "md.sync_pct" else m.value)
    return out


@pytest.mark.parametrize("name", SAMPLES)
def test_real_sample(name):
    r = mdstat.parse((DATA / name).read_text())
    assert r.valid and r.problems == ()
    got = _by_array(r)
    assert list(got) == list(EXPECTED[name])  # file order
    for array, (level, active, degraded, failed, spare, missing, sync) in EXPECTED[name].items():
        g = got[array]
        assert (g["level"], g["md.active"], g["md.degraded"], g["md.disks_failed"],
                g["md.disks_spare"], g.get("md.disks_missing"), g.get("md.sync_pct")) == (
            level, active, degraded, failed, spare, missing, sync), array
    (count,) = [m for m in r.metrics if m.name == "md.arrays"]
    assert count.value == len(EXPECTED[name]) and count.unit == "count"
    assert all(m.unit == ("%" if m.name == "md.sync_pct" else "count") for m in r.metrics)


def test_details_keep_members_waiting_resyncs_and_containers():
    r = mdstat.parse((DATA / "node_exporter-fixture-composite-many-states.txt").read_text())
    arrays = {a["name"]: a for a in r.details["arrays"]}
    assert arrays["md9"]["action"] == "resync=DELAYED" and arrays["md11"]["action"] == "resync=PENDING"
    assert arrays["md219"]["container"] and arrays["md219"]["members"] == ["sdb(S)", "sdc(S)", "sda(S)"]
    assert arrays["md6"]["status"] == "U_"


def test_no_arrays_is_valid_and_counts_zero():
    r = mdstat.parse("Personalities : \nunused devices: <none>\n")
    assert r.valid and [(m.name, m.value) for m in r.metrics] == [("md.arrays", 0)]


@pytest.mark.parametrize("text", ["", "hello\n", "{}", "unused devices: <none>\n"])
def test_not_mdstat(text):
    r = mdstat.parse(text)
    assert not r.valid and r.problems == (mdstat.NOT_MDSTAT,)


def test_registered_as_parse_kind():
    assert parsers()["mdstat"] is mdstat.parse


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([
    "Personalities : [raid1]", "md0 : active raid1 sda1[0] sdb1[1](F)", "md1 : inactive",
    "      100 blocks [2/1] [U_]", "      [=>..]  recovery = 8.5% (1/2)", "\tresync=DELAYED",
    "md9 : active", "[9/x] [UUU", "super external:imsm", ""]) | st.text(max_size=30), max_size=12))
def test_never_raises(lines):
    mdstat.parse("\n".join(lines))
