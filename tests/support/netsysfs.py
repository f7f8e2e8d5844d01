"""Directory trees laid out like /sys/class/net, built from real values (test helper).

The Ethernet (RoCE) ports of the real `ibstat` of an H100 node (gpud fixture, tests/support/ibsysfs.py:
mlx5_1 Active at 100 Gb/s, mlx5_2, mlx5_7 and mlx5_8 Down with Physical state Disabled) become
net interfaces in the kernel's formats (net/core/net-sysfs.c: operstate text, carrier 1/0, speed
in Mb/s "%d"). An Active port is `up`, carrier 1, speed rate x 1000. A Disabled port is an
interface that is administratively down: operstate `down`, and carrier and speed refuse to be
read (EINVAL), which the tree shows as absent files (the reader sees both as unreadable).
Synthetic, and labelled so: the interface names (the fixture has none, so the RDMA device names
are used) and the PCI addresses; the driver is mlx5_core, the real driver of these
ConnectX-6 Dx/7 (MT4125/MT4129) ports.
"""

from __future__ import annotations

from pathlib import Path

from ibsysfs import IBSTAT_H100

from harness.parsers import ibports

DRIVER = "mlx5_core"


def write_iface(sys_root: Path, iface: str, files: dict[str, str], pci: str | None = None,
                driver: str = DRIVER) -> Path:
    """/sys/class/net/IFACE with `files` (name -> text); with `pci`, a device link to a PCI
    function bound to `driver`."""
    d = sys_root / "class" / "net" / iface
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name).write_text(text + "\n")
    if pci is not None:
        fn = sys_root / "devices" / "pci0000:00" / pci
        fn.mkdir(parents=True, exist_ok=True)
        drv = sys_root / "bus" / "pci" / "drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        if not (fn / "driver").is_symlink():
            (fn / "driver").symlink_to(drv)
        (d / "device").symlink_to(fn)
    return d


def h100_ethernet(sys_root: Path) -> dict[str, dict[str, str]]:
    """The real H100 node's Ethernet ports as interfaces under sys_root; returns iface -> files."""
    devices = ibports.parse_ibstat(IBSTAT_H100.read_text()).details["devices"]
    out = {}
    n = 0
    for dev, info in sorted(devices.items()):
        for p in info["ports"].values():
            if p["link_layer"] != "Ethernet":
                continue
            n += 1
            if p["state"] == "Active":
                files = {"operstate": "up", "carrier": "1", "speed": str(int(p["rate"]) * 1000)}
            else:  # Down / Disabled: administratively down
                files = {"operstate": "down"}
            write_iface(sys_root, dev, files, pci=f"0000:{0x10 + n:02x}:00.0")
            out[dev] = files
    return out
