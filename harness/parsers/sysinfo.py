"""Pure parsers for the host facts the inventory reads (/proc files, os-release, lsblk JSON)."""

from __future__ import annotations

import json
from typing import Any


def parse_os_release(text: str) -> dict[str, str]:
    """KEY=value lines of /etc/os-release, quotes removed."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            out[key] = value.strip().strip('"').strip("'")
    return out


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """Model name, logical CPU count and socket count from /proc/cpuinfo (x86 and Arm)."""
    model = None
    logical = 0
    sockets: set[str] = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor":
            logical += 1
        elif key in ("model name", "Model", "cpu model") and model is None:
            model = value
        elif key == "physical id":
            sockets.add(value)
    return {"model": model, "threads": logical, "sockets": len(sockets) or (1 if logical else 0)}


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo fields in bytes (kB values times 1024)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or not parts:
            continue
        try:
            n = int(parts[0])
        except ValueError:
            continue
        out[key.strip()] = n * 1024 if len(parts) > 1 and parts[1] == "kB" else n
    return out


_SKIP_TYPES = {"loop", "rom", "ram", "zram"}


def parse_lsblk_disks(text: str) -> list[dict[str, Any]]:
    """Whole disks from `lsblk -J -b -d -o NAME,PATH,MODEL,SERIAL,SIZE,TRAN,ROTA,TYPE`."""
    data = json.loads(text)
    out = []
    for dev in data.get("blockdevices", []):
        if dev.get("type") in _SKIP_TYPES or str(dev.get("name", "")).startswith(("loop", "zram", "ram")):
            continue
        size = dev.get("size")
        out.append({
            "name": dev.get("name"),
            "path": dev.get("path") or f"/dev/{dev.get('name')}",
            "model": (dev.get("model") or "").strip() or None,
            "serial": (dev.get("serial") or "").strip() or None,
            "size_bytes": int(size) if size is not None else None,
            "transport": dev.get("tran") or ("nvme" if str(dev.get("name", "")).startswith("nvme")
                                             else None),
            "rotational": bool(int(dev["rota"])) if dev.get("rota") not in (None, "") else None,
        })
    return out
