"""The default `nvidia-smi` table parser on every real captured table (drivers 440-550)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import harness
from hypothesis import given, settings
from hypothesis import strategies as st
from samples import covers, sample_names

from harness.catalog import METRICS
from harness.parsers import nvsmi_table
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "nvidia-smi"
TABLES = sample_names("nvidia-smi", "nvidia-smi_default_table_*.txt")
MIB = 2**20
H200 = "nvidia-smi_default_table_h200_550.90.12.txt"
LOADED = "nvidia-smi_default_table_rtx_2080ti_440.33.01_two_row_layout_loaded.txt"
SXM_MIG = "nvidia-smi_default_table_8x_a100_sxm4_450.80.02_mig_on_7_of_8.txt"
PCIE_MIG = "nvidia-smi_default_table_2x_a100_pcie_535.129.03_mig_on_gpu0.txt"
H800 = "nvidia-smi_default_table_8x_h800_525.105.17_ecc_off_8_processes.txt"


def gpu_values(r, gpu: int) -> dict[str, float]:
    return {m.name: m.value for m in r.metrics if m.labels["gpu"] == gpu}


def per_gpu(r, name: str) -> dict[int, float]:
    return {m.labels["gpu"]: m.value for m in r.metrics if m.name == name}


def full(temp, power, limit, used_mib, total_mib, util=None, pm=None, ecc=None) -> dict[str, float]:
    """The metrics one GPU's box should give; None = the table shows N/A/On/Off there: no metric."""
    out = {"gpu.temp": temp, "gpu.power": power, "gpu.power_limit": limit,
           "gpu.memory_used": used_mib * MIB, "gpu.memory": total_mib * MIB,
           "gpu.util": util, "gpu.persistence_mode": pm, "gpu.ecc_uncorrected": ecc}
    return {k: v for k, v in out.items() if v is not None}


# file -> (driver, cuda, number of GPUs, the GPU checked, its exact metrics, its name, its bus id)
EXPECT = {
    H200:
        ("550.90.12", "12.4", 1, 0, full(28, 74, 700, 1, 143771, 0, 1, 0), "NVIDIA H200", "00000000:03:00.0"),
    "nvidia-smi_default_table_a10_550.127.05.txt":
        ("550.127.05", "12.4", 1, 0, full(32, 21, 150, 1, 23028, 0, 1, 0), "NVIDIA A10", "00000000:06:00.0"),
    "nvidia-smi_default_table_10x_a40_550.127.05.txt":
        ("550.127.05", "12.4", 10, 9, full(29, 16, 300, 1, 46068, 0, 1, 0), "NVIDIA A40", "00000000:D6:00.0"),
    PCIE_MIG:  # MIG on: util N/A, ECC cell "On"
        ("535.129.03", "12.2", 2, 0, full(28, 31, 250, 50, 40960, pm=1), "NVIDIA A100-PCIE-40GB",
         "00000000:21:00.0"),
    H800:  # ECC cell "Off"
        ("525.105.17", "12.0", 8, 2, full(37, 120, 700, 68925, 81559, 0, 0), "NVIDIA H800",
         "00000000:51:00.0"),
    SXM_MIG:
        ("450.80.02", "11.0", 8, 7, full(32, 45, 400, 3, 40537, pm=0), "A100-SXM4-40GB", "00000000:DA:00.0"),
    LOADED:  # ECC N/A on GeForce
        ("440.33.01", "10.2", 1, 0, full(82, 249, 250, 10411, 11019, 99, 1), "GeForce RTX 208...",
         "00000000:01:00.0"),
}


test_every_sample_has_expectations = covers(TABLES, EXPECT)


@pytest.mark.parametrize("name", TABLES)
def test_real_table(name: str):
    driver, cuda, n, gpu, expected, gpu_name, bus = EXPECT[name]
    r = nvsmi_table.parse((DATA / name).read_text())
    assert r.valid and r.problems == ()
    assert (r.details["driver_version"], r.details["cuda_version"], r.details["tables"]) == (driver, cuda, 1)
    assert [g["gpu"] for g in r.details["gpus"]] == list(range(n))
    assert gpu_values(r, gpu) == expected  # exact: also proves N/A, On, Off gave no metric
    (info,) = [g for g in r.details["gpus"] if g["gpu"] == gpu]
    assert (info["name"], info["bus_id"]) == (gpu_name, bus)
    for m in r.metrics:  # house units, catalogued names
        assert m.name in METRICS and m.unit == METRICS[m.name].unit, m
    for g in range(n):  # every GPU box gives its readings, memory never above its total
        v = gpu_values(r, g)
        assert {"gpu.temp", "gpu.power", "gpu.power_limit", "gpu.memory", "gpu.memory_used"} <= set(v)
        assert 0 <= v["gpu.memory_used"] <= v["gpu.memory"] and 0 < v["gpu.power"] <= v["gpu.power_limit"]


def test_ten_a40s_all_read_in_order():
    r = nvsmi_table.parse((DATA / "nvidia-smi_default_table_10x_a40_550.127.05.txt").read_text())
    assert list(per_gpu(r, "gpu.temp").values()) == [29, 30, 27, 29, 30, 29, 29, 29, 29, 29]
    assert list(per_gpu(r, "gpu.power").values()) == [23, 24, 15, 24, 24, 24, 15, 24, 15, 16]
    assert r.details["gpus"][5]["bus_id"] == "00000000:CE:00.0" and r.details["processes"] == []
    assert {g["mig_mode"] for g in r.details["gpus"]} == {"N/A"} and r.details["gpus"][0]["perf"] == "P8"


def test_mig_tables_and_their_na_cells():
    r = nvsmi_table.parse((DATA / SXM_MIG).read_text())
    assert per_gpu(r, "gpu.util") == {0: 0}  # only the GPU out of MIG mode shows utilisation
    assert per_gpu(r, "gpu.ecc_uncorrected") == {0: 0}  # the others print "On" there
    assert [g["mig_mode"] for g in r.details["gpus"]] == ["Disabled"] + ["Enabled"] * 7
    assert r.details["mig_devices"] == [{"gpu": 7, "gi": 13, "ci": 0, "mig_dev": 0}]
    assert r.details["timestamp"] == "Tue Mar  9 08:01:10 2021"
    r = nvsmi_table.parse((DATA / PCIE_MIG).read_text())
    assert [(d["gpu"], d["gi"]) for d in r.details["mig_devices"]] == [(0, 3), (0, 4), (0, 5), (0, 6)]
    assert per_gpu(r, "gpu.memory_used") == {0: 50 * MIB, 1: 4 * MIB}  # MIG rows are not GPUs
    assert gpu_values(r, 1)["gpu.ecc_uncorrected"] == 0 and gpu_values(r, 1)["gpu.util"] == 0


def test_processes_old_and_new_layout():
    r = nvsmi_table.parse((DATA / H800).read_text())
    procs = r.details["processes"]
    assert [p["gpu"] for p in procs] == list(range(8))
    assert procs[0] == {"gpu": 0, "gi": None, "ci": None, "pid": 125892, "type": "C",
                        "name": "...nv-py310-cu118/bin/python", "memory_bytes": 65726 * MIB}
    assert per_gpu(r, "gpu.persistence_mode") == dict.fromkeys(range(8), 0.0)
    assert "gpu.ecc_uncorrected" not in {m.name for m in r.metrics}  # ECC disabled: "Off"
    r = nvsmi_table.parse((DATA / LOADED).read_text())
    assert r.details["processes"] == [{"gpu": 0, "gi": None, "ci": None, "pid": 24986, "type": "C",
                                       "name": "python", "memory_bytes": 10399 * MIB}]
    info = r.details["gpus"][0]
    assert (info["fan"], info["perf"], info["compute_mode"]) == ("69%", "P2", "Default")
    assert "mig_mode" not in info  # two rows per GPU before driver 450


def test_garbage_empty_and_driver_failures_are_invalid():
    for text in ("", "hello\nworld", "+---+\n| a | b | c |\n+---+"):
        r = nvsmi_table.parse(text)
        assert not r.valid and r.metrics == ()
        assert "no 'NVIDIA-SMI ... Driver Version' header" in r.problems[0]
    r = nvsmi_table.parse("No devices were found\n")
    assert not r.valid and r.problems == ("nvidia-smi reported no usable GPU: No devices were found",)
    msg = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
           "Make sure that the latest NVIDIA driver is installed and running.")
    assert "couldn't communicate" in nvsmi_table.parse(msg + "\n").problems[0]
    head = "\n".join((DATA / H200).read_text().splitlines()[:7])  # header box only
    r = nvsmi_table.parse(head)
    assert not r.valid and r.problems == ("no GPU rows in the nvidia-smi table",)
    dmon = (DATA / "dmon_default_1x_load_ramp_morpheus.txt").read_text()
    assert not nvsmi_table.parse(dmon).valid


def test_cut_short_gpu_box_is_invalid():
    lines = (DATA / H200).read_text().splitlines()
    r = nvsmi_table.parse("\n".join(lines[:8]))  # the GPU's first row, then the capture ends
    assert not r.valid and r.problems == ("GPU 0 (near line 8): its state row is missing or unreadable",)
    assert {m.name for m in r.metrics} == {"gpu.persistence_mode", "gpu.ecc_uncorrected"}


def test_watch_loop_capture_reads_the_last_complete_table():
    """Synthetic: real tables concatenated as `nvidia-smi -l` prints them, the last one cut short."""
    a10, h200 = (DATA / "nvidia-smi_default_table_a10_550.127.05.txt").read_text(), (DATA / H200).read_text()
    r = nvsmi_table.parse(a10 + h200)
    assert r.valid and r.details["tables"] == 2 and r.details["driver_version"] == "550.90.12"
    r = nvsmi_table.parse(a10 + "\n".join(h200.splitlines()[:8]))
    assert r.valid and r.details["tables"] == 2 and gpu_values(r, 0)["gpu.temp"] == 32  # the A10's
    assert r.details["timestamp"] == "Wed Jan 22 04:28:25 2025"


def test_crlf_and_markdown_indent_read_the_same():
    text = (DATA / H200).read_text()
    plain = nvsmi_table.parse(text)
    for variant in (text.replace("\n", "\r\n"), "\n".join("    " + line for line in text.splitlines())):
        r = nvsmi_table.parse(variant)
        assert r.valid and r.metrics == plain.metrics


def test_registered_and_cli():
    assert parsers()["nvidia-smi"] is nvsmi_table.parse
    out = harness("parse", "nvidia-smi", str(DATA / H200))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kind"] == "nvidia-smi" and doc["valid"] is True
    got = {m["name"]: m["value"] for m in doc["metrics"]}
    assert got["gpu.temp"] == 28 and got["gpu.power"] == 74 and got["gpu.power_limit"] == 700
    assert got["gpu.memory"] == 143771 * MIB
    out = harness("parse", "nvidia-smi", str(DATA / "dmon_default_1x_load_ramp_morpheus.txt"))
    doc = json.loads(out.stdout)
    assert doc["valid"] is False and doc["metrics"] == [] and "header" in doc["problems"][0]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*"|+-= \n0123456789CWMiB/%NA:.OnfPDZ", "NVIDIA-SMI 1 Driver Version: 2",
                                  "00000000:03:00.0", "MiB /", "|   0  X  On  |", " C "]),
                max_size=200).map("".join))
def test_never_raises(text: str):
    r = nvsmi_table.parse(text)
    assert r.valid == (not r.problems)


@pytest.mark.parametrize("name", TABLES)
def test_truncations_never_raise(name: str):
    text = (DATA / name).read_text()
    for cut in range(0, len(text), 61):
        r = nvsmi_table.parse(text[:cut])
        assert r.valid == (not r.problems)
