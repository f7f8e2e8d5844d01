"""Parse InfiniBand port state from `ibstat`, `ibv_devinfo` and sysfs port files; `ofed_info -s`.

Pure: text in, ParseResult out, never an exception. Metrics per device and port, labelled
{device, port, link_layer}: `ib.port_active` (1 when the logical state is Active, else 0),
and from ibstat and sysfs `ib.rate` in GB/s (both give the link's data rate in Gb/s, e.g.
400 for NDR 4x; 400 Gb/s = 50 GB/s) and from ibv_devinfo `ib.active_mtu` in bytes. A port
that is down is a measurement (the check judges it), not an invalid run; a tool error such
as ibpanic or "Failed to get IB devices list" is. `hcas()` is the same ibv_devinfo parse as
records, for the configuration audit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from harness.model import Metric
from harness.parsers.base import ParseResult, integer, invalid
from harness.units import BYTES, COUNT, GBPS, to_gbps

_CA = re.compile(r"^CA\s+'([^']+)'\s*$")
_IBSTAT_PORT = re.compile(r"^Port\s+(\d{1,9}):\s*$")
_HCA = re.compile(r"^hca_id:\s*(\S+)")
_DEVINFO_PORT = re.compile(r"^port:\s*(\d{1,9})\s*$")
_IBSTAT_ERRORS = re.compile(r"^ibpanic:|^ibwarn:|Failed|No such file|not found|No IB devices",
                            re.IGNORECASE)
_DEVINFO_ERRORS = re.compile(r"Failed|No IB devices|not found|No such|error", re.IGNORECASE)
_SYSFS_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


def port_metrics(device: str, port: str, info: dict[str, str]) -> list[Metric]:
    labels: dict[str, str | int] = {"device": device, "port": int(port),
                                    "link_layer": info.get("link_layer", "unknown")}
    state = info.get("state", "")
    active = state.lower().startswith(("active", "port_active"))
    out = [Metric("ib.port_active", 1.0 if active else 0.0, COUNT, labels)]
    rate = info.get("rate")
    if rate is not None:
        try:
            gbps = to_gbps(float(rate), "Gb/s")
            if math.isfinite(gbps):  # float() also reads 'nan' and 'inf'
                out.append(Metric("ib.rate", gbps, GBPS, labels))
        except ValueError:
            pass
    mtu = integer(info.get("active_mtu", "").split(" ")[0])
    if mtu is not None:
        out.append(Metric("ib.active_mtu", float(mtu), BYTES, labels))
    return out


def _finish(kind: str, devices: dict[str, dict[str, Any]], errors: list[str],
            empty: str) -> ParseResult:
    metrics: list[Metric] = []
    for name, dev in devices.items():
        for port, info in dev["ports"].items():
            metrics += port_metrics(name, port, info)
    problems = []
    if errors:
        more = f" (and {len(errors) - 1} more error lines)" if len(errors) > 1 else ""
        problems.append(f"{errors[0][:300]}{more}")
    if not devices and not errors:
        return invalid(kind, empty)
    if devices and not metrics:
        problems.append("no port found in the output")
    return ParseResult(kind, not problems, tuple(problems), tuple(metrics), {"devices": devices})


def parse_ibstat(text: str) -> ParseResult:
    """`ibstat` (all CAs): per port ib.port_active and ib.rate; CA facts in details."""
    devices, errors = _blocks(text, _CA, _IBSTAT_PORT, _IBSTAT_ERRORS,
                              lambda k: k.lower().replace(" ", "_"))
    return _finish("ibstat", devices, errors, "not ibstat output (no CA found)")


def parse_ibv_devinfo(text: str) -> ParseResult:
    """`ibv_devinfo`: per port ib.port_active and ib.active_mtu; fw_ver, board_id in details."""
    devices, errors = _blocks(text, _HCA, _DEVINFO_PORT, _DEVINFO_ERRORS,
                              lambda k: None if k == "Device ports" else k)
    return _finish("ibv-devinfo", devices, errors, "not ibv_devinfo output (no hca_id found)")


def _blocks(text: str, device: re.Pattern[str], port_head: re.Pattern[str], failure: re.Pattern[str],
            key_of: Callable[[str], Optional[str]]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Device blocks of `key: value` lines, each with its port sub-blocks, and the error lines.

    A line matching `device` opens a device, `port_head` a port of it; `key_of` names a key
    (None: skip the line)."""
    devices: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    dev: Optional[dict[str, Any]] = None
    port: Optional[dict[str, str]] = None
    for raw in text.splitlines():
        s = raw.strip()
        if not s:
            continue
        if m := device.match(s):
            dev = devices.setdefault(m.group(1), {"ports": {}})
            port = None
        elif failure.search(s):
            errors.append(s)
        elif dev is None:
            continue
        elif m := port_head.match(s):
            port = dev["ports"].setdefault(m.group(1), {})
        else:
            key, sep, value = s.partition(":")
            name = key_of(key.strip()) if sep else None
            if name is not None:
                (port if port is not None else dev)[name] = value.strip()
    return devices, errors


def sysfs_port(device: str, port: str, files: Mapping[str, str]) -> list[Metric]:
    """Metrics of one port from its sysfs files (state '4: ACTIVE', rate '400 Gb/sec (4X NDR)',
    link_layer 'InfiniBand'); a file that is missing or unreadable gives no metric."""
    info: dict[str, str] = {}
    if "state" in files:
        info["state"] = sysfs_value(files["state"])
    if m := _SYSFS_RATE.match(files.get("rate", "")):
        info["rate"] = m.group(1)
    if files.get("link_layer", "").strip():
        info["link_layer"] = files["link_layer"].strip()
    return port_metrics(device, port, info) if "state" in info else []


def sysfs_value(text: str) -> str:
    """'4: ACTIVE' -> 'ACTIVE', '5: LinkUp' -> 'LinkUp' (the kernel's 'code: name' files)."""
    code, sep, name = text.strip().partition(":")
    return name.strip() if sep and code.strip().isdecimal() else text.strip()


@dataclass(frozen=True)
class Hca:
    """One hca_id block of ibv_devinfo."""

    name: str
    fw_ver: str | None
    board_id: str | None
    vendor_part_id: str | None
    ports: tuple[tuple[int, str, str], ...]  # (port, state, link_layer)


def hcas(text: str) -> list[Hca]:
    """ibv_devinfo's hca_id blocks as records, in natural device order (mlx5_2 before mlx5_10)."""
    devices: dict[str, dict[str, Any]] = parse_ibv_devinfo(text).details.get("devices", {})
    out = [Hca(name, d.get("fw_ver"), d.get("board_id"), d.get("vendor_part_id"),
               tuple((int(p), i.get("state", "").split(" (")[0], i.get("link_layer", ""))
                     for p, i in d["ports"].items()))
           for name, d in devices.items()]
    return sorted(out, key=lambda h: [int(x) if x.isdecimal() else x for x in re.split(r"(\d+)", h.name)])


def parse_ofed_info(text: str) -> str | None:
    """`ofed_info -s` ('MLNX_OFED_LINUX-23.10-1.1.9.0:') -> '23.10-1.1.9.0'."""
    m = re.search(r"OFED(?:_LINUX|-internal)?-([0-9][\w.\-]*?):?\s*$", text.strip())
    return m.group(1) if m else None
