"""bandwidthTest and p2pBandwidthLatencyTest parsers on every real sample in tests/data/cuda-samples."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from samples import covers, real_samples

from harness.parsers import cudasamples
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "cuda-samples"
SAMPLES = real_samples("cuda-samples")
OLD_MB = 1024 * 1000 / 1e9  # old samples' "MB/s": 1024 * bytes / (ms * 2^20) = 1,024,000 B/s

# bandwidthTest: (metric, memory, size, (gpu, N) or (devices, N) for a --device=all aggregate) -> GB/s
G0, D8 = ("gpu", 0), ("devices", 8)
H2D, D2H, D2D = "gpu.h2d_bw", "gpu.d2h_bw", "gpu.d2d_bw"
BANDWIDTH: dict[str, dict] = {
    "bandwidthTest_8x_tesla_k80_device_all_cumulative_8_devices_MBps_no_result_line.txt": {
        (H2D, "pinned", 33554432, D8): 78952.3 * OLD_MB, (D2H, "pinned", 33554432, D8): 65986.9 * OLD_MB,
        (D2D, "pinned", 33554432, D8): 1362316.4 * OLD_MB, "result": None, "gpus": 8},
    "bandwidthTest_a100_80gb_pcie_pageable_htod_dtoh_only.txt": {
        (H2D, "pageable", 32000000, G0): 3.3, (D2H, "pageable", 32000000, G0): 8.5, "result": "PASS",
        "gpus": 1},
    "bandwidthTest_a100_80gb_pcie_pinned_htod_dtoh_only.txt": {
        (H2D, "pinned", 32000000, G0): 17.3, (D2H, "pinned", 32000000, G0): 24.6, "result": "PASS",
        "gpus": 1},
    "bandwidthTest_a100_sxm4_40gb_quick_pinned_GBps_tabs.txt": {
        (H2D, "pinned", 32000000, G0): 12.3, (D2H, "pinned", 32000000, G0): 13.2,
        (D2D, "pinned", 32000000, G0): 1157.5, "result": "PASS", "gpus": 1},
    "bandwidthTest_gtx1660ti_maxq_pageable_MBps_33554432_old_format.txt": {
        (H2D, "pageable", 33554432, G0): 3215.3 * OLD_MB, (D2H, "pageable", 33554432, G0): 2998.0 * OLD_MB,
        (D2D, "pageable", 33554432, G0): 26704.3 * OLD_MB, "result": "PASS", "gpus": 1},
    "bandwidthTest_tesla_t4_quick_pinned_tabs_lost_copy_artifact.txt": {
        (H2D, "pinned", 32000000, G0): 9.7, (D2H, "pinned", 32000000, G0): 11.1,
        (D2D, "pinned", 32000000, G0): 239.6, "result": "PASS", "gpus": 1},
}
# p2p: counts per (metric, mode/p2p/side) and values by (metric, labels..., src, dst)
P2P: dict[str, dict] = {
    "p2pBandwidthLatencyTest_2x_rtx5090_no_p2p.txt": {
        "count": 18, "cannot": 2,
        "values": {("gpu.p2p_access", (), "gpu0", "gpu1"): 0,
                   ("gpu.p2p_bw", (("mode", "unidirectional"), ("p2p", "enabled")), "gpu1", "gpu0"): 38.66,
                   ("gpu.p2p_bw", (("mode", "bidirectional"), ("p2p", "disabled")), "gpu0", "gpu1"): 43.03,
                   ("gpu.p2p_lat", (("p2p", "disabled"), ("side", "gpu")), "gpu0", "gpu1"): 12.83,
                   ("gpu.p2p_lat", (("p2p", "enabled"), ("side", "cpu")), "gpu1", "gpu0"): 5.64}},
    "p2pBandwidthLatencyTest_8x_h100_sxm_nvlink_all_peers.txt": {
        "count": 9 * 56, "cannot": 0,
        "values": {("gpu.p2p_access", (), "gpu3", "gpu5"): 1,
                   ("gpu.p2p_bw", (("mode", "unidirectional"), ("p2p", "enabled")), "gpu0", "gpu1"): 365.30,
                   ("gpu.p2p_bw", (("mode", "unidirectional"), ("p2p", "disabled")), "gpu4", "gpu1"): 38.27,
                   ("gpu.p2p_bw", (("mode", "bidirectional"), ("p2p", "enabled")), "gpu1", "gpu0"): 774.45,
                   ("gpu.p2p_lat", (("p2p", "enabled"), ("side", "gpu")), "gpu0", "gpu1"): 3.34,
                   ("gpu.p2p_lat", (("p2p", "disabled"), ("side", "cpu")), "gpu7", "gpu6"): 6.41}},
}


test_every_sample_has_expectations = covers(SAMPLES, BANDWIDTH, P2P)


@pytest.mark.parametrize("name", sorted(BANDWIDTH))
def test_bandwidthtest(name):
    exp = dict(BANDWIDTH[name])
    result = cudasamples.parse_bandwidthtest((DATA / name).read_text())
    assert result.kind == "cuda-bandwidthtest" and result.valid and result.problems == ()
    assert result.details["result"] == exp.pop("result")
    assert len(result.details["devices"]) == exp.pop("gpus")
    def who(labels):
        return next((k, labels[k]) for k in ("devices", "gpu") if k in labels)

    got = {(m.name, m.labels["memory"], m.labels["size"], who(m.labels)): m.value for m in result.metrics}
    assert got == pytest.approx(exp, rel=1e-12)
    assert {m.unit for m in result.metrics} == {"GB/s"}
    assert {m.labels["test"] for m in result.metrics} == {"bandwidthTest"}


@pytest.mark.parametrize("name", sorted(P2P))
def test_p2p(name):
    exp = P2P[name]
    result = cudasamples.parse_p2p((DATA / name).read_text())
    assert result.kind == "p2p" and result.valid and result.problems == ()
    assert len(result.metrics) == exp["count"]
    assert len(result.details["cannot_access_peer"]) == exp["cannot"]
    for (metric, labels, src, dst), value in exp["values"].items():
        (m,) = [m for m in result.metrics if m.name == metric and m.labels["src"] == src
                and m.labels["dst"] == dst and all(m.labels[k] == v for k, v in labels)]
        assert m.value == value
    assert all(m.labels["src"] != m.labels["dst"] for m in result.metrics)  # no diagonal
    units = Counter((m.name, m.unit) for m in result.metrics)
    assert set(units) <= {("gpu.p2p_bw", "GB/s"), ("gpu.p2p_lat", "us"), ("gpu.p2p_access", "count")}
    assert {m.labels["test"] for m in result.metrics} == {"p2pBandwidthLatencyTest"}


def test_failed_result_and_truncated_section_are_invalid():
    text = (DATA / "bandwidthTest_a100_sxm4_40gb_quick_pinned_GBps_tabs.txt").read_text()
    failed = cudasamples.parse_bandwidthtest(text.replace("Result = PASS", "Result = FAIL"))
    assert failed.problems == ("bandwidthTest reported Result = FAIL",)
    cut = cudasamples.parse_bandwidthtest(text[: text.index("   32000000\t\t\t1157.5")])
    assert cut.problems == ("d2d: section has no result row (output truncated)",) and len(cut.metrics) == 2


def test_truncated_p2p_matrix_is_invalid():
    text = (DATA / "p2pBandwidthLatencyTest_8x_h100_sxm_nvlink_all_peers.txt").read_text()
    result = cudasamples.parse_p2p(text[: text.index("     4 392.01")])
    assert not result.valid
    assert result.problems == ("gpu.p2p_bw {'mode': 'unidirectional', 'p2p': 'enabled'}: 4 of 8 rows "
                               "(output truncated)",)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_never_raises_on_any_prefix(path):
    parse = cudasamples.parse_p2p if path.name.startswith("p2p") else cudasamples.parse_bandwidthtest
    text = path.read_text()
    for end in range(0, len(text) + 1, 13):
        result = parse(text[:end])
        assert result.valid or result.problems


def test_registered():
    kinds = parsers()
    assert kinds["cuda-bandwidthtest"] is cudasamples.parse_bandwidthtest
    assert kinds["p2p"] is cudasamples.parse_p2p
