"""A network interface's link state from its sysfs files (/sys/class/net/IFACE), as metrics.

Pure. The files are the kernel's text (net/core/net-sysfs.c): `operstate` (up, down,
lowerlayerdown, dormant, testing, notpresent, unknown), `carrier` (1/0) and `speed` (Mb/s, "%d";
-1 when the driver does not know it, as virtio_net does, or when the link is down). A file the
kernel refuses to read (EINVAL: carrier and speed of an interface that is administratively down,
speed of lo or ifb) is simply absent from the map.

`net.link_up` is 1 when operstate is up (or, for drivers that leave it unknown, when carrier is 1).
`net.link_speed` (GB/s: 400 Gb/s = 50) is 0 for a link that is down, the speed for a link that is
up, and absent when an up link's speed is unknown: a NIC that cannot tell its speed is not a
failure, only unmeasured.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.model import LabelValue, Metric
from harness.units import COUNT, GBPS, to_gbps

# SPEED_UNKNOWN as kernels have printed it: int -1 now, as u16 and u32 in older kernels
UNKNOWN_SPEEDS = frozenset({-1, 0xFFFF, 0xFFFFFFFF})


def is_up(files: Mapping[str, str]) -> bool | None:
    """True when the link passes traffic; None when neither operstate nor carrier could be read."""
    state = files.get("operstate", "").strip().lower() or None
    if state == "up":
        return True
    if state not in (None, "unknown"):
        return False
    carrier = files.get("carrier", "").strip() or None
    if carrier is None:
        return None if state is None else False
    return carrier == "1"


def speed_mbps(text: str | None) -> int | None:
    """'400000' -> 400000; None for -1 (unknown), 0, garbage, or no file."""
    try:
        value = int((text or "").strip())
    except ValueError:
        return None
    return value if value > 0 and value not in UNKNOWN_SPEEDS else None


def metrics(files: Mapping[str, str], labels: Mapping[str, LabelValue]) -> list[Metric]:
    """`net.link_up` and `net.link_speed` of one interface (see the module docstring)."""
    up = is_up(files)
    if up is None:
        return []
    out = [Metric("net.link_up", 1.0 if up else 0.0, COUNT, dict(labels))]
    speed = speed_mbps(files.get("speed")) if up else 0
    if speed is not None:
        out.append(Metric("net.link_speed", to_gbps(speed, "Mb/s"), GBPS, dict(labels)))
    return out


def describe(files: Mapping[str, str]) -> str:
    """'up, 400 Gb/s', 'down', 'up, speed unknown', 'state unknown' for summaries."""
    up = is_up(files)
    if up is None:
        return "state unknown"
    if not up:
        state = files.get("operstate", "").strip()
        return state if state not in ("", "unknown") else "no carrier"
    speed = speed_mbps(files.get("speed"))
    return f"up, {speed / 1000:g} Gb/s" if speed is not None else "up, speed unknown"
