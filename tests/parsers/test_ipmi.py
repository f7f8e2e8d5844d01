"""The ipmitool parsers (`ipmi-dcmi-power`, `ipmi-sdr`) on every sample in tests/data/ipmitool.

Per sensor table, read by hand from each file: PSU -> (ok, input W, output W), redundancy, node
power meter, node power of the BmcReading (meter, else the sum of PSU inputs), inlet C, fans ok.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest
from samples import covers, sample_names

from harness.model import Metric
from harness.parsers import ipmi, ipmi_sdr
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "ipmitool"
SAMPLES = sample_names("ipmitool")
T, F, N = True, False, None

SDR: dict[str, dict[str, Any]] = {
    "sdr_elist_asus_esc8000a_e12_4psu_power_in_out.txt": dict(
        psus={"PSU1": (T, 480, 464), "PSU2": (T, 496, 464), "PSU3": (T, 496, 464),
              "PSU4": (T, 512, 480)},
        redundant=N, meter=N, node=1984, inlet=19, fans=T),
    "sensor_list_asus_esc8000a_e12_4psu_ami_bmc.txt": dict(
        psus={"PSU1": (T, 480, 448), "PSU2": (T, 496, 464), "PSU3": (T, 480, 480),
              "PSU4": (T, 512, 496)},
        redundant=N, meter=N, node=1968, inlet=19, fans=T),
    "sdr_elist_hp_ilo4_power_supply_2_absent_power_meter.txt": dict(
        psus={"PSU1": (T, N, 225), "PSU2": (F, N, N)},
        redundant=N, meter=220, node=220, inlet=17, fans=T),
    "sdr_type_power_supply_-c_csv_4psu_2_no_reading_fully_redundant.txt": dict(
        psus={"PSU1": (T, N, N), "PSU2": (F, N, N), "PSU3": (T, N, N), "PSU4": (F, N, N)},
        redundant=T, meter=N, node=N, inlet=N, fans=N),
    "sdr_type_power_supply_-c_csv_4psu_ac_lost_no_reading_redundancy_lost.txt": dict(
        psus={"PSU1": (F, N, N), "PSU2": (F, N, N), "PSU3": (T, N, N), "PSU4": (T, N, N)},
        redundant=F, meter=N, node=N, inlet=N, fans=N),
    "sdr_type_power_supply_dell_r740xd_fully_redundant.txt": dict(
        psus={"PSU1": (T, N, N), "PSU2": (T, N, N)}, redundant=T, meter=N, node=N, inlet=N, fans=N),
    "sdr_type_power_supply_nvidia_dgx1_2of4_psu_ac_lost_non_redundant.txt": dict(
        psus={"PSU1": (F, N, N), "PSU2": (F, N, N), "PSU3": (T, N, N), "PSU4": (T, N, N)},
        redundant=F, meter=N, node=N, inlet=N, fans=N),
    "ipmi_sim_sdr_elist_psu2_no_state_asserted.txt": dict(
        psus={"PSU1": (T, 480, N), "PSU2": (F, 500, N)}, redundant=T, meter=950, node=950,
        inlet=23, fans=T),
    "ipmi_sim_csv_sdr_elist_psu2_ac_lost_fan_lcr.txt": dict(
        psus={"PSU1": (T, 480, N), "PSU2": (F, 500, N)}, redundant=F, meter=950, node=950,
        inlet=23, fans=F),
    "ipmi_sim_sdr_list_psu1_failure.txt": dict(  # discrete states as a byte: "0x03"
        psus={"PSU1": (F, 480, N), "PSU2": (T, 500, N)}, redundant=T, meter=950, node=950,
        inlet=23, fans=T),
    "ipmi_sim_sensor_list_psu2_ac_lost_redundancy_lost.txt": dict(
        psus={"PSU1": (T, 480, N), "PSU2": (F, 500, N)}, redundant=F, meter=950, node=950,
        inlet=23, fans=F),
}
# (instantaneous, minimum, maximum, average, sampling period s, timestamp)
DCMI_VALID = {
    "dcmi_power_reading_hp_ilo4_dl380_gen9.txt": (221, 213, 487, 222, 300, "10/08/2026 10:00:33 PM UTC"),
    "ipmi_sim_dcmi_power_reading_activated.txt": (980, 950, 1010, 975, 300, "11/29/26 18:10:31 UTC"),
}
DCMI_INVALID = {
    "ipmi_sim_dcmi_power_reading_deactivated.txt": "state is deactivated",
    "ipmi_sim_dcmi_power_reading_invalid_command_c1.txt": "Invalid command (c1)",
}


def _text(name: str) -> str:
    return (DATA / name).read_text()


def _one(metrics: tuple[Metric, ...], name: str, **labels: str) -> Optional[float]:
    found = [m.value for m in metrics if m.name == name and m.matches(labels)]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


test_every_sample_has_expectations = covers(SAMPLES, SDR, DCMI_VALID, DCMI_INVALID)


@pytest.mark.parametrize("name", sorted(SDR))
def test_sdr_metrics(name: str) -> None:
    want = SDR[name]
    result = parsers()["ipmi-sdr"](_text(name))
    assert result.valid and not result.problems
    assert sorted(result.details["psus"]) == sorted(want["psus"])
    for psu, (ok, power_in, power_out) in want["psus"].items():
        assert _one(result.metrics, "psu.ok", psu=psu) == (None if ok is None else float(ok)), psu
        assert _one(result.metrics, "psu.power_in", psu=psu) == power_in, psu
        assert _one(result.metrics, "psu.power_out", psu=psu) == power_out, psu
    redundant = _one(result.metrics, "psu.redundant")
    assert redundant == (None if want["redundant"] is None else float(want["redundant"]))
    assert _one(result.metrics, "bmc.power", stat="instantaneous") == want["meter"]
    assert _one(result.metrics, "bmc.inlet_temp") == want["inlet"]
    fans = _one(result.metrics, "bmc.fans_ok")
    assert fans == (None if want["fans"] is None else float(want["fans"]))
    assert all(m.unit == "W" for m in result.metrics if m.name.startswith(("psu.power", "bmc.power")))


@pytest.mark.parametrize("name", sorted(SDR))
def test_sdr_reading(name: str) -> None:
    want = SDR[name]
    reading = ipmi.sdr_reading(_text(name), 1234.5)
    assert reading.t == 1234.5
    assert {p.name: (p.ok, p.power_in_w, p.power_out_w) for p in reading.psus} == want["psus"]
    assert [p.name for p in reading.psus] == sorted(want["psus"])  # in PSU order
    assert reading.redundant == want["redundant"]
    assert reading.node_power_w == want["node"]
    assert reading.inlet_temp_c == want["inlet"]
    assert reading.fans_ok == want["fans"]
    if want["node"] is not None and want["meter"] is None:
        assert "sum of PSU input" in reading.source
    for psu in reading.psus:
        assert psu.status, f"{psu.name}: no status words for the report"


def test_ac_lost_and_absent_psus_say_why() -> None:
    dgx = ipmi.sdr_reading(_text("sdr_type_power_supply_nvidia_dgx1_2of4_psu_ac_lost_non_redundant.txt"), 0)
    assert dgx.psus[0].status == "PSU1 Status: Presence detected, Power Supply AC lost"
    hpe = ipmi.sdr_reading(_text("sdr_elist_hp_ilo4_power_supply_2_absent_power_meter.txt"), 0)
    assert "PS 2 Presence: Device Absent" in hpe.psus[1].status
    sim = ipmi.sdr_reading(_text("ipmi_sim_sdr_elist_psu2_no_state_asserted.txt"), 0)
    assert sim.psus[1].status == "PSU2 Status: no state asserted"


@pytest.mark.parametrize("name", sorted(DCMI_VALID))
def test_dcmi_reading(name: str) -> None:
    inst, low, high, avg, period, stamp = DCMI_VALID[name]
    result = parsers()["ipmi-dcmi-power"](_text(name))
    assert result.valid and not result.problems
    got = {m.labels["stat"]: m.value for m in result.metrics if m.name == "bmc.power"}
    assert got == {"instantaneous": inst, "minimum": low, "maximum": high, "average": avg}
    # the timestamp and the sampling period run together on one line: both still read right
    assert result.details["sampling_period_s"] == period
    assert result.details["timestamp"] == stamp
    assert result.details["state"] == "activated"


@pytest.mark.parametrize("name", sorted(DCMI_INVALID))
def test_dcmi_unusable_is_invalid(name: str) -> None:
    result = ipmi.parse_dcmi(_text(name))
    assert not result.valid and not result.metrics
    assert DCMI_INVALID[name] in result.problems[0]


def test_ipmi_reading_prefers_valid_dcmi_then_meter_then_psu_sum() -> None:
    asus = _text("sdr_elist_asus_esc8000a_e12_4psu_power_in_out.txt")
    both = ipmi.ipmi_reading(_text("dcmi_power_reading_hp_ilo4_dl380_gen9.txt"), asus, 7.0, "x")
    assert both.node_power_w == 221 and both.source == "x (node power: dcmi)"
    assert len(both.psus) == 4 and both.t == 7.0
    deactivated = ipmi.ipmi_reading(_text("ipmi_sim_dcmi_power_reading_deactivated.txt"), asus, 7.0)
    assert deactivated.node_power_w == 1984  # zeros of a deactivated reading are not used
    meter = ipmi.ipmi_reading(None, _text("sdr_elist_hp_ilo4_power_supply_2_absent_power_meter.txt"), 0)
    assert meter.node_power_w == 220 and "Power Meter" in meter.source
    dcmi_only = ipmi.ipmi_reading(_text("ipmi_sim_dcmi_power_reading_activated.txt"), None, 0)
    assert dcmi_only.node_power_w == 980 and dcmi_only.psus == ()


@pytest.mark.parametrize("text, expected", [
    ("", "(empty output)"),
    ("Error: Unable to establish IPMI v2 / RMCP+ session\n", "Unable to establish IPMI v2"),
    ("Could not open device at /dev/ipmi0 or /dev/ipmi/0 or /dev/ipmidev/0: No such file or"
     " directory\n", "Could not open device"),
])
def test_sdr_without_rows_is_invalid(text: str, expected: str) -> None:
    result = ipmi.parse_sdr(text)
    assert not result.valid and expected in result.problems[0]


def test_dcmi_zero_watts_is_no_measurement() -> None:
    # synthetic: the real activated sample with every reading set to 0 W
    text = _text("ipmi_sim_dcmi_power_reading_activated.txt")
    for watts in ("980", "950", "1010", "975"):
        text = text.replace(f" {watts} Watts", " 0 Watts")
    result = ipmi.parse_dcmi(text)
    assert not result.valid and "0 W for a running node" in result.problems[0]


def test_dcmi_garbage_is_invalid() -> None:
    assert ipmi.parse_dcmi("PSU1 Power In | 10h | ok | 10.1 | 480 Watts\n").problems == (ipmi.NOT_DCMI,)


def test_csv_words_keep_their_commas() -> None:
    rows = ipmi_sdr.sensor_rows(_text("ipmi_sim_csv_sdr_elist_psu2_ac_lost_fan_lcr.txt"))
    psu2 = next(r for r in rows if r.name == "PSU2 Status")
    assert psu2.words == ("Presence detected", "Power Supply AC lost") and psu2.entity == "10.2"
    fan = next(r for r in rows if r.name == "System Fan1")
    assert (fan.value, fan.unit, fan.status) == (500.0, "RPM", "lcr")


def test_sensor_list_bits() -> None:
    sim = _text("ipmi_sim_sensor_list_psu2_ac_lost_redundancy_lost.txt")
    rows = {r.name: r for r in ipmi_sdr.sensor_rows(sim)}
    assert rows["PSU2 Status"].bits == 0x09
    assert rows["PSU2 Status"].words == ("Presence detected", "Power Supply AC lost")
    assert rows["PS Redundancy"].words == ("Redundancy Lost",)
    asus = {r.name: r for r in ipmi_sdr.sensor_rows(_text("sensor_list_asus_esc8000a_e12_4psu_ami_bmc.txt"))}
    assert asus["PSU1 AC Lost"].bits == 0x01 and asus["PSU1 AC Lost"].raw_state == "0x0180"
    assert asus["CPU2 Temperature"].value is None and asus["CPU2 Temperature"].no_reading


def test_sdr_list_state_byte() -> None:
    rows = {r.name: r for r in ipmi_sdr.sensor_rows(_text("ipmi_sim_sdr_list_psu1_failure.txt"))}
    assert rows["PSU1 Status"].words == ("Presence detected", "Failure detected")
    assert rows["PS Redundancy"].words == ("Fully Redundant",)
    assert (rows["PSU1 Power In"].value, rows["PSU1 Power In"].unit) == (480.0, "Watts")


def test_number_too_large_is_not_a_reading() -> None:
    # synthetic: 400 digits overflow a float; the row must not become an infinite metric
    rows = ipmi_sdr.sensor_rows("PSU1 Power In | 10h | ok | 10.1 | " + "9" * 400 + " Watts\n")
    assert rows[0].value is None
