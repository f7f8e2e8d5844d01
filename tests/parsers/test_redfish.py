"""The Redfish parser (`redfish-power`) on every resource in tests/data/redfish, alone and bundled.

Per file, read by hand: node power (PowerConsumedWatts or EnvironmentMetrics PowerWatts),
PowerMetrics min/max/average, PSU -> (ok, input W, output W, capacity W), redundancy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest
from samples import covers, sample_names

from harness.model import Metric
from harness.parsers import redfish
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "redfish"
SAMPLES = sample_names("redfish", "*.json")
T, F, N = True, False, None
DMTF, DELL, LENOVO, DGX = ("dmtf-rackmount1-Chassis-1U-", "libredfish-dell-idrac9-",
                           "libredfish-lenovo-xcc-", "libredfish-nvidia-dgx-h100-")

EXPECTED: dict[str, dict[str, Any]] = {
    DMTF + "EnvironmentMetrics.json": dict(node=374, stats={}, psus={}, redundant=N),
    DMTF + "Power.json": dict(node=344, stats={"minimum": 271, "maximum": 489, "average": 319},
                              psus={"PSU0": (F, N, 325, 800)}, redundant=N),  # Health Warning
    DMTF + "PowerSubsystem-PowerSupplies-Bay1-Metrics.json": dict(
        node=N, stats={}, psus={"PSU1": (N, 937.4, 937.4, N)}, redundant=N),
    DMTF + "PowerSubsystem-PowerSupplies-Bay1.json": dict(
        node=N, stats={}, psus={"PSU1": (F, N, N, 400)}, redundant=N),
    DMTF + "PowerSubsystem-PowerSupplies-Bay2-absent.json": dict(
        node=N, stats={}, psus={"PSU2": (F, N, N, N)}, redundant=N),
    DMTF + "PowerSubsystem.json": dict(node=N, stats={}, psus={}, redundant=F),  # UnavailableOffline
    "iserver-cisco-ucsc-c240-m5sn-Chassis-1-Power.json": dict(
        node=324, stats={"minimum": 186, "maximum": 495, "average": 349},
        psus={"PSU1": (T, 173, 155, N), "PSU2": (T, 176, 152, N)}, redundant=N),
    "iserver-cisco-ucsx-9508-Chassis-1-Power-absent-psus.json": dict(
        node=N, stats={}, redundant=T,
        psus={"PSU1": (T, N, N, N), "PSU2": (F, N, N, N), "PSU3": (F, N, N, N),
              "PSU4": (T, N, N, N), "PSU5": (F, N, N, N), "PSU6": (F, N, N, N)}),
    DELL + "Chassis-System.Embedded.1-PowerSubsystem.json": dict(node=N, stats={}, psus={}, redundant=N),
    DELL + "PowerSubsystem-PowerSupplies-PSU.Slot.1-Metrics.json": dict(
        node=N, stats={}, psus={"PSU1": (N, 303, 273, N)}, redundant=N),
    DELL + "PowerSubsystem-PowerSupplies-PSU.Slot.1.json": dict(
        node=N, stats={}, psus={"PSU1": (T, N, N, 2400)}, redundant=N),
    LENOVO + "Chassis-1-EnvironmentMetrics.json": dict(node=700, stats={}, psus={}, redundant=N),
    LENOVO + "Chassis-1-PowerSubsystem.json": dict(node=N, stats={}, psus={}, redundant=T),
    LENOVO + "PowerSubsystem-PowerSupplies-PSU1-Metrics.json": dict(
        node=N, stats={}, psus={"PSU1": (N, 200, 180, N)}, redundant=N),
    LENOVO + "PowerSubsystem-PowerSupplies-PSU1.json": dict(
        node=N, stats={}, psus={"PSU1": (T, N, N, 2400)}, redundant=N),
    # no PowerConsumedWatts and PowerMetrics all 0 over IntervalInMin 0: no node power, not 0 W
    DGX + "Chassis-DGX-Power-no-consumedwatts.json": dict(node=N, stats={}, psus={}, redundant=N),
    DGX + "PowerSubsystem-PowerSupplies-PSU0-Metrics.json": dict(
        node=N, stats={}, psus={"PSU0": (N, N, N, N)}, redundant=N),
    DGX + "PowerSubsystem-PowerSupplies-PSU0.json": dict(  # no Status: unknown
        node=N, stats={}, psus={"PSU0": (N, N, N, N)}, redundant=N),
    # PowerInputWatts 900 is the PSU's rated max input (Range1MaxInputPowerWatts): dropped
    "telegraf-dell-idrac9-Chassis-System.Embedded.1-Power.json": dict(
        node=429, stats={"minimum": 425, "maximum": 436, "average": 426},
        psus={"PSU1": (T, N, 203, 750)}, redundant=N),
    # two PSUs both named "HpeServerPowerSupply": labelled by Oem.Hpe.BayNumber
    "telegraf-hpe-ilo5-Chassis-1-Power.json": dict(
        node=221, stats={"minimum": 220, "maximum": 252, "average": 221},
        psus={"PSU1": (T, N, 0, 800), "PSU2": (T, N, 90, 800)}, redundant=T),
    # CONSTRUCTED from the two above (SOURCES.md): a PSU that says OK with no feed is unknown
    "iserver-cisco-ucsc-c240-m5sn-Chassis-1-Power-CONSTRUCTED-psu2-no-input.json": dict(
        node=324, stats={"minimum": 186, "maximum": 495, "average": 349},
        psus={"PSU1": (T, 173, 155, N), "PSU2": (N, N, N, N)}, redundant=N),
    "telegraf-hpe-ilo5-Chassis-1-Power-CONSTRUCTED-bay2-null-readings.json": dict(
        node=221, stats={"minimum": 220, "maximum": 252, "average": 221},
        psus={"PSU1": (T, N, 0, 800), "PSU2": (N, N, N, 800)}, redundant=T),
}


def _docs(*names: str) -> dict[str, Any]:
    docs = {}
    for name in names:
        doc = json.loads((DATA / name).read_text())
        docs[doc.get("@odata.id") or name] = doc
    return docs


def _one(metrics: tuple[Metric, ...], name: str, **labels: str) -> Optional[float]:
    found = [m.value for m in metrics if m.name == name and m.matches(labels)]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def _flag(v: Optional[bool]) -> Optional[float]:
    return None if v is None else float(v)


test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)


@pytest.mark.parametrize("name", SAMPLES)
def test_metrics(name: str) -> None:
    want = EXPECTED[name]
    result = parsers()["redfish-power"]((DATA / name).read_text())
    assert result.valid and not result.problems
    assert _one(result.metrics, "bmc.power", stat="instantaneous") == want["node"]
    stats = {m.labels["stat"]: m.value for m in result.metrics
             if m.name == "bmc.power" and m.labels["stat"] != "instantaneous"}
    assert stats == want["stats"]
    assert result.details["psus"] == sorted(want["psus"], key=lambda p: int(p[3:]))
    for psu, (ok, power_in, power_out, capacity) in want["psus"].items():
        assert _one(result.metrics, "psu.ok", psu=psu) == _flag(ok), psu
        assert _one(result.metrics, "psu.power_in", psu=psu) == power_in, psu
        assert _one(result.metrics, "psu.power_out", psu=psu) == power_out, psu
        assert _one(result.metrics, "psu.capacity", psu=psu) == capacity, psu
    assert _one(result.metrics, "psu.redundant") == _flag(want["redundant"])


def test_power_subsystem_capacity_in_details() -> None:
    assert redfish.parse((DATA / (DELL + "Chassis-System.Embedded.1-PowerSubsystem.json")).read_text()) \
        .details["capacity_w"] == 6720.0


def test_dmtf_bundle_joins_supplies_with_their_metrics() -> None:
    docs = _docs(DMTF + "PowerSubsystem.json", DMTF + "PowerSubsystem-PowerSupplies-Bay1.json",
                 DMTF + "PowerSubsystem-PowerSupplies-Bay1-Metrics.json",
                 DMTF + "PowerSubsystem-PowerSupplies-Bay2-absent.json", DMTF + "EnvironmentMetrics.json")
    reading = redfish.reading(docs, 5.0, "redfish https://bmc")
    assert reading.t == 5.0 and reading.node_power_w == 374
    assert reading.source == "redfish https://bmc (node power: EnvironmentMetrics)"
    assert [(p.name, p.ok, p.power_in_w, p.power_out_w, p.capacity_w) for p in reading.psus] == [
        ("PSU1", False, 937.4, 937.4, 400), ("PSU2", False, None, None, None)]
    assert reading.psus[0].status == "State Enabled, Health Warning"
    assert reading.psus[1].status == "State Absent"
    assert reading.redundant is False
    # the same as a bundle file through the parse kind
    result = redfish.parse(json.dumps(docs))
    assert result.valid and sorted(result.details["resources"]) == sorted(
        ["EnvironmentMetrics", "PowerSubsystem", "PowerSupply", "PowerSupply", "PowerSupplyMetrics"])


def test_lenovo_bundle() -> None:
    docs = _docs(LENOVO + "Chassis-1-PowerSubsystem.json",
                 LENOVO + "PowerSubsystem-PowerSupplies-PSU1.json",
                 LENOVO + "PowerSubsystem-PowerSupplies-PSU1-Metrics.json",
                 LENOVO + "Chassis-1-EnvironmentMetrics.json")
    reading = redfish.reading(docs, 0)
    assert reading.node_power_w == 700 and reading.redundant is True
    assert [(p.name, p.ok, p.power_in_w, p.power_out_w, p.capacity_w) for p in reading.psus] == [
        ("PSU1", True, 200, 180, 2400)]
    assert reading.inlet_temp_c is None  # its TemperatureCelsius does not say it is the inlet


def test_node_power_falls_back_to_psu_input_sum() -> None:
    docs = _docs(DELL + "Chassis-System.Embedded.1-PowerSubsystem.json",
                 DELL + "PowerSubsystem-PowerSupplies-PSU.Slot.1.json",
                 DELL + "PowerSubsystem-PowerSupplies-PSU.Slot.1-Metrics.json")
    reading = redfish.reading(docs, 0)
    assert reading.node_power_w == 303 and "sum of PSU input" in reading.source
    result = redfish.parse(json.dumps(docs))
    assert _one(result.metrics, "bmc.power", stat="instantaneous") is None  # a sum, not a meter


def test_dgx_has_no_node_power() -> None:
    docs = _docs(DGX + "Chassis-DGX-Power-no-consumedwatts.json",
                 DGX + "PowerSubsystem-PowerSupplies-PSU0.json",
                 DGX + "PowerSubsystem-PowerSupplies-PSU0-Metrics.json")
    reading = redfish.reading(docs, 0)
    assert reading.node_power_w is None
    assert [(p.name, p.ok, p.status) for p in reading.psus] == [("PSU0", None, "no Status")]


@pytest.mark.parametrize("text, expected", [
    ("", "not JSON"),
    ("<html>401 Unauthorized</html>", "not JSON"),
    ("[1, 2]", "not a Redfish power resource"),
    ('{"@odata.type": "#Chassis.v1_14_0.Chassis", "Id": "1"}', "not a Redfish power resource"),
    ('{"/redfish/v1/Chassis/1": {"@odata.type": "#Chassis.v1_14_0.Chassis"}}',
     "not a Redfish power resource"),
])
def test_invalid(text: str, expected: str) -> None:
    result = redfish.parse(text)
    assert not result.valid and expected in result.problems[0]


@pytest.mark.parametrize("status, ok", [
    ({"State": "Enabled", "Health": "OK"}, True),
    ({"State": "Enabled"}, True),
    ({"State": "StandbySpare", "Health": "OK"}, True),
    ({"State": "Enabled", "Health": "Critical"}, False),
    ({"State": "UnavailableOffline", "Health": "OK"}, False),
    ({"State": "Absent"}, False),
    ({"HealthRollup": "Warning"}, False),
    ({}, None),
    (None, None),
])
def test_psu_ok(status: Any, ok: Optional[bool]) -> None:
    assert redfish.psu_ok(status)[0] is ok


CISCO_NO_INPUT = "iserver-cisco-ucsc-c240-m5sn-Chassis-1-Power-CONSTRUCTED-psu2-no-input.json"
HPE_NULLS = "telegraf-hpe-ilo5-Chassis-1-Power-CONSTRUCTED-bay2-null-readings.json"
NO_FEED = "State Enabled, Health OK; " + redfish.NO_INPUT


@pytest.mark.parametrize("name", [CISCO_NO_INPUT, HPE_NULLS])
def test_psu_that_says_ok_without_any_feed_is_unknown_and_named(name: str) -> None:
    result = redfish.parse((DATA / name).read_text())
    assert result.valid  # a reading of the node, not a broken read
    assert result.details["unknown_psus"] == {"PSU2": NO_FEED}
    reading = redfish.reading(redfish.documents((DATA / name).read_text())[0], 0)
    assert [(p.name, p.ok) for p in reading.psus] == [("PSU1", True), ("PSU2", None)]


def test_standby_psu_with_line_voltage_but_no_output_stays_ok() -> None:
    # HPE PSU1: LastPowerOutputWatts 0 (standby) but LineInputVoltage 205: fed
    result = redfish.parse((DATA / "telegraf-hpe-ilo5-Chassis-1-Power.json").read_text())
    assert result.details["unknown_psus"] == {}


@pytest.mark.parametrize("readings", [
    {"PowerInputWatts": 0, "PowerOutputWatts": 0, "LastPowerOutputWatts": 0, "LineInputVoltage": 0},
    {"PowerInputWatts": None, "LineInputVoltage": None},
    {},
])
def test_zero_null_or_missing_readings_are_no_feed(readings: dict[str, Any]) -> None:
    doc = json.loads((DATA / "iserver-cisco-ucsc-c240-m5sn-Chassis-1-Power.json").read_text())
    psu2 = doc["PowerSupplies"][1]
    for key in ("PowerInputWatts", "PowerOutputWatts", "LastPowerOutputWatts", "LineInputVoltage"):
        psu2.pop(key)
    psu2.update(readings)
    assert redfish.parse(json.dumps(doc)).details["unknown_psus"] == {"PSU2": NO_FEED}
    psu2["LineInputVoltage"] = 229  # a live feed: OK again
    assert redfish.parse(json.dumps(doc)).details["unknown_psus"] == {}


def test_bmc_without_any_psu_reading_is_not_judged_on_feed() -> None:
    # UCS X9508 reports no PSU readings at all: its OK PSUs stay OK (nothing to tell them apart)
    result = redfish.parse((DATA / "iserver-cisco-ucsx-9508-Chassis-1-Power-absent-psus.json").read_text())
    assert result.details["unknown_psus"] == {}


def test_power_subsystem_psu_without_live_metrics_is_unknown() -> None:
    docs = _docs(DELL + "Chassis-System.Embedded.1-PowerSubsystem.json",
                 DELL + "PowerSubsystem-PowerSupplies-PSU.Slot.1.json",
                 DELL + "PowerSubsystem-PowerSupplies-PSU.Slot.1-Metrics.json")
    slot1 = next(d for d in docs.values() if d.get("Id") == "PSU.Slot.1")
    slot2 = json.loads(json.dumps(slot1).replace("PSU.Slot.1", "PSU.Slot.2").replace("PS1 ", "PS2 "))
    docs[slot2["@odata.id"]] = slot2  # a second PSU, OK, whose Metrics the BMC does not give
    reading = redfish.reading(docs, 0)
    assert [(p.name, p.ok) for p in reading.psus] == [("PSU1", True), ("PSU2", None)]
    metrics = next(d for d in docs.values() if redfish.doc_type(d) == "PowerSupplyMetrics")
    dead = json.loads(json.dumps(metrics).replace("PSU.Slot.1", "PSU.Slot.2"))
    for key in ("InputPowerWatts", "OutputPowerWatts", "InputVoltage"):
        if isinstance(dead.get(key), dict):
            dead[key]["Reading"] = 0
    docs[dead["@odata.id"]] = dead  # Metrics there, every reading 0: still no feed
    assert [(p.name, p.ok) for p in redfish.reading(docs, 0).psus] == [("PSU1", True), ("PSU2", None)]
