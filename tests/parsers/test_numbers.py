"""Numbers longer than any reading (parsers.base.integer, base.number, bounded patterns): what each
kind does with one, on its real output. A count, index or code of 5,000 digits is no reading: its
line, row or field is left out (never read as its first digits, never inf, never a crash)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from harness.parsers import base
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data"
LONG = "9" * 5000


@pytest.mark.parametrize(("tok", "want"), [
    ("42", 42), (" 7 ", 7), ("-7", None), ("18446744073709551615", 2**64 - 1), ("9" * 21, None),
    (LONG, None), ("+5", None), ("", None), ("-", None), ("４２", None), ("1e3", None), ("0x10", None),
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


def test_a_fio_error_code_no_errno_holds_is_named_not_a_crash():
    path = sorted((DATA / "fio").glob("*.json"))[0]
    doc = json.loads(path.read_text()[path.read_text().index("{"):])
    doc["jobs"][0]["error"] = 1e300
    res = parsers()["fio"](json.dumps(doc))
    assert not res.valid and any("(not an errno)" in p for p in res.problems), res.problems


@pytest.mark.parametrize("value", [10**400, -(10**400), float("nan"), "nan", "1" + "0" * 400])
def test_a_command_check_value_no_float_holds_is_not_finite_not_a_crash(value: object):
    """The command check names a value that is not finite ("not a finite number (inf)"): an int
    past any float is one (it was an OverflowError)."""
    from harness.parsers import extract

    got = extract.by_json_path(json.dumps({"r": value}, allow_nan=True), "r")[0][1]
    assert got is not None and not math.isfinite(got)
    got = extract.by_regex(f"v={value}", re.compile(r"v=(?P<value>\S+)"))[0][1]
    assert got is not None and not math.isfinite(got)


@pytest.mark.parametrize(("field", "value"), [("tflops", float("nan")), ("iterations", 10**400),
                                               ("errors", 1.5)])
def test_a_builtin_burn_result_that_is_no_count_is_not_ok(field: str, value: object):
    lines = [{"event": "start", "backend": "torch", "dtype": "bf16", "size": 64, "devices": [0]},
             {"event": "result", "gpu": 0, "iterations": 9, "errors": 0, "verified": 8, "tflops": 1.0,
              field: value}, {"event": "done"}]
    res = parsers()["builtin-burn"]("\n".join(json.dumps(e) for e in lines))
    assert [m.value for m in res.metrics if m.name == "gpu_burn.ok"] == [0.0]
    assert any("not a finite number" in p for p in res.problems), res.problems
