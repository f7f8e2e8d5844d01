"""The pure perftest parser on every real sample in tests/data/perftest, and edge cases around them."""

from __future__ import annotations

from pathlib import Path

import pytest
from samples import covers, real_samples

from harness.parsers import perftest
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "perftest"
SAMPLES = real_samples("perftest")
MIB = 1024 * 1024

# Exact values from the files: MB/sec is 2^20 B/s (perftest's format_factor 0x100000), Gb/sec is
# 10^9 bit/s; both to GB/s (10^9 B/s). Keys: (metric, stat or None) -> value; labels checked apart.
EXPECTED: dict[str, dict] = {
    "ib_read_bw_client_ib_mlx5_MB_per_sec_tabs.txt": {
        "valid": True, "labels": {"test": "ib_read_bw", "device": "mlx5_0", "qps": 1, "size": 65536},
        "values": {("rdma.bw_avg", None): 11708.31 * MIB / 1e9, ("rdma.bw_peak", None): 11709.18 * MIB / 1e9},
        "details": {"link_type": "IB", "mtu": "4096[B]", "connection": "RC"},
    },
    "ib_send_bw_roce_cpu_freq_warning_inside_table.txt": {
        "valid": True, "labels": {"test": "ib_send_bw", "device": "mlx5_0", "qps": 1, "size": 65536},
        "values": {("rdma.bw_avg", None): 11115.93 * MIB / 1e9, ("rdma.bw_peak", None): 11116.32 * MIB / 1e9},
        "details": {"link_type": "Ethernet", "mtu": "1024[B]"},
    },
    "ib_send_lat_server_side_ib_edr_mlx5_tabs.txt": {
        "valid": True, "labels": {"test": "ib_send_lat", "device": "mlx5_0", "qps": 1, "size": 2},
        "values": {("rdma.lat_min", None): 0.96, ("rdma.lat_max", None): 3.45,
                   ("rdma.lat_typical", None): 1.00, ("rdma.lat_avg", None): 1.01,
                   ("rdma.lat_p99", None): 1.06, ("rdma.lat_p999", None): 3.45},
    },
    "ib_write_bw_client_connect_failure_messages_joined.txt": {
        "valid": False, "values": {},
        "problems": ["perftest failed: Couldn't connect to 192.168.125.211:18515 (and 1 more error lines)"],
    },
    "ib_write_bw_completion_error_syndrom_0x51_gpudirect.txt": {
        "valid": False, "values": {},
        "problems": ["perftest failed: Completion with error at client (and 2 more error lines)"],
    },
    "ib_write_bw_dgx_spark_cx7_roce_4qp_report_gbits_rdma_cm.txt": {
        "valid": True, "labels": {"test": "ib_write_bw", "device": "rocep1s0f1", "qps": 4, "size": 65536},
        "values": {("rdma.bw_avg", None): 111.71 / 8, ("rdma.bw_peak", None): 111.72 / 8},
    },
    "ib_write_lat_dgx_spark_cx7_roce_rdma_cm.txt": {
        "valid": True, "labels": {"test": "ib_write_lat", "device": "rocep1s0f1", "qps": 1, "size": 2},
        "values": {("rdma.lat_min", None): 1.42, ("rdma.lat_max", None): 1.93,
                   ("rdma.lat_typical", None): 1.47, ("rdma.lat_avg", None): 1.47,
                   ("rdma.lat_p99", None): 1.57, ("rdma.lat_p999", None): 1.93},
    },
    "ib_write_bw_6.06_debian12_no_devices_stderr.txt": {
        "valid": False, "values": {},
        "problems": ["perftest failed: Did not detect devices (and 1 more error lines)"],
    },
}


test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample(path):
    exp = EXPECTED[path.name]
    result = perftest.parse(path.read_text())
    assert result.kind == "perftest"
    assert result.valid is exp["valid"], result.problems
    assert list(result.problems) == exp.get("problems", [])
    got = {(m.name, None): m for m in result.metrics}
    assert len(got) == len(result.metrics) == len(exp["values"])
    for key, value in exp["values"].items():
        assert got[key].value == pytest.approx(value, rel=1e-12)
        assert got[key].unit == ("us" if key[0].startswith("rdma.lat_") else "GB/s")
        assert dict(got[key].labels) == exp["labels"]
    for k, v in exp.get("details", {}).items():
        assert result.details[k] == v


def test_the_check_supplies_the_test_name_when_the_output_has_none():
    text = (DATA / "ib_write_bw_completion_error_syndrom_0x51_gpudirect.txt").read_text()
    assert perftest.parse(text, test="ib_write_bw").details["test"] == "ib_write_bw"


def test_all_sizes_rows_each_become_metrics():
    # `-a` prints one row per size. The corpus has no real -a capture, so this is derived from a
    # real file: one extra row in the same layout, for a 2-byte size.
    text = (DATA / "ib_write_bw_dgx_spark_cx7_roce_4qp_report_gbits_rdma_cm.txt").read_text()
    row = " 65536      20000            111.72             111.71             0.213070"
    more = "\n".join([" 2          20000            0.11               0.10               6.512049", row])
    result = perftest.parse(text.replace(row, more))
    sizes = sorted(m.labels["size"] for m in result.metrics if m.name == "rdma.bw_avg")
    assert sizes == [2, 65536] and result.valid


def test_header_without_rows_is_invalid():
    text = (DATA / "ib_read_bw_client_ib_mlx5_MB_per_sec_tabs.txt").read_text()
    head = text[: text.index(" 65536")]
    result = perftest.parse(head)
    assert not result.valid and result.problems == ("no result rows",)


@pytest.mark.parametrize("text", ["", "hello", "----\n"])
def test_not_perftest(text):
    assert perftest.parse(text).problems == (perftest.NOT_PERFTEST,)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_never_raises_on_any_prefix(path):
    text = path.read_text()
    for end in range(len(text) + 1):
        result = perftest.parse(text[:end])
        assert result.valid or result.problems


def test_registered():
    assert parsers()["perftest"] is perftest.parse
