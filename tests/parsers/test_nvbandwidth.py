"""The pure nvbandwidth parser on every real sample in tests/data/nvbandwidth, and edge cases."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from samples import covers, real_samples

from harness.parsers import nvbandwidth as nvb
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "nvbandwidth"
SAMPLES = real_samples("nvbandwidth")
B300 = "nvbandwidth_v0.10.0_7x_b300_default_all_tests_partial_bidirectional_read1_read2_total.txt"
H100_READ = "nvbandwidth_v0.10.0_8x_h100_d2d_memcpy_read_ce.txt"
H2D, D2H = "host_to_device_memcpy_ce", "device_to_host_memcpy_ce"
RD, WR = "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce"
BRD, BWR = "device_to_device_bidirectional_memcpy_read_ce", "device_to_device_bidirectional_memcpy_write_ce"

# Values read off the matrices: (metric, test, src, dst, part) -> value. "A(row) -> B(column)":
# row to column; "<-": column to row. Latency cells are ns in the file, us here.
EXPECTED: dict[str, dict] = {
    B300: {
        "count": 12 * 1 + 4 * 7 + 8 * 42, "version": "v0.10.0", "driver": "610.57.04",
        "cells": {(H2D, None): 7, (D2H, None): 7, ("host_to_device_bidirectional_memcpy_ce", None): 7,
                  ("device_to_host_bidirectional_memcpy_ce", None): 7, (RD, None): 42, (WR, None): 42,
                  (BRD, "read1"): 42, (BRD, "read2"): 42, (BRD, "total"): 42,
                  (BWR, "write1"): 42, (BWR, "write2"): 42, (BWR, "total"): 42},
        "values": {
            ("gpu.h2d_bw", H2D, "cpu", "gpu0", None): 55.59,
            ("gpu.d2h_bw", D2H, "gpu3", "cpu", None): 57.05,
            ("gpu.d2h_bw", "device_to_host_bidirectional_memcpy_ce", "gpu6", "cpu", None): 48.09,
            ("gpu.p2p_bw", RD, "gpu0", "gpu1", None): 764.71,
            ("gpu.p2p_bw", RD, "gpu1", "gpu0", None): 765.86,
            ("gpu.p2p_bw", WR, "gpu1", "gpu0", None): 774.50,  # row 0, column 1 of "<-"
            ("gpu.p2p_bw", BRD, "gpu1", "gpu6", "total"): 1517.86,
            ("gpu.p2p_bw", BWR, "gpu3", "gpu4", "write2"): 769.36,
            ("gpu.bw_sum", H2D, None, None, None): 389.15,
            ("gpu.bw_sum", BRD, None, None, "read1"): 31945.78,
            ("gpu.bw_sum", BWR, None, None, "total"): 64669.78,
        },
        "cov": {"device_to_host_bidirectional_memcpy_ce": 0.01, f"{BRD}_total": 0.0},
        "tests": [H2D, D2H, "host_to_device_bidirectional_memcpy_ce",
                  "device_to_host_bidirectional_memcpy_ce", RD, WR, BRD, BWR],
    },
    H100_READ: {
        "count": 57, "cells": {(RD, None): 56},
        "values": {("gpu.p2p_bw", RD, "gpu4", "gpu6", None): 395.25,
                   ("gpu.p2p_bw", RD, "gpu7", "gpu0", None): 395.05,
                   ("gpu.bw_sum", RD, None, None, None): 22126.64},  # SUM of unrounded cells
    },
    "nvbandwidth_v0.10.0_8x_h100_d2d_memcpy_write_ce.txt": {
        "count": 57, "cells": {(WR, None): 56},
        "values": {("gpu.p2p_bw", WR, "gpu0", "gpu1", None): 397.50,
                   ("gpu.p2p_bw", WR, "gpu1", "gpu0", None): 397.44,
                   ("gpu.bw_sum", WR, None, None, None): 22258.35},
    },
    "nvbandwidth_v0.10.0_8x_h100_device_to_device_latency_sm.txt": {
        "count": 56, "cells": {("device_to_device_latency_sm", None): 56},
        "values": {("gpu.p2p_lat", "device_to_device_latency_sm", "gpu0", "gpu1", None): 0.82642,
                   ("gpu.p2p_lat", "device_to_device_latency_sm", "gpu7", "gpu3", None): 0.82194,
                   ("gpu.bw_sum", "device_to_device_latency_sm", None, None, None): None},
    },
    "nvbandwidth_v0.10.0_8x_h100_device_to_host_memcpy_ce.txt": {
        "count": 9, "cells": {(D2H, None): 8},
        "values": {("gpu.d2h_bw", D2H, "gpu7", "cpu", None): 55.20,
                   ("gpu.d2h_bw", D2H, "gpu4", "cpu", None): 55.25,
                   ("gpu.bw_sum", D2H, None, None, None): 441.72},
    },
    "nvbandwidth_v0.8_1x_a100_sxm4_40gb_host_to_device_memcpy_sm_b512.txt": {
        "count": 2, "cells": {("host_to_device_memcpy_sm", None): 1}, "version": "v0.8",
        "devices": {"gpu0": "NVIDIA A100-SXM4-40GB (00000000:99:00)"},
        "values": {("gpu.h2d_bw", "host_to_device_memcpy_sm", "cpu", "gpu0", None): 25.13,
                   ("gpu.bw_sum", "host_to_device_memcpy_sm", None, None, None): 25.13},
    },
    "nvbandwidth_v0.8_6x_rtx_a6000_d2d_read_ce_pcie_NA_diagonal_poster_elided.txt": {
        "count": 31, "cells": {(RD, None): 30}, "tests": [],  # the "Running" line was elided
        "values": {("gpu.p2p_bw", RD, "gpu0", "gpu3", None): 21.95,
                   ("gpu.p2p_bw", RD, "gpu4", "gpu3", None): 26.35,
                   ("gpu.bw_sum", RD, None, None, None): 715.53},
    },
}


def real(name: str) -> str:
    return (DATA / name).read_text()


def ends(m) -> tuple:
    """(src, dst) of a cell: the labels of a GPU pair, cpu and gpu<N> for host copies."""
    if m.name == "gpu.h2d_bw":
        return "cpu", f"gpu{m.labels['gpu']}"
    if m.name == "gpu.d2h_bw":
        return f"gpu{m.labels['gpu']}", "cpu"
    return m.labels.get("src"), m.labels.get("dst")


def find(result, name, test, src, dst, part):
    found = [m for m in result.metrics if m.name == name and m.labels["test"] == test
             and ends(m) == (src, dst) and m.labels.get("part") == part]
    assert len(found) <= 1
    return found[0] if found else None


test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample(path):
    exp = EXPECTED[path.name]
    result = nvb.parse(path.read_text())
    assert result.kind == "nvbandwidth"
    assert result.valid and result.problems == ()
    assert len(result.metrics) == exp["count"]
    cells = Counter((m.labels["test"], m.labels.get("part")) for m in result.metrics
                    if m.name != "gpu.bw_sum")
    assert dict(cells) == exp["cells"]
    for key, value in exp["values"].items():
        m = find(result, *key)
        if value is None:
            assert m is None, key
        else:
            assert m is not None, key
            assert m.value == pytest.approx(value, rel=1e-12)
    for m in result.metrics:
        assert m.unit == ("us" if m.name.endswith("_lat") else "GB/s")
        if m.name != "gpu.bw_sum":
            src, dst = ends(m)
            assert src != dst  # N/A diagonals give nothing
        if m.name in ("gpu.h2d_bw", "gpu.d2h_bw"):
            assert isinstance(m.labels["gpu"], int) and "src" not in m.labels
    for key in ("version", "driver", "devices", "tests"):
        if key in exp:
            assert result.details[key] == exp[key]
    for test, cov in exp.get("cov", {}).items():
        assert result.details["cov"][test] == cov
    assert result.details["not_measured"] == []


def test_output_cut_inside_a_matrix_is_invalid():
    text = real(H100_READ)
    result = nvb.parse(text[: text.index(" 4    395.19")])
    assert not result.valid
    assert result.problems == (f"{RD}: matrix incomplete (4 of 8 rows): output truncated",)
    assert result.metrics == ()


def test_a_test_that_started_but_printed_nothing_is_invalid():
    text = real(B300)
    cut = text[: text.index("memcpy CE GPU(row) <-> GPU(column) Write1")]
    result = nvb.parse(cut)
    assert result.problems == (f"{BWR}: started but printed no result matrix (crashed or output truncated)",)
    assert len(result.metrics) == EXPECTED[B300]["count"] - 3 * 42 - 3  # the earlier tests are kept


def test_cuda_error_line_is_invalid():
    # The line follows nvbandwidth's CU_ASSERT format (error_handling.h); the corpus has no real
    # capture of a failing run.
    text = real(H100_READ) + ("[CUDA_ERROR_INVALID_VALUE] invalid argument in expression "
                              "cuMemAlloc(&buffer, size) in DeviceNode() : memcpy.cpp:42\n")
    result = nvb.parse(text)
    assert not result.valid
    assert result.problems[0].startswith("nvbandwidth error: [CUDA_ERROR_INVALID_VALUE]")


def test_off_diagonal_na_is_recorded_as_not_measured():
    text = real(H100_READ).replace(" 0       N/A    395.08", " 0       N/A       N/A", 1)
    result = nvb.parse(text)
    assert result.valid and len(result.metrics) == 56
    assert result.details["not_measured"] == [f"{RD}: gpu0->gpu1"]


@pytest.mark.parametrize("text", ["", "nvbandwidth Version: v0.8\n", "SUM x 1.0\n", "hello\n"])
def test_not_nvbandwidth(text):
    result = nvb.parse(text)
    assert not result.valid and result.metrics == ()


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_never_raises_on_any_prefix(path):
    text = path.read_text()
    for end in range(0, len(text) + 1, 11):
        result = nvb.parse(text[:end])
        assert result.valid or result.problems


def test_registered():
    assert parsers()["nvbandwidth"] is nvb.parse
