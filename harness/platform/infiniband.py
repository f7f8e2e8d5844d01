"""The RDMA devices the kernel knows, from sysfs (/sys/class/infiniband)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.errors import HarnessError, SkipCheck
from harness.platform import pci
from harness.platform.sysfs import read_value

SYSFS = Path("/sys/class/infiniband")
PORT_FILES = ("state", "phys_state", "rate", "link_layer")
DEVICE_FILES = ("fw_ver", "hca_type", "board_id", "node_desc")


@dataclass(frozen=True)
class SysfsPort:
    """One port's sysfs files as read: raw text of PORT_FILES, numeric counters and hw_counters."""

    device: str
    port: int
    files: Mapping[str, str] = field(default_factory=dict)
    counters: Mapping[str, int] = field(default_factory=dict)
    hw_counters: Mapping[str, int] = field(default_factory=dict)


def devices(root: Optional[Path] = None) -> list[str]:
    """Names of the RDMA devices (mlx5_0, ...), sorted; empty when there are none or no sysfs class."""
    try:
        return sorted(p.name for p in (root or SYSFS).iterdir())
    except OSError:
        return []


def require_devices(hardware: Mapping[str, Any], root: Optional[Path] = None) -> list[str]:
    """The RDMA devices. None at all: SkipCheck when the profile expects none. Fewer than its
    hardware.hca_count: the one rule for every counted family (pci.absent_or_unbound): adapters on
    the PCI bus without their driver are an error naming the driver; adapters absent from the bus
    are left to the profile's count rule (the caller measures what is there, [] included: the
    hardware's verdict)."""
    found = devices(root)
    where = root or SYSFS
    expected = hardware.get("hca_count")
    if found and (not expected or len(found) >= int(expected)):
        return found
    if expected:  # fewer than expected: those on the bus without their driver are the environment's
        why = pci.absent_or_unbound("rdma", int(expected), len(found), str(where))
        if why:
            raise HarnessError(why)
        return found  # the rest are absent from the bus: the profile's count rule fails them
    raise SkipCheck(f"no RDMA device: {where} is empty or missing (no InfiniBand/RoCE adapter or driver)")


def _numbers(directory: Path) -> dict[str, int]:
    """Every file of `directory` holding a non-negative integer; others are left out."""
    try:
        files = sorted(directory.iterdir())
    except OSError:
        return {}
    out = {}
    for f in files:
        text = read_value(f)
        if text is not None and text.isdigit():
            out[f.name] = int(text)
    return out


def _port_dirs(root: Path, dev: str) -> list[Path]:
    try:
        return sorted((p for p in (root / dev / "ports").iterdir() if p.name.isdigit()),
                      key=lambda p: int(p.name))
    except OSError:
        return []


def port_counters(names: list[str], root: Optional[Path] = None) -> dict[tuple[str, int], dict[str, int]]:
    """The counters of every port of the named devices: {(device, port): {counter: value}}.

    Unreadable or non-numeric counter files are left out; a device without ports gives nothing.
    """
    base = root or SYSFS
    return {(dev, int(port.name)): _numbers(port / "counters")
            for dev in names for port in _port_dirs(base, dev)}


def ports(names: list[str], root: Optional[Path] = None) -> list[SysfsPort]:
    """Every port of the named devices with its state files, counters and hw_counters."""
    base = root or SYSFS
    out = []
    for dev in names:
        for port in _port_dirs(base, dev):
            files = {n: text for n in PORT_FILES if (text := read_value(port / n)) is not None}
            out.append(SysfsPort(dev, int(port.name), files, _numbers(port / "counters"),
                                 _numbers(port / "hw_counters")))
    return out


def device_facts(name: str, root: Optional[Path] = None) -> dict[str, str]:
    """Firmware, HCA type, board id and node description of a device, where readable."""
    base = (root or SYSFS) / name
    return {n: text for n in DEVICE_FILES if (text := read_value(base / n))}
