"""Parse InfiniBand port state from `ibstat` and `ibv_devinfo` output.

Pure: text in, ParseResult out, never an exception. Metrics per device and port, labelled
{device, port, link_layer}: `ib.port_active` (1 when the logical state is Active, else 0),
and from ibstat `ib.rate` in GB/s (ibstat prints the link's data rate in Gb/s, e.g. 400 for
NDR 4x; 400 Gb/s = 50 GB/s) and from ibv_devinfo `ib.active_mtu` in bytes. A port that is
down is a measurement (the check judges it), not an invalid run; a tool error such as
ibpanic or "Failed to get IB devices list" is.
"""

from __future__ import annotations

import math
import re
from typing import Any, Optional

from harness.model import Metric
from harness.parsers.base import ParseResult, invalid
from harness.units import BYTES, COUNT, GBPS, to_gbps

_CA = re.compile(r"^CA\s+'([^']+)'\s*$")
_IBSTAT_PORT = re.compile(r"^Port\s+(\d+):\s*$")
_HCA = re.compile(r"^hca_id:\s*(\S+)")
_DEVINFO_PORT = re.compile(r"^port:\s*(\d+)\s*$")
_IBSTAT_ERRORS = re.compile(r"^ibpanic:|^ibwarn:|Failed|No such file|not found|No IB devices",
                            re.IGNORECASE)
_DEVINFO_ERRORS = re.compile(r"Failed|No IB devices|not found|No such|error", re.IGNORECASE)


def _port_metrics(device: str, port: str, info: dict[str, str]) -> list[Metric]:
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
    mtu = info.get("active_mtu", "").split(" ")[0]
    if mtu.isdigit():
        out.append(Metric("ib.active_mtu", float(mtu), BYTES, labels))
    return out


def _finish(kind: str, devices: dict[str, dict[str, Any]], errors: list[str],
            empty: str) -> ParseResult:
    metrics: list[Metric] = []
    for name, dev in devices.items():
        for port, info in dev["ports"].items():
            metrics += _port_metrics(name, port, info)
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
    devices: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    dev: Optional[dict[str, Any]] = None
    port: Optional[dict[str, str]] = None
    for raw in text.splitlines():
        s = raw.strip()
        if not s:
            continue
        if m := _CA.match(s):
            dev = devices.setdefault(m.group(1), {"ports": {}})
            port = None
        elif _IBSTAT_ERRORS.search(s):
            errors.append(s)
        elif dev is None:
            continue
        elif m := _IBSTAT_PORT.match(s):
            port = dev["ports"].setdefault(m.group(1), {})
        else:
            key, sep, value = s.partition(":")
            if not sep:
                continue
            key = key.strip().lower().replace(" ", "_")
            (port if port is not None else dev)[key] = value.strip()
    return _finish("ibstat", devices, errors, "not ibstat output (no CA found)")


def parse_ibv_devinfo(text: str) -> ParseResult:
    """`ibv_devinfo`: per port ib.port_active and ib.active_mtu; fw_ver, board_id in details."""
    devices: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    dev: Optional[dict[str, Any]] = None
    port: Optional[dict[str, str]] = None
    for raw in text.splitlines():
        s = raw.strip()
        if not s:
            continue
        if m := _HCA.match(s):
            dev = devices.setdefault(m.group(1), {"ports": {}})
            port = None
        elif _DEVINFO_ERRORS.search(s):
            errors.append(s)
        elif dev is None:
            continue
        elif m := _DEVINFO_PORT.match(s):
            port = dev["ports"].setdefault(m.group(1), {})
        else:
            key, sep, value = s.partition(":")
            if not sep or key.strip() == "Device ports":
                continue
            (port if port is not None else dev)[key.strip()] = value.strip()
    return _finish("ibv-devinfo", devices, errors, "not ibv_devinfo output (no hca_id found)")
