"""Pure parser of `nvidia-smi -q -x`: driver and CUDA versions, and per GPU the modes the audit
judges (persistence, MIG, ECC), VBIOS and NVLink fabric state."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass


@dataclass(frozen=True)
class SmiGpu:
    """One <gpu> element, in the order nvidia-smi lists them (its index order)."""

    index: int
    pci_bus_id: str
    name: str
    persistence_mode: bool | None
    mig_mode: str | None  # enabled | disabled | n/a
    ecc_mode: str | None
    vbios_version: str | None
    fabric_state: str | None  # None when the driver does not report it


@dataclass(frozen=True)
class SmiLog:
    """The parts of an nvidia_smi_log the audit uses."""

    driver_version: str | None
    cuda_version: str | None
    attached_gpus: int | None
    gpus: tuple[SmiGpu, ...]


def _text(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    found = el.find(path)
    if found is None or found.text is None:
        return None
    t = found.text.strip()
    return t or None


def _mode(v: str | None) -> str | None:
    return v.lower() if v is not None else None


def parse_smi_xml(text: str) -> SmiLog:
    """An `nvidia-smi -q -x` document; ValueError when it is not one."""
    try:
        # nvidia-smi's own output on this machine, not data from elsewhere; no DTD is fetched.
        root = ET.fromstring(text.strip())  # noqa: S314
    except ET.ParseError as e:
        raise ValueError(f"not XML: {e}") from e
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"root element is <{root.tag}>, not <nvidia_smi_log>")
    gpus = []
    for i, g in enumerate(root.findall("gpu")):
        pm = _text(g, "persistence_mode")
        gpus.append(SmiGpu(
            index=i,
            pci_bus_id=g.get("id") or _text(g, "pci/pci_bus_id") or "",
            name=_text(g, "product_name") or "",
            persistence_mode=None if pm is None or pm == "N/A" else pm == "Enabled",
            mig_mode=_mode(_text(g, "mig_mode/current_mig")),
            ecc_mode=_mode(_text(g, "ecc_mode/current_ecc")),
            vbios_version=_text(g, "vbios_version"),
            fabric_state=_mode(_text(g, "fabric/state")),
        ))
    attached = _text(root, "attached_gpus")
    return SmiLog(_text(root, "driver_version"), _text(root, "cuda_version"),
                  int(attached) if attached and attached.isdigit() else None, tuple(gpus))
