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
    return {(m.labels["pci"], m.labels["xid"]): m.value for m in r.metrics if m.name == "gpu.xid"}


def faults(text: str) -> dict[tuple[str, str], float]:
    r = xid.parse(text)
    assert r.valid
    return {(m.labels["pci"], m.labels["fault"]): m.value for m in r.metrics if m.name == "gpu.driver_fault"}


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


def test_fallen_off_the_bus_wrapped_over_three_lines_and_the_probe_failure_without_an_xid():
    got = faults((DATA / "nvsentinel_issue155_dmesg_fallen_off_bus_unnumbered_probe_failed.txt").read_text())
    assert got == {("0000:b3:00", "fallen_off_bus"): 1.0, ("unknown", "probe_failed"): 1.0}


def test_repeated_rminitadapter_failures_count_once_each_not_with_their_echo_line():
    got = faults((DATA / "gpu_operator_issue1146_syslog_rminitadapter_repeated.txt").read_text())
    assert got == {("0000:0a:00", "init_failed"): 6.0}
    got = faults((DATA / "open_gpu_kernel_modules_issue789_dmesg_gsp_rminitadapter.txt").read_text())
    assert got == {("0000:98:00", "init_failed"): 1.0}


def test_the_unnumbered_fallen_line_beside_xid79_is_its_own_fault():
    got = faults((DATA / "gpud_readme_dmesg_xid79_fallen_off_bus_with_nvswitch_sxid.txt").read_text())
    assert got == {("0000:91:00", "fallen_off_bus"): 1.0}


def test_device_unavailable_and_the_same_message_wrapped_in_a_journal():
    # constructed (no real capture found; see tests/data/xid/SOURCES.md): the driver's wording
    text = ("[  41.2] NVRM: GPU 0000:41:00.0: Device is currently unavailable\n"
            "2025-06-01T10:00:00+0000 n1 kernel: NVRM: The NVIDIA GPU 0000:c1:00.0\n"
            "2025-06-01T10:00:00+0000 n1 kernel: NVRM: (PCI ID: 10de:2335) installed in this system has\n"
            "2025-06-01T10:00:00+0000 n1 kernel: NVRM: fallen off the bus and is not responding to "
            "commands.\n")
    assert faults(text) == {("0000:41:00", "unavailable"): 1.0,
                            ("0000:c1:00", "fallen_off_bus"): 1.0}


def test_a_healthy_driver_load_has_no_fault():
    text = ("[    4.1] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07\n"
            "[    5.0] NVRM: GPU at PCI:0000:18:00: GPU-00000000-fake\n"
            "[    5.1] NVRM: The NVIDIA GPU 0000:18:00.0 (PCI ID: 10de:2335) is ready\n")
    assert faults(text) == {}


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


def test_an_xid_attributed_to_a_mig_instance_counts_for_its_gpu_and_xid_154_says_the_recovery():
    name = "mig_attributed_xid94_and_xid154_recovery_action.txt"
    assert counts(name) == {("0000:01:00", 94): 2.0, ("0000:01:00", 79): 1.0, ("0000:01:00", 154): 1.0,
                            ("0018:01:00", 149): 1.0, ("0018:01:00", 154): 1.0}
    r = xid.parse((DATA / name).read_text())
    first = r.details["events"][0]
    assert first["gpu_instance"] == 5 and "compute_instance" not in first
    assert "gpu_instance" not in r.details["events"][1]
    assert r.details["recovery_actions"] == {"0000:01:00": "Node Reboot Required",
                                             "0018:01:00": "Drain and Reset"}
    assert {m.labels["pci"]: m.value for m in r.metrics if m.name == "gpu.recovery_action"} == {
        "0000:01:00": 2.0, "0018:01:00": 4.0}
    # the driver's own format with both instances (open-gpu-kernel-modules: GPU-I:%02u GPU-CI:%02u)
    both = xid.parse("NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, pid=9, name=a, Graphics Exception")
    (ev,) = both.details["events"]
    assert (ev["pci"], ev["xid"], ev["gpu_instance"], ev["compute_instance"]) == ("0000:3b:00", 13, 1, 2)
