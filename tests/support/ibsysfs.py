"""Directory trees laid out like /sys/class/infiniband, built from real values (test helper).

Port states and rates come from a real `ibstat` of an H100 node (gpud fixture), written in the
kernel's sysfs formats ('4: ACTIVE', '5: LinkUp', '400 Gb/sec (4X NDR)', as
drivers/infiniband/core/sysfs.c prints them); error counters from a real perfquery (all zero)
and a real sysfs counter dump (gpud PR 943, with saturated legacy counters).
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.parsers import ibports
from harness.parsers import portcounters as pc

DATA = Path(__file__).parents[1] / "data"
IBSTAT_H100 = DATA / "ibports" / "gpud-ibstat-h100-cx7-3-eth-ports-down.txt"
ZEROS = DATA / "ibcounters" / "infiniband-diags-issue16-perfquery-x-rhel75-zeros.txt"
SATURATED = DATA / "ibcounters" / "gpud-pr943-mlx5_1-sysfs-port-counters-saturated.txt"
IB_NDR = [f"mlx5_{i}" for i in (0, 3, 4, 5, 6, 9, 10, 11)]
STATE = {"Active": "4: ACTIVE", "Down": "1: DOWN"}
PHYS = {"LinkUp": "5: LinkUp", "Disabled": "3: Disabled"}
SPEED = {"400": "4X NDR", "200": "4X HDR", "100": "4X EDR", "40": "4X QDR"}


def zero_counters() -> dict[str, int]:
    (block,) = pc.parse_perfquery(ZEROS.read_text()).details["ports"]
    return dict(block["counters"])  # the 13 error counters, sysfs names, all 0


def dump_counters() -> dict[str, int]:
    text = SATURATED.read_text()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"=== \./(\w+) ===\n(\d+)", text)}


def write_port(root: Path, dev: str, port: int, state: str, phys: str, rate: str, link_layer: str,
               counters: dict[str, int]) -> Path:
    d = root / dev / "ports" / str(port)
    (d / "counters").mkdir(parents=True, exist_ok=True)
    (d / "state").write_text(STATE[state] + "\n")
    (d / "phys_state").write_text(PHYS[phys] + "\n")
    (d / "rate").write_text(f"{rate} Gb/sec ({SPEED[rate]})\n")
    (d / "link_layer").write_text(link_layer + "\n")
    for k, v in counters.items():
        (d / "counters" / k).write_text(f"{v}\n")
    return d


def h100_tree(root: Path) -> Path:
    """Every device and port of the real H100 ibstat, with the zero counters of the real perfquery."""
    devices = ibports.parse_ibstat(IBSTAT_H100.read_text()).details["devices"]
    for dev, info in devices.items():
        (root / dev).mkdir(parents=True)
        (root / dev / "fw_ver").write_text(info["firmware_version"] + "\n")
        for port, p in info["ports"].items():
            write_port(root, dev, int(port), p["state"], p["physical_state"], p["rate"], p["link_layer"],
                       zero_counters())
    return root


def counter(root: Path, dev: str, name: str, value: int) -> None:
    (root / dev / "ports" / "1" / "counters" / name).write_text(f"{value}\n")
