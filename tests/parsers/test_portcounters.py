"""InfiniBand port error counters: perfquery samples and a real sysfs counter dump, plus the
sysfs reader on a counters tree laid out like /sys/class/infiniband."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from samples import real_samples

from harness.parsers import portcounters as pc
from harness.parsers.registry import parsers
from harness.platform import infiniband

DATA = Path(__file__).parents[1] / "data" / "ibcounters"
SYSFS_DUMP = DATA / "gpud-pr943-mlx5_1-sysfs-port-counters-saturated.txt"
PERFQUERY = {
    "treydock-perfquery-x-lid1719-two-ports-xmitwait.txt": {
        "ports": [(1719, 1), (1719, 2)],
        "values": {(1719, 1, "port_xmit_wait"): 22730501, (1719, 2, "port_xmit_wait"): 36510964,
                   (1719, 2, "symbol_error"): 0, (1719, 1, "VL15_dropped"): 0},
        "other": {(1719, 1, "PortXmitData"): 36298026860928, (1719, 2, "PortRcvPkts"): 93660802641}},
    "treydock-perfquery-x-lid133-capmask0x5A00-clean.txt": {
        "ports": [(133, 1)], "values": {(133, 1, "link_downed"): 0}, "other": {}},
    "infiniband-diags-issue16-perfquery-x-rhel75-zeros.txt": {
        "ports": [(10, 1)], "values": {(10, 1, "port_rcv_errors"): 0}, "other": {(10, 1, "PortXmitData"): 0}},
}


def dump_counters(text: str) -> dict[str, int]:
    """The '=== ./name ===' blocks of a shell loop over a sysfs counters directory (test helper)."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"=== \./(\w+) ===\n(\d+)", text)}


@pytest.mark.parametrize("name", sorted(PERFQUERY))
def test_perfquery(name):
    exp = PERFQUERY[name]
    result = pc.parse_perfquery((DATA / name).read_text())
    assert result.kind == "perfquery" and result.valid
    assert [(b["lid"], b["port"]) for b in result.details["ports"]] == exp["ports"]
    assert len(result.metrics) == 13 * len(exp["ports"])  # every error counter of every port
    got = {(m.labels["lid"], m.labels["port"], m.labels["counter"]): m.value for m in result.metrics}
    for key, value in exp["values"].items():
        assert got[key] == value
    for (lid, port, key), value in exp["other"].items():
        (b,) = [b for b in result.details["ports"] if (b["lid"], b["port"]) == (lid, port)]
        assert b["other"][key] == value
    assert all(m.name == "ib.port_errors" and m.unit == "count" for m in result.metrics)


def test_rcv_error_details_are_not_port_counters():
    result = pc.parse_perfquery((DATA / "treydock-perfquery-E-rcverrordetails-lid2052.txt").read_text())
    assert not result.valid and result.metrics == ()


def test_real_sysfs_dump_with_saturated_legacy_counters():
    counters = dump_counters(SYSFS_DUMP.read_text())
    assert len(counters) == 21 and counters["port_rcv_switch_relay_errors"] == 2
    assert pc.saturated(counters) == ["excessive_buffer_overrun_errors", "link_downed",
                                      "port_xmit_discards", "port_xmit_wait"]
    found = pc.error_metrics(counters, {"device": "mlx5_1", "port": 1})
    metrics = {m.labels["counter"]: m.value for m in found}
    assert len(metrics) == 13 and metrics["link_downed"] == 255 and "port_xmit_data" not in metrics


def test_deltas_and_a_reset_counter():
    before = dump_counters(SYSFS_DUMP.read_text())
    after = {**before, "symbol_error": 4, "port_rcv_switch_relay_errors": 0}
    grown = pc.deltas(before, after)
    assert grown["symbol_error"] == 4 and grown["port_rcv_switch_relay_errors"] == 0  # reset: from zero
    assert grown["link_downed"] == 0


def test_sysfs_reader_on_a_counters_tree(tmp_path):
    counters = dump_counters(SYSFS_DUMP.read_text())
    base = tmp_path / "mlx5_1" / "ports" / "1" / "counters"
    base.mkdir(parents=True)
    for k, v in counters.items():
        (base / k).write_text(f"{v}\n")
    (base / "weird").write_text("N/A\n")
    (tmp_path / "mlx5_0").mkdir()  # a device without ports
    read = infiniband.port_counters(["mlx5_0", "mlx5_1", "mlx5_9"], root=tmp_path)
    assert read == {("mlx5_1", 1): counters}
    assert infiniband.devices(root=tmp_path) == ["mlx5_0", "mlx5_1"]


@pytest.mark.parametrize("path", real_samples("ibcounters", "*perfquery*"), ids=lambda p: p.name)
def test_never_raises_on_any_prefix(path):
    text = path.read_text()
    for end in range(0, len(text) + 1, 5):
        result = pc.parse_perfquery(text[:end])
        assert result.valid or result.problems


def test_registered():
    assert parsers()["perfquery"] is pc.parse_perfquery
