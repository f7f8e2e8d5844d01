"""Who a node is, from a run's inventory, and what changed between two runs of it. Pure.

History keys runs on serial numbers, not hostnames: the system (DMI) serial when the firmware
has a real one, else the GPU and NVMe serials, and only then the hostname, where two runs whose
/etc/machine-id differs are two nodes that share a hostname. A renamed host is the
same node; a GPU whose serial changed at an index is a swap, reported with old and new serials.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# What vendors leave in DMI fields they never filled in: never an identity.
_PLACEHOLDERS = {"", "0", "none", "null", "n/a", "na", "not specified", "not applicable", "default string",
                 "to be filled by o.e.m.", "system serial number", "serial number", "0123456789",
                 "unknown", "not available", "chassis serial number", "empty", "(null)", "<null>",
                 "invalid", "not set", "none specified"}
_PREFIXES = ("0x", "sn", "s/n")  # a placeholder is still one behind these: 0x00000000, SN000000


@dataclass(frozen=True)
class GpuPart:
    """One GPU as the inventory saw it."""

    index: int
    serial: str | None
    uuid: str | None
    name: str = ""
    vbios: str | None = None

    @property
    def ident(self) -> str | None:
        """Serial number when NVML gives one (consumer GPUs have none), else the UUID."""
        return self.serial or self.uuid


@dataclass(frozen=True)
class NodeIdentity:
    """The identifying facts of a node in one run."""

    hostname: str
    system_serial: str | None
    gpus: tuple[GpuPart, ...] = ()
    nvme_serials: tuple[str, ...] = ()
    software: Mapping[str, str] = field(default_factory=dict)
    machine_id: str | None = None  # /etc/machine-id: tells apart two nodes that share a hostname

    def __post_init__(self) -> None:
        object.__setattr__(self, "software", dict(sorted((self.software or {}).items())))

    @property
    def gpu_idents(self) -> frozenset[str]:
        return frozenset(g.ident for g in self.gpus if g.ident)

    def to_dict(self) -> dict[str, Any]:
        return {"hostname": self.hostname, "system_serial": self.system_serial,
                "gpus": [{"index": g.index, "serial": g.serial, "uuid": g.uuid, "name": g.name,
                          "vbios": g.vbios} for g in self.gpus],
                "nvme_serials": list(self.nvme_serials), "software": dict(self.software),
                "machine_id": self.machine_id}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeIdentity:
        gpus = tuple(GpuPart(int(g.get("index", i)), g.get("serial"), g.get("uuid"), g.get("name", ""),
                             g.get("vbios")) for i, g in enumerate(d.get("gpus", [])))
        return cls(str(d.get("hostname", "")), d.get("system_serial"), gpus,
                   tuple(d.get("nvme_serials", [])), dict(d.get("software", {})),
                   d.get("machine_id") or None)


_NOT_NODE = {"python"}  # the harness's own runtime, not the node's software


_FILL = "0123456789" * 4


def _fill_pattern(text: str) -> bool:
    """A vendor fill pattern: digits counting up from 0 or 1 (01234567890123456789AB, 123456789),
    or one character repeated (00000000, FFFFFFFF, XXXX) after separators are dropped."""
    low = text.lower()
    for prefix in _PREFIXES:
        if low.startswith(prefix) and len(low) > len(prefix):
            low = low[len(prefix):]
            break
    squashed = "".join(ch for ch in low if ch.isalnum())
    if len(set(squashed)) <= 1:
        return True
    digits = len(squashed) - len(squashed.lstrip("0123456789"))
    run = squashed[:digits]
    return digits >= 8 and (_FILL.startswith(run) or _FILL[1:].startswith(run))


def real_serial(value: Any) -> str | None:
    """The serial as text, or None for missing values and vendor placeholders."""
    if value is None:
        return None
    text = str(value).strip()
    if text.lower() in _PLACEHOLDERS or "o.e.m" in text.lower() or _fill_pattern(text):
        return None
    return text


def _section(inv: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    v = inv.get(name)
    return v if isinstance(v, Mapping) else {}


def identity_of(inventory: Mapping[str, Any], host: str = "") -> NodeIdentity:
    """The identity recorded in a run's inventory (tolerant of missing sections)."""
    h, system, sw = _section(inventory, "host"), _section(inventory, "system"), \
        _section(inventory, "software")
    gpus = []
    for i, g in enumerate(inventory.get("gpus") or []):
        if isinstance(g, Mapping):
            idx = g.get("index", i)
            gpus.append(GpuPart(int(idx) if isinstance(idx, int) or str(idx).isdigit() else i,
                                real_serial(g.get("serial")), real_serial(g.get("uuid")),
                                str(g.get("name") or ""), g.get("vbios")))
    nvme = sorted({s for d in inventory.get("block_devices") or [] if isinstance(d, Mapping)
                   and d.get("transport") == "nvme" and (s := real_serial(d.get("serial")))})
    software = {k: str(v) for k, v in sw.items()
                if isinstance(v, (str, int, float)) and v != "" and k not in _NOT_NODE}
    for key, value in (("kernel", h.get("kernel")), ("os", h.get("os")),
                       ("bios", system.get("bios_version"))):
        if value:
            software[key] = str(value)
    return NodeIdentity(str(h.get("hostname") or host or ""), real_serial(system.get("serial")),
                        tuple(sorted(gpus, key=lambda g: g.index)), tuple(nvme), software,
                        real_serial(h.get("machine_id")))


def overlap(a: Iterable[str], b: Iterable[str]) -> float:
    """Share of the larger set found in both (0 when either is empty)."""
    sa, sb = set(a), set(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / max(len(sa), len(sb))


def same_node(known: NodeIdentity, new: NodeIdentity) -> bool:
    """Whether `new` is the node last seen as `known` (see the module notes for the order)."""
    if known.system_serial and new.system_serial:
        return known.system_serial == new.system_serial
    if overlap(known.gpu_idents, new.gpu_idents) >= 0.5:
        return True
    if overlap(known.nvme_serials, new.nvme_serials) >= 0.5:
        return True
    if known.machine_id and new.machine_id and known.machine_id != new.machine_id:
        return False  # two installs that share a hostname (a copied image keeps its id: same node)
    return bool(known.hostname) and known.hostname == new.hostname


@dataclass(frozen=True)
class Change:
    """One difference between consecutive runs of a node: a swap, a rename, an update."""

    kind: str  # gpu_swap, gpu_added, gpu_removed, nvme_swap, renamed, serial, software
    detail: str
    old: tuple[str, ...] = ()
    new: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "detail": self.detail, "old": list(self.old), "new": list(self.new)}


def changes(old: NodeIdentity, new: NodeIdentity) -> list[Change]:
    """What changed from `old` to `new`, GPU swaps named by index with both serials."""
    out: list[Change] = []
    if old is new:  # runs of one identity share one object (history.rows)
        return out
    if old.hostname != new.hostname:
        out.append(Change("renamed", f"hostname {old.hostname} → {new.hostname}",
                          (old.hostname,), (new.hostname,)))
    if old.system_serial and new.system_serial and old.system_serial != new.system_serial:
        out.append(Change("serial", f"system serial {old.system_serial} → {new.system_serial}",
                          (old.system_serial,), (new.system_serial,)))
    out += _gpu_changes(old.gpus, new.gpus)
    gone = sorted(set(old.nvme_serials) - set(new.nvme_serials))
    came = sorted(set(new.nvme_serials) - set(old.nvme_serials))
    if gone or came:
        out.append(Change("nvme_swap", f"NVMe {', '.join(gone) or 'none'} → {', '.join(came) or 'none'}",
                          tuple(gone), tuple(came)))
    for key in sorted(set(old.software) | set(new.software)):
        a, b = old.software.get(key), new.software.get(key)
        if a != b and a is not None and b is not None:
            out.append(Change("software", f"{key} {a} → {b}", (a,), (b,)))
    return out


def _gpu_changes(old: Sequence[GpuPart], new: Sequence[GpuPart]) -> list[Change]:
    out: list[Change] = []
    by_old = {g.index: g for g in old}
    by_new = {g.index: g for g in new}
    for idx in sorted(set(by_old) | set(by_new)):
        a, b = by_old.get(idx), by_new.get(idx)
        if a and b and a.ident and b.ident and a.ident != b.ident:
            out.append(Change("gpu_swap", f"GPU {idx}: serial {a.ident} → {b.ident}", (a.ident,), (b.ident,)))
        elif a and not b:
            out.append(Change("gpu_removed", f"GPU {idx} ({a.ident or 'no serial'}) no longer seen",
                              (a.ident or "",), ()))
        elif b and not a:
            out.append(Change("gpu_added", f"GPU {idx} ({b.ident or 'no serial'}) newly seen",
                              (), (b.ident or "",)))
        elif a and b and a.vbios and b.vbios and a.vbios != b.vbios:
            out.append(Change("software", f"GPU {idx} VBIOS {a.vbios} → {b.vbios}", (a.vbios,), (b.vbios,)))
    return out


def part_of(labels: Mapping[str, Any], identity: NodeIdentity) -> str | None:
    """The serial of the part a metric measures: a `serial` label, or the GPU at a `gpu` index."""
    if labels.get("serial"):
        return str(labels["serial"])
    gpu = labels.get("gpu")
    if gpu is None:
        return None
    for g in identity.gpus:
        if str(g.index) == str(gpu):
            return g.ident
    return None
