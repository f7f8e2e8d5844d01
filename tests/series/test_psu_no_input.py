"""A PSU that says OK but shows no feed (issue #20) counts toward neither capacity nor redundancy.

The readings are parsed from tests/data/redfish: the real Cisco UCS C240 M5 and HPE iLO 5 Power
resources, and the two CONSTRUCTED copies where PSU2's readings were removed or set to null
(tests/data/redfish/SOURCES.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.model import BmcReading, Outcome
from harness.parsers import redfish
from harness.series import psu as power
from harness.series.psu import BmcTick, PsuPolicy

DATA = Path(__file__).parents[1] / "data" / "redfish"
CISCO = "iserver-cisco-ucsc-c240-m5sn-Chassis-1-Power.json"
CISCO_NO_INPUT = "iserver-cisco-ucsc-c240-m5sn-Chassis-1-Power-CONSTRUCTED-psu2-no-input.json"
HPE_NULLS = "telegraf-hpe-ilo5-Chassis-1-Power-CONSTRUCTED-bay2-null-readings.json"
TWO = PsuPolicy(2, 1600.0, "N+1")
WHY = ("PSU2 (State Enabled, Health OK; reports OK but no input power or line voltage: "
       "unplugged or dead feed?)")


def read(name: str) -> BmcReading:
    return redfish.reading(redfish.documents((DATA / name).read_text())[0], 0.0)


def test_the_real_reading_has_both_psus_healthy():
    (ev,) = power.judge_psus([BmcTick(-1, "before", read(CISCO))], TWO)
    assert ev.outcome is Outcome.PASS and ev.measured == 2


@pytest.mark.parametrize("name", [CISCO_NO_INPUT, HPE_NULLS])
def test_no_feed_psu_breaks_redundancy_and_is_named(name):
    r = read(name)
    assert power.healthy_count(r) == 1
    (ev,) = power.judge_psus([BmcTick(-1, "before", r)], TWO)
    assert ev.outcome is Outcome.FAIL and ev.metric == "power.psus_ok" and ev.measured == 1
    assert ev.message == f"1 of 2 PSUs healthy before the load: N+1 redundancy not intact; not counted: {WHY}"


def test_no_feed_psu_leaves_too_little_capacity_to_carry_the_load():
    both = PsuPolicy(2, 1600.0, "none")  # both PSUs carry the load
    (ev,) = power.judge_psus([BmcTick(3.0, "load", read(CISCO_NO_INPUT))], both)
    assert ev.outcome is Outcome.FAIL
    assert ev.message == ("1 of 2 PSUs healthy 3.0 s into the load: fewer than the 2 that carry the load "
                          f"(none); not counted: {WHY}")


def test_even_with_the_bmc_claiming_redundancy_the_no_feed_psu_is_not_counted():
    r = read(HPE_NULLS)
    assert r.redundant is True  # the BMC's own redundancy sensor still says OK
    (ev,) = power.judge_psus([BmcTick(-1, "before", r)], TWO)
    assert ev.outcome is Outcome.FAIL and WHY in ev.message


def test_without_a_policy_the_pass_still_names_the_psu():
    (ev,) = power.judge_psus([BmcTick(0, "load", read(CISCO_NO_INPUT))], None)
    assert ev.outcome is Outcome.PASS  # no profile: nothing says how many PSUs the node needs
    assert ev.message == f"1 of 2 PSUs OK in every reading (load); state unknown: {WHY}"


def test_psu_table_shows_the_reason():
    rows = {r["psu"]: r for r in power.psu_table([BmcTick(0, "load", read(CISCO_NO_INPUT))])}
    assert rows["PSU2"]["during"] is None and "unplugged or dead feed?" in rows["PSU2"]["status"]
    assert rows["PSU1"]["during"] is True
