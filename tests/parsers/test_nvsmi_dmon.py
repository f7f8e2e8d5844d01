"""The `nvidia-smi dmon` parser on every real capture: columns from the header, never assumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import harness
from hypothesis import given, settings
from hypothesis import strategies as st
from samples import covers, sample_names

from harness.catalog import METRICS
from harness.parsers import nvsmi_dmon
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "nvidia-smi"
DMON = sample_names("nvidia-smi", "dmon_*.txt")
RAMP = "dmon_default_1x_load_ramp_morpheus.txt"
PT = "dmon_-s_pt_2x_rtx_pro_6000_blackwell.txt"
TD = "dmon_-s_mutc_-o_TD_1x_a10_date_time_blank_line.txt"


def values(r) -> dict[tuple[str, int], float]:
    return {(m.name, m.labels["gpu"]): m.value for m in r.metrics}


# file -> (samples per GPU, exact metrics)
EXPECT = {
    PT: ({0: 6, 1: 6}, {("gpu.power_mean", 0): 30.0, ("gpu.power_max", 0): 30.0, ("gpu.temp_max", 0): 25.0,
                        ("gpu.power_mean", 1): 166 / 6, ("gpu.power_max", 1): 28.0,
                        ("gpu.temp_max", 1): 25.0}),
    RAMP: ({0: 9}, {("gpu.power_mean", 0): 1866 / 9, ("gpu.power_max", 0): 281.0, ("gpu.temp_max", 0): 57.0,
                    ("gpu.util_mean", 0): 460 / 9, ("gpu.sm_clock_mean", 0): 1630.0}),
    TD: ({0: 6}, {("gpu.util_mean", 0): 25 / 6, ("gpu.sm_clock_mean", 0): 1695.0}),
}


test_every_sample_has_expectations = covers(DMON, EXPECT)


@pytest.mark.parametrize("name", DMON)
def test_real_dmon(name: str):
    samples, expected = EXPECT[name]
    r = nvsmi_dmon.parse((DATA / name).read_text())
    assert r.valid and r.problems == () and r.details["samples"] == samples
    assert values(r) == pytest.approx(expected)  # exact set: mtemp '-' everywhere gives no mem_temp_max
    assert not r.details["truncated_tail"] and "unit_mismatch" not in r.details
    for m in r.metrics:
        assert m.name in METRICS and m.unit == METRICS[m.name].unit, m


def test_columns_come_from_the_header():
    r = nvsmi_dmon.parse((DATA / TD).read_text())
    assert r.details["columns"][:4] == ["Date", "Time", "gpu", "fb"] and r.details["columns"][-1] == "pclk"
    assert r.details["units"]["pclk"] == "MHz" and r.details["units"]["Date"] == "YYYYMMDD"
    r = nvsmi_dmon.parse((DATA / PT).read_text())
    assert r.details["columns"] == ["gpu", "pwr", "gtemp", "mtemp", "rxpci", "txpci"]
    # Synthetic: the real ramp capture with its columns reversed, header and rows alike.
    lines = (DATA / RAMP).read_text().splitlines()
    flipped = "\n".join(("# " if line.startswith("#") else "") + " ".join(reversed(line.lstrip("#").split()))
                        for line in lines)
    again = nvsmi_dmon.parse(flipped)
    assert again.valid and values(again) == values(nvsmi_dmon.parse((DATA / RAMP).read_text()))


def test_cut_short_last_row_is_dropped_but_a_broken_middle_row_is_invalid():
    text = (DATA / RAMP).read_text()
    r = nvsmi_dmon.parse(text.rstrip("\n")[:-9])  # the capture stopped mid-line
    assert r.valid and r.details["truncated_tail"] and r.details["samples"] == {0: 8}
    assert values(r)[("gpu.power_max", 0)] == 279.0
    lines = text.splitlines()
    lines[5] = lines[5][:20]
    r = nvsmi_dmon.parse("\n".join(lines))
    assert not r.valid and r.problems == ("line 6: 3 fields for 10 columns",)


def test_garbage_pmon_and_unread_columns_are_invalid():
    for text in ("", "hello", "    0    70    48\n"):
        r = nvsmi_dmon.parse(text)
        assert not r.valid
        assert r.problems == ("not nvidia-smi dmon output (no '# gpu ...' header naming the columns)",)
    pmon = ("# gpu        pid  type    sm   mem   enc   dec   command\n"  # synthetic, pmon's header
            "# Idx          #   C/G     %     %     %     %   name\n"
            "    0      22010     C    98    56     -     -   x\n")
    assert nvsmi_dmon.parse(pmon).problems == ("this is nvidia-smi pmon output (per-process rows), not dmon",)
    r = nvsmi_dmon.parse("# gpu    fb  bar1\n# Idx    MB    MB\n    0   239     3\n")  # synthetic: `-s m`
    assert not r.valid and "none of the columns" in r.problems[0] and r.metrics == ()
    r = nvsmi_dmon.parse("# gpu   pwr\n# Idx     W\n")
    assert not r.valid and r.problems == ("no samples under the dmon header",)
    assert not nvsmi_dmon.parse((DATA / "nvidia-smi_default_table_h200_550.90.12.txt").read_text()).valid


def test_a_unit_other_than_dmons_own_is_not_read():
    text = (DATA / PT).read_text().replace("# Idx      W ", "# Idx     mW ")  # synthetic unit change
    r = nvsmi_dmon.parse(text)
    assert r.valid and r.details["unit_mismatch"] == {"pwr": "mW"}
    assert {name for name, _ in values(r)} == {"gpu.temp_max"}


def test_crlf_reads_the_same():
    text = (DATA / RAMP).read_text()
    assert nvsmi_dmon.parse(text.replace("\n", "\r\n")).metrics == nvsmi_dmon.parse(text).metrics


def test_registered_and_cli():
    assert parsers()["nvidia-smi-dmon"] is nvsmi_dmon.parse
    out = harness("parse", "nvidia-smi-dmon", str(DATA / RAMP))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kind"] == "nvidia-smi-dmon" and doc["valid"] is True
    got = {m["name"]: m["value"] for m in doc["metrics"]}
    assert got["gpu.power_max"] == 281 and got["gpu.temp_max"] == 57 and got["gpu.sm_clock_mean"] == 1630


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*"# -0123456789\n", "gpu", "pwr", "gtemp", "sm", "pclk", "Idx", "W", "#Date",
                                  "pid"]), max_size=120).map(" ".join))
def test_never_raises(text: str):
    r = nvsmi_dmon.parse(text)
    assert r.valid == (not r.problems)
