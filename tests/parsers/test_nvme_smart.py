"""The nvme-cli smart-log parser on every real sample in tests/data/nvme-smart, plus edge cases.

Expected values are worked out by hand from each file: Kelvin - 273 -> C, data units x 512,000
-> bytes, minutes x 60 -> seconds, spare_margin = spare - threshold.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from samples import covers, sample_names

from harness.parsers import nvme
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "nvme-smart"
SAMPLES = sample_names("nvme-smart")
UNITS = {"nvme.critical_warning": "count", "nvme.temperature": "C", "nvme.available_spare": "%",
         "nvme.available_spare_threshold": "%", "nvme.spare_margin": "%",
         "nvme.percentage_used": "%", "nvme.power_on_hours": "count",
         "nvme.unsafe_shutdowns": "count", "nvme.media_errors": "count",
         "nvme.num_err_log_entries": "count", "nvme.data_units_read": "B",
         "nvme.data_units_written": "B", "nvme.warning_temp_time": "s", "nvme.critical_temp_time": "s"}
U = 512_000  # bytes per NVMe data unit


def netdata_2x(labels=None):
    """netdata's capture: the same drive in three encodings (ints, strings, floats)."""
    return {"nvme.critical_warning": 0, "nvme.temperature": 310 - 273, "nvme.available_spare": 100,
            "nvme.available_spare_threshold": 5, "nvme.spare_margin": 95, "nvme.percentage_used": 2,
            "nvme.power_on_hours": 4974, "nvme.unsafe_shutdowns": 39, "nvme.media_errors": 0,
            "nvme.num_err_log_entries": 110, "nvme.data_units_read": 9898518 * U,
            "nvme.data_units_written": 136157684 * U, "nvme.warning_temp_time": 0,
            "nvme.critical_temp_time": 0}


EXPECTED: dict[str, dict] = {
    "netdata-nvme2x-flat.json": {"values": netdata_2x()},
    "netdata-nvme-cli-2.1.1-string-values.json": {"values": netdata_2x()},
    "netdata-float-values.json": {"values": netdata_2x()},
    "netdata-nvme-cli-2.11-critical-warning-object.json": {"values": {
        "nvme.critical_warning": 0, "nvme.temperature": 324 - 273, "nvme.available_spare": 100,
        "nvme.available_spare_threshold": 5, "nvme.spare_margin": 95, "nvme.percentage_used": 30,
        "nvme.power_on_hours": 24424, "nvme.unsafe_shutdowns": 49, "nvme.media_errors": 0,
        "nvme.num_err_log_entries": 212, "nvme.data_units_read": 178037231 * U,
        "nvme.data_units_written": 1928683480 * U, "nvme.warning_temp_time": 0,
        "nvme.critical_temp_time": 0}},
    "dell-disk-exporter-nvme-cli-1.x-spaced-temperature-sensors.json": {"values": {
        "nvme.critical_warning": 0, "nvme.temperature": 301 - 273, "nvme.available_spare": 100,
        "nvme.available_spare_threshold": 5, "nvme.spare_margin": 95, "nvme.percentage_used": 15,
        "nvme.power_on_hours": 38313, "nvme.unsafe_shutdowns": 139, "nvme.media_errors": 0,
        "nvme.num_err_log_entries": 17, "nvme.data_units_read": 499296134 * U,
        "nvme.data_units_written": 1474968593 * U, "nvme.warning_temp_time": 0,
        "nvme.critical_temp_time": 0}},
    "nvmecli-issue1037-wd-2tb-text-num_err_log_entries-1.txt": {"labels": {"device": "nvme0"}, "values": {
        "nvme.critical_warning": 0, "nvme.temperature": 42, "nvme.available_spare": 100,
        "nvme.available_spare_threshold": 10, "nvme.spare_margin": 90, "nvme.percentage_used": 3,
        "nvme.power_on_hours": 241, "nvme.unsafe_shutdowns": 0, "nvme.media_errors": 0,
        "nvme.num_err_log_entries": 1, "nvme.data_units_read": 201526305 * U,
        "nvme.data_units_written": 188048213 * U, "nvme.warning_temp_time": 0,
        "nvme.critical_temp_time": 0}},
    "nvme-cli2.3-smart-log-no-device-stderr.txt": {"valid": False, "problems": [nvme.NOT_SMART]},
}


test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)


@pytest.mark.parametrize("name", SAMPLES)
def test_real_sample(name):
    want = EXPECTED[name]
    r = nvme.parse((DATA / name).read_text())
    assert r.valid is want.get("valid", True)
    assert list(r.problems) == want.get("problems", [])
    got = {m.name: m for m in r.metrics}
    assert len(got) == len(r.metrics)  # one of each per drive
    assert {k: got[k].value for k in got} == pytest.approx(want.get("values", {}), rel=0, abs=1e-9)
    for m in r.metrics:
        assert m.unit == UNITS[m.name]
        assert dict(m.labels) == want.get("labels", {})


def test_registered_as_parse_kind():
    assert parsers()["nvme-smart"] is nvme.parse


def test_critical_warning_object_and_string_forms_give_the_bits():
    assert nvme.number({"value": 4, "reliability_degraded": 1}) == 4
    assert nvme.number("0x04") == 4
    assert nvme.number("1,234") == 1234 and nvme.number("100%") == 100 and nvme.number("5’716’382") == 5716382
    for bad in (None, True, "n/a", [1], float("nan"), float("inf"), {"nope": 1}):
        assert nvme.number(bad) is None


def test_bad_values_are_problems_and_absent_fields_are_omitted():
    r = nvme.parse('{"critical_warning": 0, "temperature": "hot", "percent_used": 7}')
    assert not r.valid and r.problems == ("temperature: not a number ('hot')",)
    assert {m.name: m.value for m in r.metrics} == {"nvme.critical_warning": 0, "nvme.percentage_used": 7}


@pytest.mark.parametrize("text", ["", "{}", "[]", '{"temperature": 300}', "null", "{not json",
                                  "Smart Log for NVME device:nvme0 namespace-id:ffffffff\n"])
def test_not_a_smart_log(text):
    r = nvme.parse(text)
    assert not r.valid and r.problems == (nvme.NOT_SMART,) and r.metrics == ()


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_raises_on_any_text(text):
    nvme.parse(text)
    nvme.parse('{"critical_warning": ' + text)
