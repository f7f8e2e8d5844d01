"""Read the host facts for the inventory: /proc, /sys, /etc/os-release, lsblk, NVML, the PCI bus.

Every probe is best-effort: a fact that cannot be read is None, with the reason in `notes`. A list
that could not be read (lsblk failed, NVML not loadable, the PCI bus unreadable) stays empty and
its reason is in `unknown` (key: the list's name): unknown, never zero.
"""

from __future__ import annotations

import os
import platform
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.errors import ToolError
from harness.parsers import linkstate
from harness.parsers import sysinfo as parse
from harness.platform import netdev, nvml, pci, proc
from harness.platform.sysfs import SYS, read_value


class Disks:
    """lsblk, begun in a thread now: its wait overlaps whatever the caller reads meanwhile (the
    suite and profile, then the rest of the inventory). Bounded by lsblk's own timeout."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.unknown: dict[str, str] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-lsblk")
        self._future = self._pool.submit(_block_devices, self.notes, self.unknown)

    def result(self) -> tuple[list[dict[str, Any]], list[str], dict[str, str]]:
        """(disks, notes, unknown), once lsblk has answered."""
        return self._future.result(), self.notes, self.unknown

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def collect(gpu_probe: Callable[[], dict[str, Any]] = nvml.gpu_inventory,
            pci_root: Path | None = None, disks: Disks | None = None) -> dict[str, Any]:
    """The whole inventory as a JSON-ready dict.

    lsblk runs in a thread (`disks`, begun by the caller, else now) while the rest is read (NVML's
    start alone can take a second on a GPU node without persistence mode), so the slowest probe
    sets the time, not their sum."""
    notes: list[str] = []
    unknown: dict[str, str] = {}
    disks = disks or Disks()
    try:
        return _collect(gpu_probe, pci_root, notes, unknown, disks.result)
    finally:
        disks.close()


def _collect(gpu_probe: Callable[[], dict[str, Any]], pci_root: Path | None, notes: list[str],
             unknown: dict[str, str],
             disks: Callable[[], tuple[list[dict[str, Any]], list[str], dict[str, str]]]) -> dict[str, Any]:
    osr = parse.parse_os_release(read_value("/etc/os-release") or "")
    cpu = parse.parse_cpuinfo(read_value("/proc/cpuinfo") or "")
    mem = parse.parse_meminfo(read_value("/proc/meminfo") or "")
    numa = sorted(p.name for p in (SYS / "devices/system/node").glob("node[0-9]*"))
    gpus = gpu_probe()
    on_bus = pci.nvidia_gpus(pci_root)
    if on_bus is None:
        unknown["pci_gpus"] = f"{pci_root or pci.SYSFS} not readable"
    nvml_reason = gpus.get("reason", "") or ("" if gpus.get("available") else "no GPU information")
    if not gpus.get("available"):
        if on_bus:
            nvml_reason = nvml_not_loadable(len(on_bus), nvml_reason,
                                            [pci.driver_of(d.address, pci_root) for d in on_bus])
        notes.append(nvml_reason)
        unknown["gpus"] = nvml_reason
    block_devices, disk_notes, disk_unknown = disks()
    notes += disk_notes
    unknown.update(disk_unknown)
    inv: dict[str, Any] = {
        "host": {"hostname": socket.gethostname(), "os": osr.get("PRETTY_NAME"),
                 "kernel": platform.release(), "arch": platform.machine(),
                 "machine_id": read_value("/etc/machine-id")},
        "system": {k: read_value(SYS / "class/dmi/id" / f) for k, f in
                   (("vendor", "sys_vendor"), ("product", "product_name"),
                    ("serial", "product_serial"), ("board_serial", "board_serial"),
                    ("bios_version", "bios_version"))},
        "cpu": {"model": cpu["model"], "sockets": cpu["sockets"], "threads": cpu["threads"],
                "online": os.cpu_count(), "numa_nodes": len(numa) or 1},
        "memory": {"total_bytes": mem.get("MemTotal")},
        "block_devices": block_devices,
        "nics": _nics(),
        "gpus": gpus.get("gpus", []),
        "pci_gpus": [d.to_dict() for d in on_bus or []],
        "software": {"nvidia_driver": gpus.get("driver"), "cuda_driver": gpus.get("cuda_driver"),
                     "python": platform.python_version()},
        "nvml": {"available": bool(gpus.get("available")), "reason": nvml_reason},
        "notes": notes,
        "unknown": unknown,
    }
    return inv


def nvml_not_loadable(on_bus: int, reason: str, drivers: Sequence[str | None] = ()) -> str:
    """Why the GPUs on the bus have no NVML: the classic broken node (driver not loaded), naming the
    driver the bus shows them bound to, as for every device family (pci.absent_or_unbound)."""
    bound = sorted({d for d in drivers if d})
    if drivers and not bound:
        which = "; no driver bound to them: load nvidia"
    elif bound and "nvidia" not in bound:
        which = f"; bound to {', '.join(bound)}, not nvidia: load nvidia"
    else:
        which = ""
    return (f"{on_bus} NVIDIA GPUs on the PCI bus but NVML not loadable: is the driver loaded? "
            f"({reason}){which}")


def _block_devices(notes: list[str], unknown: dict[str, str]) -> list[dict[str, Any]]:
    """The disks lsblk lists; empty, with the reason in `unknown`, when lsblk could not tell."""
    why = None
    try:
        rc, out, err = proc.capture_rc(
            ["lsblk", "-J", "-b", "-d", "-o", "NAME,PATH,MODEL,SERIAL,SIZE,TRAN,ROTA,TYPE"], timeout=20)
    except ToolError as e:
        why = str(e)
    else:
        if rc != 0:
            why = f"lsblk failed (exit status {rc}): {err.strip()[:200]}"
        else:
            try:
                return parse.parse_lsblk_disks(out)
            except ValueError as e:
                why = f"lsblk output unreadable: {e}"
    notes.append(why)
    unknown["block_devices"] = why
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
