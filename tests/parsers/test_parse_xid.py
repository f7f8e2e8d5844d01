"""The pure XID counter on real kernel-log lines (tests/data/xid, from leptonai/gpud)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.parsers import xid
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "xid"


def counts(name: str) -> dict[tuple[str, int], float]:
    r = xid.parse((DATA / name).read_text())
    assert r.valid and r.problems == ()
    return {(m.labels["pci"], m.labels["xid"]): m.value for m in r.metrics}


def test_xid119_gsp_timeouts_among_rpc_tables_and_a_stack_trace():
    assert counts("gpud_dmesg_ctime_xe9680_xid119_gsp_timeout.log") == {("0000:9b:00", 119): 5.0}
    r = xid.parse((DATA / "gpud_dmesg_ctime_xe9680_xid119_gsp_timeout.log").read_text())
    assert r.details["uuids"] == {"0000:9b:00": "GPU-509665ad-b600-ac93-3616-d754b23d636d"}
    first = r.details["events"][0]
    assert first["when"] == "Sun Feb 23 16:24:18 2025"
    assert first["message"].startswith("pid=2024380, name=nvidia-smi")


def test_xid79_counted_and_nvswitch_sxids_are_not_gpu_xids():
    got = counts("gpud_readme_dmesg_xid79_fallen_off_bus_with_nvswitch_sxid.txt")
    assert got == {("0000:91:00", 79): 1.0}


def test_xid13_and_109_with_a_non_xid_nvidia_line():
    assert counts("gpud_readme_dmesg_ctime_xid13_xid109_peermem.txt") == {("0000:cb:00", 13): 3.0,
                                                                            ("0000:cb:00", 109): 1.0}


def test_journal_prefix_and_old_format_without_pci_word():
    text = ("2026-11-29T10:00:01+0000 node1 kernel: NVRM: Xid (PCI:0000:3b:00): 48, pid=77, name=python, "
            "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer\n"
            "[  12.5] NVRM: Xid (0000:3B:00): 63, Row remapping event\n")
    r = xid.parse(text)
    assert {(m.labels["pci"], m.labels["xid"]): m.value for m in r.metrics} == {("0000:3b:00", 48): 1.0,
                                                                                 ("0000:3b:00", 63): 1.0}


def test_normalize_pci_matches_nvml_bus_ids():
    assert xid.normalize_pci("00000000:9B:00.0") == "0000:9b:00"
    assert xid.normalize_pci("0000:9b:00") == "0000:9b:00"


def test_a_clean_log_is_valid_with_no_events():
    r = xid.parse("[    0.000000] Linux version 6.1.0\n")
    assert r.valid and r.metrics == () and r.details["total"] == 0
    assert parsers()["xid"] is xid.parse


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_never_raises(text: str):
    assert xid.parse(text).valid
