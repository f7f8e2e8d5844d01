"""The pure nvidia-smi parsers (-q text, -q -x XML, --query-gpu CSV) on every real sample."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from samples import sample_names

from harness.parsers import clockreasons, nvsmi, nvsmi_csv
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "nvidia-smi"
Q_FILES = sample_names("nvidia-smi", "nvidia-smi_-q*")
CSV_FILES = sample_names("nvidia-smi", "*.csv")
IDLE_ONLY = {r: float(r == "idle") for r in clockreasons.TEXT_LABELS.values()}  # what nvidia-smi prints


def values(r) -> dict[tuple, float]:
    """{(name, sorted labels without gpu...): value} for GPU 0, for compact exact comparisons."""
    return {(m.name, *sorted((k, v) for k, v in m.labels.items() if k != "gpu")): m.value
            for m in r.metrics if m.labels.get("gpu") == 0}


def reasons(r, gpu: int = 0) -> dict[str, float]:
    return {m.labels["reason"]: m.value for m in r.metrics
            if m.name == "gpu.clocks_event" and m.labels["gpu"] == gpu}


def test_sample_files():
    assert Q_FILES == ["nvidia-smi_-q_-d_PERFORMANCE_495.44_throttle_reasons_old_naming.txt",
                       "nvidia-smi_-q_-x_tesla_p100_510.47.03.xml", "nvidia-smi_-q_a10_550.127.05.txt",
                       "nvidia-smi_-q_h200_550.90.12.txt"]
    assert len(CSV_FILES) == 4


def test_h200_text_550():
    r = nvsmi.parse((DATA / "nvidia-smi_-q_h200_550.90.12.txt").read_text())
    assert r.valid and r.details["driver"] == "550.90.12" and r.details["cuda"] == "12.4"
    v = values(r)
    assert v[("gpu.pcie_gen", ("which", "current"))] == 5 and v[("gpu.pcie_gen", ("which", "max"))] == 5
    assert v[("gpu.pcie_width", ("which", "current"))] == 16 and v[("gpu.pcie_width", ("which", "max"))] == 16
    assert v[("gpu.temp",)] == 28 and v[("gpu.mem_temp",)] == 25
    assert v[("gpu.power",)] == 74.58 and v[("gpu.power_limit",)] == 700.0
    assert v[("gpu.sm_clock", ("which", "current"))] == 345 and v[("gpu.sm_clock", ("which", "max"))] == 1980
    assert v[("gpu.ecc_uncorrected", ("scope", "volatile"))] == 0
    assert v[("gpu.ecc_corrected", ("scope", "aggregate"))] == 0
    assert v[("gpu.remapped_rows", ("kind", "uncorrectable"))] == 0
    assert v[("gpu.remap_pending",)] == 0 and v[("gpu.remap_failure",)] == 0
    assert v[("gpu.persistence_mode",)] == 1 and v[("gpu.ecc_mode",)] == 1
    assert ("gpu.retired_pages", ("cause", "sbe")) not in v  # "N/A" on HBM3e: omitted, not zero
    assert reasons(r) == IDLE_ONLY
    assert r.details["gpus"] == [{"gpu": 0, "pci": "00000000:03:00.0", "name": "NVIDIA H200",
                                  "link": "Gen5 x16 of Gen5 x16", "mask": 1}]


def test_a10_text_idle_link_downshift_is_reported_not_judged():
    r = nvsmi.parse((DATA / "nvidia-smi_-q_a10_550.127.05.txt").read_text())
    assert r.valid
    v = values(r)
    assert v[("gpu.pcie_gen", ("which", "current"))] == 1 and v[("gpu.pcie_gen", ("which", "max"))] == 4
    assert v[("gpu.temp",)] == 33 and ("gpu.mem_temp",) not in v  # Memory Current Temp: N/A
    assert v[("gpu.power",)] == 21.3 and v[("gpu.power_limit",)] == 150.0
    assert r.details["gpus"][0]["link"] == "Gen1 x16 of Gen4 x16"


def test_p100_xml_old_throttle_element_names_and_aggregate_sbe():
    r = nvsmi.parse((DATA / "nvidia-smi_-q_-x_tesla_p100_510.47.03.xml").read_text())
    assert r.valid and r.details["format"] == "xml" and r.details["driver"] == "510.47.03"
    v = values(r)
    assert v[("gpu.ecc_corrected", ("scope", "aggregate"))] == 3  # single_bit total 3
    assert v[("gpu.ecc_uncorrected", ("scope", "aggregate"))] == 0
    assert v[("gpu.ecc_corrected", ("scope", "volatile"))] == 0
    assert v[("gpu.retired_pages", ("cause", "sbe"))] == 0 and v[("gpu.retired_pages", ("cause", "dbe"))] == 0
    assert v[("gpu.retired_pending",)] == 0
    assert v[("gpu.persistence_mode",)] == 0
    assert v[("gpu.temp",)] == 38 and v[("gpu.power",)] == 26.16 and v[("gpu.power_limit",)] == 250.0
    assert v[("gpu.pcie_gen", ("which", "current"))] == 3 and v[("gpu.pcie_width", ("which", "max"))] == 16
    assert ("gpu.remapped_rows", ("kind", "correctable")) not in v  # <remapped_rows>N/A</remapped_rows>
    assert reasons(r) == IDLE_ONLY


def test_495_performance_section_old_heading():
    r = nvsmi.parse((DATA / Q_FILES[0]).read_text())  # -q -d PERFORMANCE, driver 495.44
    assert r.valid and reasons(r) == IDLE_ONLY
    assert {m.name for m in r.metrics} == {"gpu.clocks_event"}


def test_attached_count_must_match_blocks():
    text = (DATA / "nvidia-smi_-q_h200_550.90.12.txt").read_text().replace(
        "Attached GPUs                             : 1", "Attached GPUs                             : 8")
    r = nvsmi.parse(text)
    assert not r.valid and r.problems == ("nvidia-smi says 8 GPUs attached but lists 1",)


def test_csv_power_and_ecc():
    r = nvsmi_csv.parse((DATA / "query-gpu_csv_2x_rtx_pro_6000_blackwell_power_ecc.csv").read_text())
    assert r.valid
    got = {(m.name, m.labels["gpu"], m.labels.get("scope")): m.value for m in r.metrics}
    assert got == {("gpu.temp", 0, None): 25, ("gpu.power", 0, None): 30.39,
                   ("gpu.power_limit", 0, None): 600, ("gpu.ecc_corrected", 0, "volatile"): 0,
                   ("gpu.ecc_uncorrected", 0, "volatile"): 0, ("gpu.temp", 1, None): 25,
                   ("gpu.power", 1, None): 28.54, ("gpu.power_limit", 1, None): 600,
                   ("gpu.ecc_corrected", 1, "volatile"): 0, ("gpu.ecc_uncorrected", 1, "volatile"): 0}


def test_csv_clocks_event_bitmask_and_renamed_headers():
    name = "query-gpu_csv_2x_rtx_pro_6000_throttle_alias_renamed_to_clocks_event_reasons.csv"
    r = nvsmi_csv.parse((DATA / name).read_text())
    assert r.valid
    for gpu in (0, 1):  # active mask 0x0000000000000004 = SW power cap, and its column says Active
        assert reasons(r, gpu) == {name: float(name == "power_cap") for name in clockreasons.BITS}


def test_csv_b300_watch_and_p100_na_fan():
    r = nvsmi_csv.parse((DATA / "query-gpu_csv_7x_b300_index_util_temp_power_from_watch.csv").read_text())
    assert r.valid
    temps = {m.labels["gpu"]: m.value for m in r.metrics if m.name == "gpu.temp"}
    assert temps == {0: 28, 1: 40, 2: 37, 3: 30, 4: 42, 5: 30, 6: 39}
    power = {m.labels["gpu"]: m.value for m in r.metrics if m.name == "gpu.power"}
    assert power[4] == 186.16 and power[3] == 180.84
    r = nvsmi_csv.parse((DATA / "query-gpu_csv_tesla_p100_fan_NA.csv").read_text())
    assert r.valid  # no index column: rows are numbered; "[N/A]" fan is not a field we read
    assert {(m.name, m.labels.get("which")): m.value for m in r.metrics} == {
        ("gpu.util", None): 0, ("gpu.temp", None): 37, ("gpu.power", None): 28.16,
        ("gpu.sm_clock", "current"): 405}


def test_registered_and_garbage():
    table = parsers()
    assert table["nvidia-smi-q"] is nvsmi.parse and table["nvidia-smi-csv"] is nvsmi_csv.parse
    assert not nvsmi.parse("hello").valid
    assert not nvsmi.parse("<nvidia_smi_log><gpu id='x'>").valid  # broken XML: invalid, no exception
    assert not nvsmi_csv.parse("just one line").valid


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("GPU 0000:0a.:NVSMILOG \n  ECCVolatileSRAMCorrect<>/x_1N/A")),
               max_size=300))
def test_never_raises(text: str):
    assert isinstance(nvsmi.parse(text).valid, bool)
    assert isinstance(nvsmi_csv.parse(text).valid, bool)


@pytest.mark.parametrize("name", Q_FILES + CSV_FILES)
def test_truncations_never_raise(name: str):
    text = (DATA / name).read_text()
    for cut in range(0, len(text), 97):
        nvsmi.parse(text[:cut])
        nvsmi_csv.parse(text[:cut])
