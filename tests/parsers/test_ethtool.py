"""The pure `ethtool -S` parser on every real sample in tests/data/ethtool (mlx5 from the shared
corpus, with and without header and indentation; virtio_net and lo captured on the dev VM)."""

from __future__ import annotations

from pathlib import Path

import pytest
from samples import covers, real_samples

from harness.parsers import ethtool
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "ethtool"
SAMPLES = real_samples("ethtool")

# Per file: number of counters, the error counters (net.port_errors) with chosen values, their count,
# and counters that are in details but must not be error metrics (per queue, per priority, XDP verdicts).
EXPECTED: dict[str, dict] = {
    "bpf-ml-connectx6dx-kernel5.15-ethtool-S-xdp-drops-trimmed.txt": {
        "counters": 101, "n_errors": 8,
        "errors": {"rx_discards_phy": 58591428329, "rx_out_of_buffer": 990473555, "tx_errors_phy": 0},
        "other": {"rx_prio0_discards": 58591314012, "rx_xdp_drop": 3753342954, "rx0_wqe_err": 0,
                  "rx_steer_missed_packets": 1962570491}},
    "bpf-ml-connectx6dx-kernel6.5-ethtool-S-xdp-drops-trimmed.txt": {
        "counters": 108, "n_errors": 3,
        "errors": {"rx_discards_phy": 441063206498, "rx_out_of_buffer": 534918379, "rx_xdp_tx_err": 0},
        "other": {"rx_xdp_drop": 7783331724, "rx_prio0_discards": 441063206498}},
    "ethq-issue8-connectx4lx-fw14.23-kernel4.15-ethtool-S-unindented.txt": {
        "counters": 751, "n_errors": 21,
        "errors": {"tx_pci_signal_integrity": 34, "rx_crc_errors_phy": 0, "rx_symbol_err_phy": 0,
                   "link_down_events_phy": 0, "module_bus_stuck": 0, "tx_queue_dropped": 0},
        "other": {"rx_packets": 845320277, "tx0_dropped": 0, "rx0_wqe_err": 0, "rx0_xdp_drop": 0}},
    "ethq-tests-mlx5_core-early-driver-ethtool-S-body.txt": {
        "counters": 309, "n_errors": 21,
        "errors": {"symbol_err": 0, "crc_align_errors": 0, "rx_error_packets": 0, "in_discards": 0},
        "other": {"rx_packets": 5487361, "rx0_wqe_err": 0}},
    "ethtool-6.1-debian12-virtio_net-eth0-S.txt": {
        "counters": 20, "n_errors": 3,
        "errors": {"rx_drops": 0, "tx_tx_timeouts": 0, "tx_xdp_tx_drops": 0},
        "other": {"rx_kicks": 5194, "tx_kicks": 16380, "rx0_drops": 0, "rx_xdp_drops": 0}},
    "ethtool-6.1-debian12-lo-S-no-stats.txt": {
        "invalid": "no NIC counters in the output: no stats available"},
}


test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample(path):
    exp = EXPECTED[path.name]
    result = parsers()["ethtool-stats"](path.read_text())
    assert result.kind == "ethtool-stats"
    if "invalid" in exp:
        assert not result.valid and result.problems == (exp["invalid"],) and result.metrics == ()
        return
    assert result.valid and result.problems == ()
    counters = result.details["counters"]
    assert len(counters) == exp["counters"]
    got = {m.labels["counter"]: m.value for m in result.metrics}
    assert len(got) == exp["n_errors"] == len(result.details["error_counters"])
    for name, value in exp["errors"].items():
        assert got[name] == value
    for name, value in exp["other"].items():
        assert counters[name] == value and name not in got
    assert all(m.name == "net.port_errors" and m.unit == "count" and set(m.labels) == {"counter"}
               for m in result.metrics)


def test_iface_label_and_names_with_colons():
    text = (DATA / "ethtool-6.1-debian12-virtio_net-eth0-S.txt").read_text()
    (m, *_) = ethtool.parse(text, "eth0").metrics
    assert m.labels == {"counter": "rx_drops", "iface": "eth0"}
    # bnxt-style per-ring names carry a colon of their own (synthetic line, not captured output)
    counters, other = ethtool.counters_of("NIC statistics:\n     [0]: rx_ucast_packets: 12\n")
    assert counters == {"[0]: rx_ucast_packets": 12} and other == []
    assert not ethtool.is_error_counter("[0]: rx_discards")  # a ring's counter, not the port's


def test_other_lines_are_kept_but_do_not_spoil_the_counters():
    text = "Cannot get stats strings information: No such device\n"  # ethtool 6.1's words, this VM
    result = ethtool.parse(text)
    assert result.problems == ("no NIC counters in the output: Cannot get stats strings information: "
                               "No such device",)
    assert not ethtool.parse("").valid


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_never_raises_on_any_prefix(path):
    text = path.read_text()
    for end in range(0, len(text) + 1, max(1, len(text) // 200)):
        result = ethtool.parse(text[:end])
        assert result.valid or result.problems
