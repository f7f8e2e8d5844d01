"""linkstate: sysfs link files to net.link_up / net.link_speed. Pure.

The first three maps are the files of this development VM's real interfaces as read on
2026-11-29 (kernel 6.18: eth0 virtio_net, lo, ifb0; an absent key is a file the kernel refused
with EINVAL). The others are synthetic, written in the kernel's formats (net-sysfs.c), and labelled so.
"""

from __future__ import annotations

import pytest

from harness.parsers import linkstate

ETH0 = {"operstate": "up", "carrier": "1", "speed": "-1"}  # real: virtio_net, speed unknown
LO = {"operstate": "unknown", "carrier": "1"}  # real: the driver leaves operstate unknown
IFB0 = {"operstate": "down"}  # real: administratively down, carrier and speed EINVAL


@pytest.mark.parametrize("files, up, metrics, text", [
    (ETH0, True, [("net.link_up", 1.0)], "up, speed unknown"),
    (LO, True, [("net.link_up", 1.0)], "up, speed unknown"),
    (IFB0, False, [("net.link_up", 0.0), ("net.link_speed", 0.0)], "down"),
    # synthetic
    ({"operstate": "up", "carrier": "1", "speed": "400000"}, True,
     [("net.link_up", 1.0), ("net.link_speed", 50.0)], "up, 400 Gb/s"),
    ({"operstate": "up", "carrier": "1", "speed": "25000"}, True,
     [("net.link_up", 1.0), ("net.link_speed", 3.125)], "up, 25 Gb/s"),
    ({"operstate": "down", "carrier": "0", "speed": "-1"}, False,
     [("net.link_up", 0.0), ("net.link_speed", 0.0)], "down"),
    ({"operstate": "lowerlayerdown", "carrier": "0"}, False,
     [("net.link_up", 0.0), ("net.link_speed", 0.0)], "lowerlayerdown"),
    ({"operstate": "unknown", "carrier": "0"}, False,
     [("net.link_up", 0.0), ("net.link_speed", 0.0)], "no carrier"),
    ({"operstate": "unknown"}, False, [("net.link_up", 0.0), ("net.link_speed", 0.0)], "no carrier"),
    ({"carrier": "1", "speed": "100000"}, True, [("net.link_up", 1.0), ("net.link_speed", 12.5)],
     "up, 100 Gb/s"),
    ({}, None, [], "state unknown"),
])
def test_link_files(files, up, metrics, text):
    assert linkstate.is_up(files) is up
    out = linkstate.metrics(files, {"iface": "x"})
    assert [(m.name, m.value) for m in out] == metrics
    assert all(m.labels == {"iface": "x"} for m in out)
    assert {m.unit for m in out} <= {"count", "GB/s"}
    assert linkstate.describe(files) == text


@pytest.mark.parametrize("text, mbps", [
    ("400000", 400000), ("400000\n", 400000), ("1000", 1000),
    ("-1", None),  # SPEED_UNKNOWN as kernels print it now
    ("65535", None), ("4294967295", None),  # ... and as u16 / u32 in old kernels
    ("0", None), ("", None), (None, None), ("fast", None),
])
def test_speed_mbps(text, mbps):
    assert linkstate.speed_mbps(text) == mbps
