"""The smartctl parser (JSON and plain text) on every real sample in tests/data/smartctl, plus edge cases.

Expected values by hand from each file: smartctl already gives NVMe temperature in C; data
units x 512,000 -> bytes; warning/critical temperature time minutes x 60 -> seconds. The text
samples are read in their writer's locale (`1,634,269`, `837 355`, `5’716’382`, `69.752.883`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from samples import covers, sample_names

from harness.parsers import smartctl
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "smartctl"
SAMPLES = sample_names("smartctl")
U = 512_000

EXPECTED: dict[str, dict] = {
    "telegraf-sabrent-rocket4-smartctl74.json": {
        "labels": {"device": "nvme0", "serial": "6D1107091C9583054511"},
        "values": {"disk.smart_passed": 1, "nvme.critical_warning": 0, "nvme.temperature": 48,
                   "nvme.available_spare": 100, "nvme.available_spare_threshold": 5,
                   "nvme.spare_margin": 95, "nvme.percentage_used": 4, "nvme.power_on_hours": 8733,
                   "nvme.unsafe_shutdowns": 39, "nvme.media_errors": 0,
                   "nvme.num_err_log_entries": 4871, "nvme.data_units_read": 28337502 * U,
                   "nvme.data_units_written": 76471882 * U, "nvme.warning_temp_time": 0,
                   "nvme.critical_temp_time": 0}},
    "nasty-skhynix-bc901-compact-smartctl74.json": {
        "labels": {"device": "nvme0n1", "serial": "5YC9N012312309E6E"},
        "values": {"disk.smart_passed": 1, "nvme.critical_warning": 0, "nvme.temperature": 63,
                   "nvme.available_spare": 100, "nvme.available_spare_threshold": 50,
                   "nvme.spare_margin": 50, "nvme.percentage_used": 17, "nvme.power_on_hours": 10139,
                   "nvme.unsafe_shutdowns": 18, "nvme.media_errors": 0, "nvme.num_err_log_entries": 3,
                   "nvme.data_units_read": 124216904 * U, "nvme.data_units_written": 232346098 * U,
                   "nvme.warning_temp_time": 2 * 60, "nvme.critical_temp_time": 0}},
    "nasty-kingston-snv3s-compact-smartctl73.json": {  # temperature_sensors [null, 43]: ignored
        "labels": {"device": "nvme0", "serial": "50026B768716CACC"},
        "values": {"disk.smart_passed": 1, "nvme.critical_warning": 0, "nvme.temperature": 34,
                   "nvme.available_spare": 100, "nvme.available_spare_threshold": 10,
                   "nvme.spare_margin": 90, "nvme.percentage_used": 4, "nvme.power_on_hours": 8940,
                   "nvme.unsafe_shutdowns": 48, "nvme.media_errors": 0, "nvme.num_err_log_entries": 0,
                   "nvme.data_units_read": 30203434 * U, "nvme.data_units_written": 14257237 * U,
                   "nvme.warning_temp_time": 0, "nvme.critical_temp_time": 0}},
    "telegraf-usb-sandisk-sat-smartctl74.json": {  # SATA behind a USB bridge; link at 3.0 of 6.0 Gb/s
        "labels": {"device": "sda", "serial": "06c9f4c44"},
        "values": {"disk.smart_passed": 1, "disk.power_on_hours": 11, "disk.reallocated_sectors": 0,
                   "disk.reported_uncorrect": 0, "disk.link_downgraded": 1}},
    "smartctl7.3-vda-virtio-unable-to-detect-device-type.json": {
        "valid": False, "values": {},
        "problems": ["smartctl exit status 1: command line did not parse or device type unknown",
                     "smartctl: /dev/vda: Unable to detect device type"]},
    "linuxfabrik-samsung-pm981-smartctl70-a.txt": {  # NVMe -a, comma thousands
        "labels": {"serial": "LINUXFABRIK759"},
        "values": {"disk.smart_passed": 1, "nvme.critical_warning": 0, "nvme.temperature": 49,
                   "nvme.available_spare": 100, "nvme.available_spare_threshold": 10,
                   "nvme.spare_margin": 90, "nvme.percentage_used": 0, "nvme.power_on_hours": 314,
                   "nvme.unsafe_shutdowns": 58, "nvme.media_errors": 0,
                   "nvme.num_err_log_entries": 346, "nvme.data_units_read": 1634269 * U,
                   "nvme.data_units_written": 3524951 * U, "nvme.warning_temp_time": 0,
                   "nvme.critical_temp_time": 0}},
    "linuxfabrik-samsung-970evo-smartctl70-a-apostrophe-media-errors.txt": {  # ' thousands
        "labels": {"serial": "LINUXFABRIK377P"},
        "values": {"disk.smart_passed": 1, "nvme.critical_warning": 0, "nvme.temperature": 37,
                   "nvme.available_spare": 90, "nvme.available_spare_threshold": 10,
                   "nvme.spare_margin": 80, "nvme.percentage_used": 0, "nvme.power_on_hours": 11044,
                   "nvme.unsafe_shutdowns": 7, "nvme.media_errors": 71,
                   "nvme.num_err_log_entries": 71, "nvme.data_units_read": 1367504 * U,
                   "nvme.data_units_written": 8371637 * U, "nvme.warning_temp_time": 0,
                   "nvme.critical_temp_time": 0}},
    "check_smart_attributes-issue41-intel-smartctl66-A-space-thousands.txt": {  # 6.6 -A, no times
        "labels": {},
        "values": {"nvme.critical_warning": 0, "nvme.temperature": 28, "nvme.available_spare": 100,
                   "nvme.available_spare_threshold": 10, "nvme.spare_margin": 90,
                   "nvme.percentage_used": 0, "nvme.power_on_hours": 403, "nvme.unsafe_shutdowns": 3,
                   "nvme.media_errors": 0, "nvme.num_err_log_entries": 0,
                   "nvme.data_units_read": 837355 * U, "nvme.data_units_written": 907832 * U}},
    "linuxfabrik-issue222-FRAGMENT-smartctl-x-apostrophe-thousands.txt": {  # U+2019 thousands
        "labels": {},
        "values": {"nvme.critical_warning": 0, "nvme.temperature": 43, "nvme.available_spare": 100,
                   "nvme.available_spare_threshold": 10, "nvme.spare_margin": 90,
                   "nvme.percentage_used": 3, "nvme.power_on_hours": 9025, "nvme.unsafe_shutdowns": 81,
                   "nvme.media_errors": 0, "nvme.num_err_log_entries": 0,
                   "nvme.data_units_read": 5716382 * U, "nvme.data_units_written": 28604965 * U,
                   "nvme.warning_temp_time": 0, "nvme.critical_temp_time": 0}},
    "zbx-smartctl-issue129-FRAGMENT-nvme-A-dot-thousands-comma-decimal-worn.txt": {  # 69.752.883 [35,7 TB]
        "labels": {},
        "values": {"nvme.critical_warning": 4, "nvme.temperature": 41, "nvme.available_spare": 100,
                   "nvme.available_spare_threshold": 10, "nvme.spare_margin": 90,
                   "nvme.percentage_used": 104, "nvme.power_on_hours": 9602, "nvme.unsafe_shutdowns": 1,
                   "nvme.media_errors": 0, "nvme.num_err_log_entries": 6,
                   "nvme.data_units_read": 69752883 * U, "nvme.data_units_written": 255405248 * U,
                   "nvme.warning_temp_time": 0, "nvme.critical_temp_time": 0}},
    "linuxfabrik-seagate-st32000542as-smartctl70-x-FAILED.txt": {  # FAILED!, attribute 5 at NOW
        "labels": {"serial": "LINUXFABRIK"},
        "values": {"disk.smart_passed": 0, "disk.temperature": 22, "disk.power_on_hours": 18319,
                   "disk.reallocated_sectors": 3956, "disk.reported_uncorrect": 0,
                   "disk.pending_sectors": 0, "disk.offline_uncorrectable": 0}},
    "linuxfabrik-crucial-mx500-smartctl65-x-sata.txt": {  # -x brief FLAGS, 6.0 of 6.0 Gb/s
        "labels": {"serial": "Linuxfabrik4"},
        "values": {"disk.smart_passed": 1, "disk.temperature": 38, "disk.power_on_hours": 3188,
                   "disk.reallocated_sectors": 0, "disk.reported_uncorrect": 0,
                   "disk.pending_sectors": 0, "disk.offline_uncorrectable": 0,
                   "disk.link_downgraded": 0}},
    "disk-smart-perl-seagate-st3250410as-smartctl541-a.txt": {  # 5.41 -a: TYPE/UPDATED/WHEN_FAILED
        "labels": {"serial": "6RYBDDDQ"},
        "values": {"disk.smart_passed": 1, "disk.temperature": 35, "disk.power_on_hours": 1100,
                   "disk.reallocated_sectors": 0, "disk.reported_uncorrect": 0,
                   "disk.pending_sectors": 0, "disk.offline_uncorrectable": 0}},
    "telegraf-hgst-huh721212al5204-sas-smartctl66.txt": {  # SAS: `Current Drive Temperature: 34 C`
        "labels": {"serial": "8HJ39K3H"},
        "values": {"disk.smart_passed": 1, "disk.temperature": 34}},
    "zbx-smartctl-issue101-FRAGMENT-megaraid3-seagate-sas-smartctl543.txt": {  # SAS behind MegaRAID
        "labels": {"serial": "Z1ZB1QCV0000R642KQ5C"},
        "values": {"disk.smart_passed": 1, "disk.temperature": 40}},
    "smartctl7.3-nvme0-open-failed-text.txt": {
        "valid": False, "values": {},
        "problems": ["smartctl: Smartctl open device: /dev/nvme0 failed: No such device"]},
    "smartctl7.3-vda-unable-to-detect-device-type-text.txt": {
        "valid": False, "values": {}, "problems": ["smartctl: /dev/vda: Unable to detect device type"]},
    "smartctl7.3-unrecognized-option-Z-text.txt": {
        "valid": False, "values": {}, "problems": ["smartctl: =======> UNRECOGNIZED OPTION: Z"]},
}


test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)


@pytest.mark.parametrize("name", SAMPLES)
def test_real_sample(name):
    want = EXPECTED[name]
    r = smartctl.parse((DATA / name).read_text())
    assert r.valid is want.get("valid", True)
    assert list(r.problems) == want.get("problems", [])
    got = {m.name: m.value for m in r.metrics}
    assert len(got) == len(r.metrics)
    assert got == pytest.approx(want["values"], rel=0, abs=1e-9)
    for m in r.metrics:
        assert dict(m.labels) == want["labels"]


def test_details_name_the_drive():
    r = smartctl.parse((DATA / "telegraf-sabrent-rocket4-smartctl74.json").read_text())
    assert r.details["model"] == "Sabrent Rocket 4.0 1TB" and r.details["firmware"] == "RKT401.3"
    assert r.details["protocol"] == "NVMe" and r.details["exit_status"] == 0


def _doc(**over):
    doc = json.loads((DATA / "telegraf-usb-sandisk-sat-smartctl74.json").read_text())
    doc.update(over)
    return json.dumps(doc)


def test_failing_disk_bits_are_measurements_not_invalid_runs():
    # bit 3 "disk failing" + bit 4 "prefail attribute at threshold": still a valid reading
    r = smartctl.parse(_doc(smartctl={"exit_status": 8 | 16}, smart_status={"passed": False}))
    assert r.valid and r.problems == ()
    assert {m.name: m.value for m in r.metrics}["disk.smart_passed"] == 0
    r = smartctl.parse(_doc(smartctl={"exit_status": 2, "messages": [
        {"string": "open failed", "severity": "error"}]}))
    assert not r.valid and r.metrics == ()
    assert r.problems == ("smartctl exit status 2: device open failed or not supported",
                          "smartctl: open failed")


def test_ata_counts_and_temperature_when_present():
    doc = json.loads(_doc(temperature={"current": 41}))
    doc["ata_smart_attributes"]["table"] += [
        {"id": 197, "name": "Current_Pending_Sector", "raw": {"value": 3}},
        {"id": 198, "name": "Offline_Uncorrectable", "raw": {"value": "x"}}]  # not a number: left out
    got = {m.name: m.value for m in smartctl.parse(json.dumps(doc)).metrics}
    assert got["disk.temperature"] == 41 and got["disk.pending_sectors"] == 3
    assert "disk.offline_uncorrectable" not in got


def test_registered_as_parse_kind():
    assert parsers()["smartctl"] is smartctl.parse


@pytest.mark.parametrize("text", ["", "[]", "{}", '{"smartctl": 3}', '{"json_format_version": [1, 0]}'])
def test_empty_or_odd_documents(text):
    r = smartctl.parse(text)
    assert not r.valid and r.metrics == ()


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(
                        ["smartctl", "exit_status", "device", "name", "smart_status", "passed",
                         "nvme_smart_health_information_log", "ata_smart_attributes", "table",
                         "temperature", "current", "interface_speed", "max", "raw", "value", "id"]),
                        c, max_size=4), max_leaves=20))
def test_never_raises_on_any_json_shape(doc):
    smartctl.parse(json.dumps({"json_format_version": [1, 0], "x": doc}))
    if isinstance(doc, dict):
        smartctl.parse(json.dumps({"json_format_version": [1, 0], **doc}))
