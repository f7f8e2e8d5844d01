"""Numbers longer than any reading (parsers.base.integer, base.number, bounded patterns): what each
kind does with one, on its real output. A count, index or code of 5,000 digits is no reading: its
line, row or field is left out (never read as its first digits, never inf, never a crash)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.parsers import base
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data"
LONG = "9" * 5000


@pytest.mark.parametrize(("tok", "want"), [
    ("42", 42), (" -7 ", -7), ("18446744073709551615", 2**64 - 1), ("9" * 21, None), (LONG, None),
    ("+5", None), ("", None), ("-", None), ("４２", None), ("1e3", None), ("0x10", None),
])
def test_integer_reads_ascii_digits_of_a_bounded_length(tok: str, want: int | None):
    assert base.integer(tok) == want


def test_integer_takes_its_own_bound():
    assert base.integer("1234567890", 9) is None and base.integer("123456789", 9) == 123456789


@pytest.mark.parametrize(("value", "want"), [
    (3, 3.0), (2.5, 2.5), (10**400, None), (-(10**400), None), (float("inf"), None), (float("nan"), None),
    (True, None), ("3", None), (None, None),
])
def test_number_is_a_finite_float_of_a_json_value(value: object, want: float | None):
    assert base.number(value) == want


def metrics(kind: str, text: str) -> dict[str, list[dict[str, object]]]:
    out: dict[str, list[dict[str, object]]] = {}
    for m in parsers()[kind](text).metrics:
        out.setdefault(m.name, []).append({**m.labels, "value": m.value})
    return out


def test_an_xid_code_too_long_is_no_xid_not_its_first_digits():
    text = (DATA / "xid" / "gpud_dmesg_ctime_xe9680_xid119_gsp_timeout.log").read_text()
    before = metrics("xid", text)["gpu.xid"]
    after = metrics("xid", text.replace("): 119, pid", f"): {LONG}, pid", 1))["gpu.xid"]
    assert [m["xid"] for m in after] == [m["xid"] for m in before]  # no code 999999999 appears
    assert after[0]["value"] == before[0]["value"] - 1  # that one line is not counted


def test_a_smart_attribute_too_long_reads_as_one_not_there():
    """Attribute 194's raw temperature of 5,000 digits: the temperature comes from where it would
    without 194 (attribute 190 here), never from that number."""
    text = (DATA / "smartctl" / "disk-smart-perl-seagate-st3250410as-smartctl541-a.txt").read_text()
    line = next(x for x in text.splitlines() if x.lstrip().startswith("194 "))
    raw = line.split()[9]
    long = metrics("smartctl", text.replace(line, line.replace(raw, LONG, 1)))
    assert long["disk.temperature"] == metrics("smartctl", text.replace(line + "\n", ""))["disk.temperature"]


def test_an_iperf3_byte_count_no_float_holds_is_not_a_reading():
    path = DATA / "iperf3" / "cloudpilot-iperf3.9-tcp-10s-omit3-retransmits.json"
    doc = json.loads(path.read_text())
    doc["end"]["sum_received"]["bits_per_second"] = 10**400
    res = parsers()["iperf3"](json.dumps(doc))
    assert all(m.value < 1e308 for m in res.metrics)
    assert not any(m.name.endswith("received") and m.value > 1e300 for m in res.metrics)
