"""The pure ibstat and ibv_devinfo parsers on every real sample in tests/data/ibports."""

from __future__ import annotations

from pathlib import Path

import pytest
from samples import covers, real_samples

from harness.parsers import ibports
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "ibports"
SAMPLES = real_samples("ibports")
IB, ETH = "InfiniBand", "Ethernet"

# Per file: validity, problems, and per (device, port) -> (link_layer, active, rate GB/s or None,
# mtu bytes or None). ibstat's Rate is Gb/s: 400 -> 50 GB/s, 200 -> 25, 100 -> 12.5, 40 -> 5.
H100_PORTS = {("mlx5_0", 1): (IB, 1, 50.0, None), ("mlx5_1", 1): (ETH, 1, 12.5, None),
              ("mlx5_2", 1): (ETH, 0, 5.0, None), ("mlx5_7", 1): (ETH, 0, 5.0, None),
              ("mlx5_8", 1): (ETH, 0, 5.0, None)}
H100_PORTS |= {(f"mlx5_{i}", 1): (IB, 1, 50.0, None) for i in (3, 4, 5, 6, 9, 10, 11)}
EXPECTED: dict[str, dict] = {
    "ibstat_cx7_ib_200g_active.txt": {
        "parser": "ibstat", "valid": True, "ports": {("mlx5_0", 1): (IB, 1, 25.0, None)},
        "facts": ("mlx5_0", "firmware_version", "28.40.1000"),
    },
    "ibstat_cx6_vf_port_down_disabled_ethernet.txt": {
        "parser": "ibstat", "valid": True, "ports": {("mlx5_1", 1): (ETH, 0, 12.5, None)},
        "facts": ("mlx5_1", "ca_type", "MT4120"),
    },
    "gpud-ibstat-h100-cx7-3-eth-ports-down.txt": {
        "parser": "ibstat", "valid": True, "ports": H100_PORTS,
        "facts": ("mlx5_1", "firmware_version", "22.38.1002"),
    },
    "gpud-ibstat-a100-hdr-8-ports-then-ibpanic-mlx5_8.txt": {
        "parser": "ibstat", "valid": False,
        "problems": ["ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"],
        "ports": {(f"mlx5_{i}", 1): (IB, 1, 25.0, None) for i in range(8)},
    },
    "ibstat_44.0_debian12_no_devices_empty.txt": {
        "parser": "ibstat", "valid": False, "problems": ["not ibstat output (no CA found)"], "ports": {},
    },
    "ibv_devinfo_4x_cx4_edr_ib_port_active_dgx1.txt": {
        "parser": "ibv-devinfo", "valid": True,
        "ports": {(f"mlx5_{i}", 1): (IB, 1, None, 4096) for i in range(4)},
        "order": ["mlx5_1", "mlx5_3", "mlx5_0", "mlx5_2"],
        "facts": ("mlx5_3", "fw_ver", "12.23.1020"),
    },
    "ibv_devinfo_cx6_vf_port_down_ethernet.txt": {
        "parser": "ibv-devinfo", "valid": True, "ports": {("mlx5_1", 1): (ETH, 0, None, 1024)},
        "facts": ("mlx5_1", "board_id", "MT_0000000011"),
    },
    "ibv_devinfo_44.0_debian12_no_devices.txt": {
        "parser": "ibv-devinfo", "valid": False,
        "problems": ["Failed to get IB devices list: Function not implemented"], "ports": {},
    },
}


test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample(path):
    exp = EXPECTED[path.name]
    result = parsers()[exp["parser"]](path.read_text())
    assert result.kind == exp["parser"]
    assert result.valid is exp["valid"]
    assert list(result.problems) == exp.get("problems", [])
    got: dict[tuple[str, int], dict[str, float]] = {}
    for m in result.metrics:
        key = (m.labels["device"], m.labels["port"])
        got.setdefault(key, {"link_layer": m.labels["link_layer"]})[m.name] = m.value
        assert m.unit == {"ib.port_active": "count", "ib.rate": "GB/s", "ib.active_mtu": "B"}[m.name]
    want = {k: {"link_layer": ll, "ib.port_active": active,
                **({"ib.rate": rate} if rate is not None else {}),
                **({"ib.active_mtu": mtu} if mtu is not None else {})}
            for k, (ll, active, rate, mtu) in exp["ports"].items()}
    assert got == want
    if "order" in exp:
        assert list(result.details["devices"]) == exp["order"]
    if "facts" in exp:
        dev, key, value = exp["facts"]
        assert result.details["devices"][dev][key] == value


def test_port_facts_in_details():
    text = (DATA / "ibstat_cx6_vf_port_down_disabled_ethernet.txt").read_text()
    port = ibports.parse_ibstat(text).details["devices"]["mlx5_1"]["ports"]["1"]
    assert (port["state"], port["physical_state"], port["rate"]) == ("Down", "Disabled", "100")


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_never_raises_on_any_prefix(path):
    text = path.read_text()
    parse = parsers()[EXPECTED[path.name]["parser"]]
    for end in range(0, len(text) + 1, 7):
        result = parse(text[:end])
        assert result.valid or result.problems
