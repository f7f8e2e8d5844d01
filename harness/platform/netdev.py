"""A network interface's link files and driver, read from sysfs (/sys/class/net/IFACE).

Best-effort: a file the kernel refuses (EINVAL for the speed of a link that is down or virtual)
or that is missing is left out. The root is facts.SYS, so tests point both at one tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from harness.platform import facts

LINK_FILES = ("operstate", "carrier", "speed")


@dataclass(frozen=True)
class NetLink:
    """One interface: the LINK_FILES read (stripped), its driver, and the device it sits on."""

    iface: str
    files: Mapping[str, str] = field(default_factory=dict)
    driver: Optional[str] = None  # mlx5_core, virtio_net; None for a virtual interface
    device: Optional[str] = None  # the bus address under it: 0000:17:00.0, virtio2

    def to_dict(self) -> dict[str, Optional[str]]:
        return {**{n: self.files.get(n) for n in LINK_FILES}, "driver": self.driver, "device": self.device}


def link(iface: str) -> NetLink:
    """The link files, driver and device of /sys/class/net/IFACE."""
    base = facts.SYS / "class/net" / iface
    files = {n: text.strip() for n in LINK_FILES if (text := facts.read(base / n)) is not None}
    dev = base / "device"
    device = dev.resolve().name if dev.exists() else None
    driver = (dev / "driver").resolve().name if (dev / "driver").exists() else None
    return NetLink(iface, files, driver, device)
