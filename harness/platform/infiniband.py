"""The RDMA devices the kernel knows, from sysfs (/sys/class/infiniband)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

SYSFS = Path("/sys/class/infiniband")


def devices(root: Optional[Path] = None) -> list[str]:
    """Names of the RDMA devices (mlx5_0, ...), sorted; empty when there are none or no sysfs class."""
    try:
        return sorted(p.name for p in (root or SYSFS).iterdir())
    except OSError:
        return []


def port_counters(names: list[str], root: Optional[Path] = None) -> dict[tuple[str, int], dict[str, int]]:
    """The counters of every port of the named devices: {(device, port): {counter: value}}.

    Unreadable or non-numeric counter files are left out; a device without ports gives nothing.
    """
    out: dict[tuple[str, int], dict[str, int]] = {}
    for dev in names:
        ports = (root or SYSFS) / dev / "ports"
        try:
            port_dirs = sorted(p for p in ports.iterdir() if p.name.isdigit())
        except OSError:
            continue
        for port in port_dirs:
            values: dict[str, int] = {}
            try:
                files = sorted((port / "counters").iterdir())
            except OSError:
                files = []
            for f in files:
                try:
                    text = f.read_text().strip()
                except OSError:
                    continue
                if text.isdigit():
                    values[f.name] = int(text)
            out[(dev, int(port.name))] = values
    return out
