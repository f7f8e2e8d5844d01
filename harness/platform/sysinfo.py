"""Read the host facts for the inventory: /proc, /sys, /etc/os-release, lsblk, NVML.

Every probe is best-effort: a fact that cannot be read is None, with the reason in `notes`.
"""

from __future__ import annotations

import os
import platform
import socket
from collections.abc import Callable
from typing import Any

from harness.errors import ToolMissing
from harness.parsers import linkstate
from harness.parsers import sysinfo as parse
from harness.platform import netdev, nvml, proc
from harness.platform.sysfs import SYS, read_value


def collect(gpu_probe: Callable[[], dict[str, Any]] = nvml.gpu_inventory) -> dict[str, Any]:
    """The whole inventory as a JSON-ready dict."""
    notes: list[str] = []
    osr = parse.parse_os_release(read_value("/etc/os-release") or "")
    cpu = parse.parse_cpuinfo(read_value("/proc/cpuinfo") or "")
    mem = parse.parse_meminfo(read_value("/proc/meminfo") or "")
    numa = sorted(p.name for p in (SYS / "devices/system/node").glob("node[0-9]*"))
    gpus = gpu_probe()
    if not gpus.get("available"):
        notes.append(gpus.get("reason", "no GPU information"))
    inv: dict[str, Any] = {
        "host": {"hostname": socket.gethostname(), "os": osr.get("PRETTY_NAME"),
                 "kernel": platform.release(), "arch": platform.machine()},
        "system": {k: read_value(SYS / "class/dmi/id" / f) for k, f in
                   (("vendor", "sys_vendor"), ("product", "product_name"),
                    ("serial", "product_serial"), ("board_serial", "board_serial"),
                    ("bios_version", "bios_version"))},
        "cpu": {"model": cpu["model"], "sockets": cpu["sockets"], "threads": cpu["threads"],
                "online": os.cpu_count(), "numa_nodes": len(numa) or 1},
        "memory": {"total_bytes": mem.get("MemTotal")},
        "block_devices": _block_devices(notes),
        "nics": _nics(),
        "gpus": gpus.get("gpus", []),
        "software": {"nvidia_driver": gpus.get("driver"), "cuda_driver": gpus.get("cuda_driver"),
                     "python": platform.python_version()},
        "nvml": {"available": bool(gpus.get("available")), "reason": gpus.get("reason", "")},
        "notes": notes,
    }
    return inv


def _block_devices(notes: list[str]) -> list[dict[str, Any]]:
    try:
        rc, out, err = proc.capture_rc(
            ["lsblk", "-J", "-b", "-d", "-o", "NAME,PATH,MODEL,SERIAL,SIZE,TRAN,ROTA,TYPE"], timeout=20)
    except ToolMissing as e:
        notes.append(str(e))
        return []
    if rc != 0:
        notes.append(f"lsblk failed: {err.strip()[:200]}")
        return []
    try:
        return parse.parse_lsblk_disks(out)
    except ValueError as e:
        notes.append(f"lsblk output unreadable: {e}")
        return []


def _nics() -> list[dict[str, Any]]:
    out = []
    for dev in sorted((SYS / "class/net").glob("*")):
        if dev.name == "lo":
            continue
        link = netdev.link(dev.name)
        out.append({
            "name": dev.name,
            "driver": link.driver,
            "speed_mbps": linkstate.speed_mbps(link.files.get("speed")),
            "state": link.files.get("operstate"),
            "mac": read_value(dev / "address"),
            "mtu": int(m) if (m := read_value(dev / "mtu")) and m.isdigit() else None,
        })
    return out
