"""NVMe controllers and namespaces as sysfs shows them; reads only, never writes.

/sys/class/nvme/<ctrl>: model, serial, firmware_rev, transport, address; its `device` link is
the PCI function, whose current/max link speed and width tell a link trained down. Namespaces
are the block devices nvme<N>n<M> (hidden multipath paths nvme<N>c<C>n<M> count as namespaces
of their controller but are not devices). Every reader takes the sysfs root, so tests can use a
tree of their own.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from harness.platform.sysfs import SYS, read_value

PCIE_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
_NAMESPACE = re.compile(r"^nvme\d+(?:c\d+)?n\d+$")
_BLOCK_NAMESPACE = re.compile(r"^nvme\d+n\d+$")
_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")


@dataclass(frozen=True)
class PcieLink:
    """A PCIe link: speed in GT/s and lane count, now and at most (None when not reported)."""

    speed_gts: Optional[float]
    width: Optional[int]
    max_speed_gts: Optional[float]
    max_width: Optional[int]

    @property
    def gen(self) -> Optional[int]:
        return PCIE_GEN.get(self.speed_gts) if self.speed_gts is not None else None

    @property
    def max_gen(self) -> Optional[int]:
        return PCIE_GEN.get(self.max_speed_gts) if self.max_speed_gts is not None else None

    @property
    def downgraded(self) -> Optional[bool]:
        """True when speed or width is below the maximum; None when either pair is unknown."""
        pairs = [(self.speed_gts, self.max_speed_gts), (self.width, self.max_width)]
        known = [(cur, top) for cur, top in pairs if cur is not None and top is not None]
        if not known:
            return None
        return any(cur < top for cur, top in known)


@dataclass(frozen=True)
class NvmeController:
    """One NVMe controller (/dev/nvmeN) with its identity, link and namespaces."""

    name: str
    model: str
    serial: str
    firmware: str
    transport: str
    address: str
    namespaces: tuple[str, ...]
    link: Optional[PcieLink]
    in_sysfs: bool = True  # False for a controller named in a suite but absent from sysfs
    capacity_bytes: Optional[int] = None  # sum of its namespaces' sizes, when sysfs gives them

    @property
    def dev(self) -> str:
        return f"/dev/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["namespaces"] = list(self.namespaces)
        if self.link is not None:
            out["link"] = {**asdict(self.link), "gen": self.link.gen, "max_gen": self.link.max_gen,
                           "downgraded": self.link.downgraded}
        return out


def parse_link_speed(text: Optional[str]) -> Optional[float]:
    """'16.0 GT/s PCIe' (kernel >= 4.17) or '8 GT/s' (older) -> GT/s; 'Unknown' -> None."""
    m = _SPEED.match(text or "")
    return float(m.group(1)) if m else None


def _int(text: Optional[str]) -> Optional[int]:
    return int(text) if text is not None and text.isdigit() else None


def _link(pci: Path) -> Optional[PcieLink]:
    if not (pci / "current_link_speed").exists() and not (pci / "current_link_width").exists():
        return None  # not a PCIe function (fabrics, or conventional PCI in a VM)
    width, max_width = _int(read_value(pci / "current_link_width")), _int(read_value(pci / "max_link_width"))
    return PcieLink(parse_link_speed(read_value(pci / "current_link_speed")),
                    width if width else None,  # 0 means the link is down or unknown
                    parse_link_speed(read_value(pci / "max_link_speed")), max_width if max_width else None)


def controllers(sys_root: Optional[Path] = None) -> list[NvmeController]:
    """Every NVMe controller under <sys_root or SYS>/class/nvme, sorted by number."""
    base = (sys_root or SYS) / "class" / "nvme"
    try:
        entries = [p for p in base.iterdir() if re.fullmatch(r"nvme\d+", p.name)]
    except OSError:
        return []
    out = []
    for ctrl in sorted(entries, key=lambda p: int(p.name[4:])):
        try:
            names = sorted(p.name for p in ctrl.iterdir() if _NAMESPACE.match(p.name))
        except OSError:
            names = []
        transport = read_value(ctrl / "transport") or ""
        device = ctrl / "device"
        link = _link(device) if transport in ("pcie", "") and device.exists() else None
        sizes = [_int(read_value(ctrl / n / "size")) for n in names]  # 512-byte sectors, always
        capacity = sum(s * 512 for s in sizes if s is not None) if any(sizes) else None
        out.append(NvmeController(
            name=ctrl.name, model=read_value(ctrl / "model") or "", serial=read_value(ctrl / "serial") or "",
            firmware=read_value(ctrl / "firmware_rev") or "", transport=transport,
            address=read_value(ctrl / "address") or "", namespaces=tuple(names), link=link,
            capacity_bytes=capacity))
    return out


def namespace_devices(sys_root: Optional[Path] = None) -> list[str]:
    """/dev paths of the NVMe namespace block devices (whole devices, no partitions), sorted."""
    try:
        names = [p.name for p in ((sys_root or SYS) / "class" / "block").iterdir()
                 if _BLOCK_NAMESPACE.match(p.name)]
    except OSError:
        return []
    return [f"/dev/{n}" for n in sorted(names, key=lambda n: [int(x) for x in re.findall(r"\d+", n)])]
