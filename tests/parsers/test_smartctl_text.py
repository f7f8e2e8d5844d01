"""smartctl's plain text: locales, the JSON path's metric names, misreads refused, the -j fallback.

The locale variants are made from the real `linuxfabrik-samsung-pm981-smartctl70-a.txt` by
regrouping its numbers the way smartctl prints them under other locales (the German figures of
issue #20: `1.069` hours, `20.118.246 [10,3 TB]`); the real dot/comma sample is the zbx-smartctl
fragment in test_smartctl.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from pathlib import Path

import pytest
from clihelp import harness
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.checks.base import CheckContext
from harness.checks.nvme_health import KIND, NvmeHealthParams
from harness.compare.judge import evaluate
from harness.compare.rules import Rule
from harness.config.models import Expectation
from harness.model import Outcome
from harness.parsers import smartctl, smartctl_text

DATA = Path(__file__).parents[1] / "data" / "smartctl"
PM981 = "linuxfabrik-samsung-pm981-smartctl70-a.txt"
FAILED = "linuxfabrik-seagate-st32000542as-smartctl70-x-FAILED.txt"
GERMAN = "zbx-smartctl-issue129-FRAGMENT-nvme-A-dot-thousands-comma-decimal-worn.txt"
U = 512_000


def text(name: str) -> str:
    return (DATA / name).read_text()


def values(r) -> dict[str, float]:
    return {m.name: m.value for m in r.metrics}


def relocale(src: str, thousands: str, decimal: str) -> str:
    """The en_US output as smartctl prints it in another locale: `1,634,269 [836 GB]`, `[1.80 TB]`."""
    out = re.sub(r"\[(\d+)\.(\d+) ([KMGTP]?B)\]", lambda m: f"[{m[1]}{decimal}{m[2]} {m[3]}]", src)
    return re.sub(r"\b\d{1,3}(?:,\d{3})+\b", lambda m: m[0].replace(",", thousands), out)


@pytest.mark.parametrize("thousands,decimal", [
    (".", ","),  # de_DE
    ("\u202f", ","),  # fr_FR: narrow no-break space
    ("\u00a0", ","),  # no-break space
    (" ", "."),  # plain space (smartctl 6.6 sample)
    ("’", "."),  # de_CH
    ("'", "."),
])
def test_every_locale_reads_the_same_numbers(thousands, decimal):
    plain = smartctl.parse(text(PM981))
    other = smartctl.parse(relocale(text(PM981), thousands, decimal))
    assert other.valid, other.problems
    assert values(other) == values(plain)
    assert values(other)["nvme.data_units_read"] == 1634269 * U
    assert other.details["decimal_mark"] == decimal


def test_german_figures_of_the_issue():
    src = relocale(text(PM981), ".", ",")
    src = re.sub(r"(Power On Hours:\s+)\S+", r"\g<1>1.069", src)
    src = re.sub(r"(Data Units Read:\s+).*", r"\g<1>20.118.246 [10,3 TB]", src)
    r = smartctl.parse(src)
    assert r.valid, r.problems
    assert values(r)["nvme.power_on_hours"] == 1069
    assert values(r)["nvme.data_units_read"] == 20118246 * U


def test_a_dot_is_not_a_thousands_separator_where_it_is_the_decimal_mark():
    # en_US output ([1.80 TB] shows "." is decimal): "1.069" hours cannot be read as 1069
    src = re.sub(r"(Power On Hours:\s+)\S+", r"\g<1>1.069", text(PM981))
    r = smartctl.parse(src)
    assert not r.valid and "nvme.power_on_hours" not in values(r)
    assert r.problems == ("power_on_hours: not a number ('1.069')",)


def test_a_count_that_disagrees_with_its_bracketed_size_is_refused():
    src = text(PM981).replace("1,634,269 [836 GB]", "1,634 [836 GB]")
    r = smartctl.parse(src)
    assert not r.valid and "nvme.data_units_read" not in values(r)
    assert "data units read: 1,634 units do not match [836 GB]" in r.problems[0]
    assert values(r)["nvme.data_units_written"] == 3524951 * U  # the rest still reads


def test_text_and_json_give_the_same_metric_names_and_units():
    def shape(name: str) -> dict[str, str]:
        return {m.name: m.unit for m in smartctl.parse(text(name)).metrics}

    assert shape(PM981) == shape("telegraf-sabrent-rocket4-smartctl74.json")
    ata_text, ata_json = shape(FAILED), shape("telegraf-usb-sandisk-sat-smartctl74.json")
    assert {n: ata_text[n] for n in ata_json if n in ata_text} == {
        n: u for n, u in ata_json.items() if n in ata_text}
    assert set(ata_json) - set(ata_text) == {"disk.link_downgraded"}  # 3.0 Gb/s without "current"


def test_temperature_times_are_minutes_in_the_log_and_seconds_here():
    src = text(PM981).replace("Warning  Comp. Temperature Time:    0",
                              "Warning  Comp. Temperature Time:    1,234")
    src = src.replace("Critical Comp. Temperature Time:    0", "Critical Comp. Temperature Time:    7")
    got = values(smartctl.parse(src))
    assert got["nvme.warning_temp_time"] == 1234 * 60 and got["nvme.critical_temp_time"] == 7 * 60


def test_failed_drive_is_a_measurement_that_fails_the_rule_not_an_invalid_run():
    r = smartctl.parse(text(FAILED))
    assert r.valid and r.details["failing_attributes"] == ["5 Reallocated_Sector_Ct: NOW"]
    rule = Rule(Expectation(metric="disk.smart_passed", min=1, unit="count"), "t")
    (ev,) = evaluate([rule], r.metrics)
    assert ev.outcome is Outcome.FAIL and ev.labels["serial"] == "LINUXFABRIK"


def test_worn_german_drive_fails_the_generic_nvme_rules():
    from harness.config import load_profile

    prof = load_profile("generic").profile
    rules = [Rule(e, "generic") for e in prof.expectations if e.metric.startswith("nvme.")]
    bad = {e.metric for e in evaluate(rules, smartctl.parse(text(GERMAN)).metrics)
           if e.outcome is Outcome.FAIL}
    assert bad == {"nvme.critical_warning", "nvme.percentage_used"}


def test_smartctl_without_json_is_recognised():
    refused = text("smartctl7.3-unrecognized-option-Z-text.txt").replace("OPTION: Z", "OPTION: j")
    assert smartctl.lacks_json(refused) and not smartctl.lacks_json(text(PM981))
    r = smartctl.parse(refused)
    assert not r.valid and r.problems[-1].startswith("smartctl before 7.0 has no -j")


@pytest.mark.parametrize("src", ["", "hello\n", "Temperature: 40 Celsius\n", "{not json",
                                 "smartctl 7.3 2022-02-28 r5338\n\nSMART support is: Unavailable\n"])
def test_not_smartctl_or_no_health_data(src):
    r = smartctl.parse(src)
    assert not r.valid and r.metrics == ()
    assert r.problems[0] in (smartctl.NOT_SMARTCTL,
                             "no health data in the output (SMART unsupported or disabled?)")


def test_integer_reader():
    assert smartctl_text.integer("12\u202f629") == 12629
    assert smartctl_text.integer("1.069", ",") == 1069
    assert smartctl_text.integer("1.069", ".") is None
    assert smartctl_text.integer("1,23,456") is None  # not groups of three
    assert smartctl_text.integer("1,234.567") is None  # two separators
    assert smartctl_text.integer("0x04") == 4
    assert smartctl_text.integer("-3") is None


def test_cli_parses_text(tmp_path):
    out = harness("parse", "smartctl", str(DATA / FAILED))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["valid"] is True
    assert {m["name"]: m["value"] for m in doc["metrics"]}["disk.smart_passed"] == 0
    out = harness("parse", "smartctl", str(DATA / GERMAN))
    got = {m["name"]: m["value"] for m in json.loads(out.stdout)["metrics"]}
    assert got["nvme.power_on_hours"] == 9602 and got["nvme.data_units_read"] == 69752883 * U


OLD_SMARTCTL = """#!/bin/sh
# smartmontools 6.x at the process level: no -j; the text is a real captured output
for a in "$@"; do [ "$a" = "-j" ] && {{ cat {refused}; exit 1; }}; done
cat {sample}
exit {rc}
"""


@pytest.mark.parametrize("rc,valid", [(0, True), (4, False)])
def test_check_falls_back_to_text_when_smartctl_has_no_json(tmp_path, monkeypatch, rc, valid):
    refused = tmp_path / "refused.txt"
    refused.write_text(text("smartctl7.3-unrecognized-option-Z-text.txt").replace("OPTION: Z",
                                                                                  "OPTION: j"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "smartctl"
    exe.write_text(OLD_SMARTCTL.format(refused=refused, sample=DATA / PM981, rc=rc))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    ctx = CheckContext("nvme", tmp_path / "run", 60, False, False, {}, logging.getLogger("t"))
    out = KIND.run(NvmeHealthParams(controllers=["nvme0"], tool="smartctl"), ctx)
    assert [r.argv for r in ctx.tool_runs] == [("smartctl", "-a", "-j", "/dev/nvme0"),
                                               ("smartctl", "-a", "/dev/nvme0")]
    got = {m.name: m for m in out.metrics}
    if valid:
        assert out.problems == ()
        assert got["nvme.num_err_log_entries"].value == 346
        assert dict(got["nvme.temperature"].labels) == {"device": "nvme0", "serial": "LINUXFABRIK759"}
    else:  # bit 2: a SMART command failed, so nothing it printed is judged
        assert out.problems == ("nvme0: smartctl exit status 4: a SMART or other ATA command to "
                                "the disk failed",)
        assert set(got) == {"nvme.count"}


LINES = st.sampled_from([
    "Critical Warning:                   0x04", "Temperature:     41 Celsius", "Percentage Used: 1.0.4%",
    "Data Units Read:  1,634,269 [836 GB]", "Data Units Read: 69.752.883 [35,7 TB]", "[1,2,3 TB]",
    "  5 Reallocated_Sector_Ct   PO--CK   004   004   036    NOW  3956",
    "  9 Power_On_Minutes 0x0032 099 099 000 Old_age Always - 12h+5m", "SATA Version is: SATA 3, 6,0 Gb/s "
    "(current: 1.5 Gb/s)", "SMART overall-health self-assessment test result: FAILED!",
    "SMART Health Status: OK", "Smartctl open device: x failed", "Serial Number:", ":", "ID# ATTRIBUTE_NAME"])


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES | st.text(max_size=30), max_size=25))
def test_never_raises_on_any_text(lines):
    r = smartctl.parse("\n".join(lines))
    assert r.valid is (not r.problems)
    assert all(m.value == m.value for m in r.metrics)  # no NaN


SAS = {"telegraf-hgst-huh721212al5204-sas-smartctl66.txt": (34, "8HJ39K3H", "HGST HUH721212AL5204"),
       # behind a MegaRAID controller (`-d megaraid,3`), dot thousands in the capacity
       "zbx-smartctl-issue101-FRAGMENT-megaraid3-seagate-sas-smartctl543.txt":
           (40, "Z1ZB1QCV0000R642KQ5C", "SEAGATE ST4000NM0023")}


@pytest.mark.parametrize("name", sorted(SAS))
def test_cli_reads_the_temperature_of_a_sas_drive(name):
    """SCSI/SAS text (`Current Drive Temperature:     34 C`) gives disk.temperature and its health."""
    temp, serial, model = SAS[name]
    out = harness("parse", "smartctl", str(DATA / name))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    got = {m["name"]: m for m in doc["metrics"]}
    assert doc["valid"] is True
    assert got["disk.temperature"]["value"] == temp and got["disk.temperature"]["unit"] == "C"
    assert got["disk.temperature"]["labels"] == {"serial": serial}
    assert got["disk.smart_passed"]["value"] == 1
    rep = smartctl_text.read(text(name))
    assert rep.protocol == "SCSI" and rep.identity["model"] == model
