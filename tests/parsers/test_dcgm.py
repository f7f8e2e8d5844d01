"""The pure dcgmi diag parser on every real sample in tests/data/dcgmi (JSON 3.x/4.x, tables)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from samples import covers, real_samples

from harness.parsers import dcgm
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "dcgmi"
DEPLOYMENT = ["Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks",
              "Persistence Mode", "Environment Variables", "Page Retirement/Row Remap",
              "Graphics Processes", "Inforom"]


def results(name: str) -> tuple[dcgm.ParseResult, dict[tuple[str, int | None], float]]:
    r = dcgm.parse((DATA / name).read_text())
    return r, {(m.labels["test"], m.labels.get("gpu")): m.value for m in r.metrics}


test_every_sample_is_covered_here = covers(real_samples("dcgmi"), {
    "diag_r2_json_tesla_t4.json", "diag_r3_json_tesla_t4.json",
    "diag_r3_table_2x_rtx_pro_6000_blackwell_skips_doubled.txt",
    "diag_r3_table_dcgm4.0_4gpu_per_gpu_rows_nvidia_docs.txt",
    "diag_r4_json_dcgm4_fragment_8gpu_diagnostic_test_info_truncation.txt",
    "diag_r4_table_rtx2060s_persistence_fail_memtest_pass.txt",
    "diag_r3_table_dcgm3.3.9_4x_a10g_targeted_power_fail_gpu1_continuation_row.txt",
    "diag_r2_table_FRAGMENT_8gpu_gpu_memory_fail_gpu0_thermal_ml_engineering.txt",
    "diag_r2_table_dcgm4.2.3_4gpu_pcie_fail_internal_error_then_gpu_rows_pass.txt",
    "diag_r2_table_dcgm4.4.1_8x_b200_pcie_fail_internal_error_in_slurm.txt",
})


def test_dcgm3_json_level3_all_pass_eud_skipped():
    r, res = results("diag_r3_json_tesla_t4.json")
    assert r.valid and r.problems == ()
    gpu0 = ["PCIe", "GPU Memory", "Diagnostic", "Targeted Stress", "Targeted Power", "Memory Bandwidth"]
    assert res == {**{(t, None): 1.0 for t in DEPLOYMENT}, **{(t, 0): 1.0 for t in gpu0}}
    assert r.details["skipped"] == ["EUD Test GPU 0"]  # a skip is neither a pass nor a failure
    assert r.details["format"] == "json 3.x" and r.details["failures"] == []
    assert r.details["ran_by_category"] == {"deployment": 9, "integration": 1, "hardware": 2, "stress": 3}


def test_dcgm3_json_level2():
    r, res = results("diag_r2_json_tesla_t4.json")
    assert r.valid
    assert res == {**{(t, None): 1.0 for t in DEPLOYMENT}, ("PCIe", 0): 1.0, ("GPU Memory", 0): 1.0}


def test_dcgm4_json_fragment_is_read_but_invalid():
    r, res = results("diag_r4_json_dcgm4_fragment_8gpu_diagnostic_test_info_truncation.txt")
    assert not r.valid
    assert r.problems == ("a fragment: test objects without the 'DCGM Diagnostic' document around them, "
                          "so the run cannot be shown complete",)
    assert res == {("diagnostic", g): 1.0 for g in range(8)}


def test_table_persistence_fail_is_the_environments_and_skips_are_not_failures():
    r, res = results("diag_r4_table_rtx2060s_persistence_fail_memtest_pass.txt")
    assert r.valid
    assert ("Persistence Mode", None) not in res  # persistence mode off: the setup, not the GPU
    assert res[("Memtest", None)] == 1.0
    assert sum(1 for v in res.values() if v == 1.0) == 9
    assert r.details["failures"] == []
    assert r.details["environment"] == [
        'Persistence Mode: Fail: Persistence mode for GPU 0 is currently disabled. The DCGM diagnostic '
        'requires peristence mode to be enabled. Enable persistence mode by running "nvidia-smi -i '
        '<gpuId> -pm 1 " as root.']
    assert r.details["skipped"] == ["PCIe", "GPU Memory", "Pulse Test", "Targeted Stress", "Targeted Power",
                                    "Memory Bandwidth"]


def test_table_printed_twice_counts_once_and_all_hardware_skipped():
    r, res = results("diag_r3_table_2x_rtx_pro_6000_blackwell_skips_doubled.txt")
    assert r.valid and r.details["tables"] == 2
    assert res == {(t, None): 1.0 for t in DEPLOYMENT}
    assert r.details["ran_by_category"] == {"deployment": 9}  # the check calls this "nothing exercised"
    assert r.details["metadata"] == {"DCGM Version": "3.3.9", "Driver Version Detected": "570.172.08",
                                     "GPU Device IDs Detected": "2bb5,2bb5"}


def test_dcgm4_table_per_gpu_rows_replace_the_aggregate():
    r, res = results("diag_r3_table_dcgm4.0_4gpu_per_gpu_rows_nvidia_docs.txt")
    assert r.valid
    tests = ["software", "memory", "diagnostic", "pcie", "memory_bandwidth", "targeted_stress",
             "targeted_power"]
    assert res == {(t, g): 1.0 for t in tests for g in range(4)}


def test_dcgm4_json_failure_with_warning_objects():
    doc = {"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{
        "name": "memory", "results": [
            {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"},
            {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Fail",
             "warnings": [{"error_category": 3, "error_id": 37, "error_severity": 2,
                           "warning": "Error using CUDA API cudaMalloc for GPU 1"}]}]}]}]}}
    r = dcgm.parse(json.dumps(doc))
    assert r.valid and r.details["format"] == "json 4.x"
    assert {(m.labels["test"], m.labels["gpu"]): m.value for m in r.metrics} == {("memory", 0): 1.0,
                                                                                  ("memory", 1): 0.0}
    assert r.details["failures"] == ["memory GPU 1: Fail: Error using CUDA API cudaMalloc for GPU 1"]


def test_runtime_error_and_cut_table_are_invalid():
    r = dcgm.parse('{"DCGM GPU Diagnostic": {"runtime_error": "Unable to connect to host engine"}}')
    assert not r.valid
    assert r.problems == ("dcgmi diag runtime error: Unable to connect to host engine",)
    cut = "\n".join((DATA / "diag_r4_table_rtx2060s_persistence_fail_memtest_pass.txt").read_text()
                    .splitlines()[:12])
    r = dcgm.parse(cut)
    assert not r.valid and r.problems == ("the results table is cut off (no closing border)",)


def test_registered_and_unrelated_text():
    assert parsers()["dcgmi-diag"] is dcgm.parse
    r = dcgm.parse("Error: unable to establish a connection to the specified host: localhost\n")
    assert not r.valid and r.problems[0].startswith("not dcgmi diag output")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('{}[]",: |+-=\nPassFailSkipWarnGPU0123 resultsnamestatus_id')),
               max_size=300))
def test_never_raises(text: str):
    assert isinstance(dcgm.parse(text).valid, bool)


def test_truncations_of_real_samples_never_raise():
    for p in DATA.iterdir():
        text = p.read_text()
        for cut in range(0, len(text), 53):
            dcgm.parse(text[:cut])


def test_dcgm4_test_row_fail_above_per_gpu_passes_does_not_read_as_passed():
    # NVIDIA/DCGM#253: "pcie | Fail", internal-error warnings, then "GPU0: Pass" ... rows
    for name, gpus in (("diag_r2_table_dcgm4.2.3_4gpu_pcie_fail_internal_error_then_gpu_rows_pass.txt", 4),
                       ("diag_r2_table_dcgm4.4.1_8x_b200_pcie_fail_internal_error_in_slurm.txt", 8)):
        r, res = results(name)
        assert res[("pcie", 0)] == 1.0 and ("pcie", None) not in res  # the GPUs passed ...
        (env,) = r.details["environment"]  # ... but the test itself did not: DCGM's internal error
        assert env.startswith("pcie: Fail: There was an internal error during the test:")
        assert r.details["failures"] == []
        assert res[("memory", gpus - 1)] == 1.0
    # a test whose own row fails without an internal error keeps that failure next to the GPU rows
    table = (DATA / "diag_r3_table_dcgm4.0_4gpu_per_gpu_rows_nvidia_docs.txt").read_text().replace(
        "| pcie                      | Pass    ", "| pcie                      | Fail    ")
    r = dcgm.parse(table)
    got = {(m.labels["test"], m.labels.get("gpu")): m.value for m in r.metrics}
    assert got[("pcie", None)] == 0.0 and got[("pcie", 2)] == 1.0


def test_dcgm4_json_test_summary_fail_beside_passing_gpus_is_not_passed():
    # constructed from the real 4.x fragment: its "diagnostic" test_summary "Pass" made "Fail" with a
    # warning, the eight per-GPU results left Pass
    text = (DATA / "diag_r4_json_dcgm4_fragment_8gpu_diagnostic_test_info_truncation.txt").read_text()
    warn = '"warnings": [{"warning": "GPU 3 compute error"}], "status": "Fail"'
    summary = r'"test_summary" :(\s*)\{(\s*)"status" : "Pass"'
    failed, n = re.subn(summary, r'"test_summary" :\1{\2' + warn, text)
    assert n == 1
    r = dcgm.parse(failed)
    got = {(m.labels["test"], m.labels.get("gpu")): m.value for m in r.metrics}
    assert got[("diagnostic", None)] == 0.0 and got[("diagnostic", 3)] == 1.0
    assert r.details["failures"] == ["diagnostic: Fail: GPU 3 compute error"]
