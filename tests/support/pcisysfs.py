"""/sys/bus/pci/devices trees built from a real `lspci -Dnn` capture (test helper).

Each line becomes <root>/<address>/{vendor,device,class} in the kernel's format
(drivers/pci/pci-sysfs.c prints "0x%04x" ids and a "0x%06x" class with the programming interface,
00 here: lspci -nn shows only base class and subclass).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

DATA = Path(__file__).parents[1] / "data" / "pci"
HGX_H100 = DATA / "lspci_-Dnn_8x_h100_sxm5_hgx_4_nvswitch.txt"
LINE = re.compile(r"^(?P<addr>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) .*\[(?P<cls>[0-9a-f]{4})\]: "
                  r".*\[(?P<vendor>[0-9a-f]{4}):(?P<device>[0-9a-f]{4})\]")


def lines(path: Path = HGX_H100) -> list[str]:
    return [ln for ln in path.read_text().splitlines() if ln.strip()]


def gpu_addresses(path: Path = HGX_H100) -> list[str]:
    return [ln.split()[0] for ln in lines(path) if "[0302]" in ln]


def write_tree(root: Path, text: Iterable[str], drop: Iterable[str] = (),
               device_id: str | None = None) -> Path:
    """The functions of these lspci lines under root, less the addresses in `drop`;
    `device_id` (e.g. '2335') replaces the device id of every NVIDIA GPU."""
    gone = set(drop)
    root.mkdir(parents=True, exist_ok=True)
    for line in text:
        m = LINE.match(line)
        if m is None:
            raise ValueError(f"not an lspci -Dnn line: {line!r}")
        if m["addr"] in gone:
            continue
        d = root / m["addr"]
        d.mkdir()
        dev = device_id if device_id and m["vendor"] == "10de" and m["cls"] == "0302" else m["device"]
        (d / "vendor").write_text(f"0x{m['vendor']}\n")
        (d / "device").write_text(f"0x{dev}\n")
        (d / "class").write_text(f"0x{m['cls']}00\n")
    return root


CX7 = DATA / "lspci_-Dnn_connectx7_ib.txt"


def bind(root: Path, address: str, driver: str) -> None:
    """Bind a function of the tree to a driver, as the kernel shows it: a `driver` symlink whose
    target's name is the driver (../../../bus/pci/drivers/<driver>)."""
    (root / address / "driver").symlink_to(f"../../../bus/pci/drivers/{driver}")
