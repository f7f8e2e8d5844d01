"""NVIDIA GPUs on the PCI bus, read from sysfs: they are there whether or not NVML loads.

Each /sys/bus/pci/devices/<address>/ holds `vendor` ("0x10de"), `device` ("0x2330") and `class`
("0x030200": base class, subclass, programming interface). A GPU is NVIDIA's vendor id with the
display-controller base class 0x03: VGA 0x0300 (workstation parts), 3D controller 0x0302 (the
datacenter parts: A100, H100, H200) and "other" 0x0380. An NVSwitch (bridge, 0x0680) and a GPU's
HD audio (0x0403) or USB-C (0x0c03) functions are not GPUs. Class names and device ids as the
PCI ID database has them (github.com/pciutils/pciids, pci.ids).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

SYSFS = Path("/sys/bus/pci/devices")
NVIDIA = 0x10DE
DISPLAY_CLASS = 0x03  # PCI base class "Display controller"


@dataclass(frozen=True)
class PciDevice:
    """One PCI function: its address (0000:1b:00.0), vendor, device and class code."""

    address: str
    vendor: int
    device: int
    pci_class: int

    @property
    def is_nvidia_gpu(self) -> bool:
        return self.vendor == NVIDIA and self.pci_class >> 16 == DISPLAY_CLASS

    def to_dict(self) -> dict[str, str]:
        return {"pci_bus_id": self.address, "device_id": f"0x{self.device:04x}",
                "class": f"0x{self.pci_class:06x}"}


def _hex(path: Path) -> Optional[int]:
    try:
        return int(path.read_text().strip(), 16)
    except (OSError, ValueError):
        return None


def devices(root: Optional[Path] = None) -> Optional[list[PciDevice]]:
    """Every PCI function under `root` (default /sys/bus/pci/devices), by address; None when the
    bus cannot be read at all (no sysfs): unknown, not empty. A function whose files cannot be
    read is left out."""
    base = root or SYSFS
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return None
    out = []
    for d in entries:
        vendor, device, cls = _hex(d / "vendor"), _hex(d / "device"), _hex(d / "class")
        if vendor is not None and device is not None and cls is not None:
            out.append(PciDevice(d.name.lower(), vendor, device, cls))
    return out


def nvidia_gpus(root: Optional[Path] = None) -> Optional[list[PciDevice]]:
    """The NVIDIA GPUs on the bus; None when the bus cannot be read."""
    found = devices(root)
    return None if found is None else [d for d in found if d.is_nvidia_gpu]


def normalize(bus_id: str) -> str:
    """NVML's '00000000:1B:00.0' and sysfs's '0000:1b:00.0' as '0000:1b:00.0'."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) != 3:
        return bus_id.strip().lower()
    return f"{parts[0][-4:].rjust(4, '0')}:{parts[1]}:{parts[2]}"


def missing(gpus: Sequence[Mapping[str, Any]], on_bus: Sequence[Mapping[str, Any]]) -> list[str]:
    """Addresses of the GPUs on the bus that NVML does not list (inventory dicts; none without NVML)."""
    if not gpus:
        return []
    seen = {normalize(str(g.get("pci_bus_id", ""))) for g in gpus}
    return [str(d["pci_bus_id"]) for d in on_bus if normalize(str(d.get("pci_bus_id", ""))) not in seen]


def missing_text(gpus: Sequence[Mapping[str, Any]], on_bus: Sequence[Mapping[str, Any]]) -> str:
    """'; missing PCI 0000:52:00.0' or ''."""
    gone = missing(gpus, on_bus)
    return f"; missing PCI {', '.join(gone)}" if gone else ""


# Device families a profile counts, as the PCI bus shows them whether or not a driver is loaded:
# an RDMA adapter is an InfiniBand controller (class 0x0207) or a Mellanox/NVIDIA networking
# function (vendor 0x15b3, base class 0x02: ConnectX in Ethernet mode is RoCE-capable); an NVMe
# controller is a Non-Volatile memory controller (class 0x0108; interface 02 is NVMe). Virtual
# functions (SR-IOV, a `physfn` link) are not adapters.
MELLANOX = 0x15B3
FAMILIES = {
    "rdma": ("RDMA adapter", "mlx5_core and mlx5_ib (or the vendor's RDMA driver)"),
    "nvme": ("NVMe controller", "nvme"),
}


def _of_family(d: PciDevice, family: str) -> bool:
    if family == "rdma":
        return d.pci_class >> 8 == 0x0207 or (d.vendor == MELLANOX and d.pci_class >> 16 == 0x02)
    return family == "nvme" and d.pci_class >> 8 == 0x0108


def driver_of(address: str, root: Optional[Path] = None) -> Optional[str]:
    """The kernel driver bound to a PCI function (the name its `driver` link points to), or None."""
    try:
        return Path(os.readlink((root or SYSFS) / address / "driver")).name
    except OSError:
        return None


def family_on_bus(family: str, root: Optional[Path] = None) -> Optional[list[tuple[str, Optional[str]]]]:
    """(address, bound driver or None) of each physical function of a family ("rdma", "nvme") on
    the PCI bus; None when the bus cannot be read."""
    found = devices(root)
    if found is None:
        return None
    base = root or SYSFS
    return [(d.address, driver_of(d.address, root)) for d in found
            if _of_family(d, family) and not (base / d.address / "physfn").exists()]


def absent_or_unbound(family: str, expected: int, seen: int, where: str,
                      root: Optional[Path] = None) -> Optional[str]:
    """One rule for every family the profile counts, when the kernel's view (`where`) shows `seen`
    of `expected`: None when the PCI bus has no more of them than that (absent from the bus: the
    count is the hardware's, judged by the profile's rule: REJECTED), else the environment's
    fault, naming the driver: 'on the PCI bus but no driver bound: load ...' (ERRORED)."""
    bus = family_on_bus(family, root)
    what, driver = FAMILIES[family]
    if bus is None:
        return (f"profile expects {expected} {what}s, found {seen} in {where}, and the PCI bus cannot be "
                "read to tell absent hardware from a driver that is not loaded")
    if len(bus) <= seen:
        return None
    unbound = [a for a, drv in bus if drv is None]
    bound = sorted({drv for _, drv in bus if drv})
    addrs = ", ".join(a for a, _ in bus[:4]) + (f" and {len(bus) - 4} more" if len(bus) > 4 else "")
    why = (f"{len(unbound)} with no driver bound: load {driver}" if unbound else
           f"bound to {', '.join(bound)} but not in {where}: load {driver}")
    return (f"profile expects {expected} {what}s, found {seen} in {where}, but the PCI bus has "
            f"{len(bus)} ({addrs}): {why}")
