"""InfiniBand port error counters: perfquery output and sysfs counter values, pure.

Error counters use the kernel's sysfs names (symbol_error, link_downed, port_rcv_errors,
port_xmit_discards, link_error_recovery, ...); perfquery's names are mapped onto them.
`ib.port_errors` {port[, lid | device], counter} is a counter's value; the rdma check reports
`ib.error_delta` (after minus before its run). PortXmitWait is congestion, not an error, but
as worth watching: it is included. Data and packet counters go to details. A legacy counter
stuck at its maximum (15, 255, 65535 or 2^32-1 by counter) has saturated: its true count is
unknown, and it is listed under `saturated` in details (widths per the IBA PortCounters).
`hw_errors` picks the error counters among a port's driver hw_counters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.model import LabelValue, Metric
from harness.parsers.base import ParseResult, invalid
from harness.units import COUNT

ERROR_COUNTERS = {
    "SymbolErrorCounter": "symbol_error", "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed", "PortRcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors", "PortXmitDiscards": "port_xmit_discards",
    "PortXmitConstraintErrors": "port_xmit_constraint_errors",
    "PortRcvConstraintErrors": "port_rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors", "VL15Dropped": "VL15_dropped",
    "PortXmitWait": "port_xmit_wait",
}
# The legacy PortCounters widths (IBA spec): a counter at its maximum has stopped counting.
WIDTH_MAX = {
    "symbol_error": 0xFFFF, "link_error_recovery": 0xFF, "link_downed": 0xFF, "port_rcv_errors": 0xFFFF,
    "port_rcv_remote_physical_errors": 0xFFFF, "port_rcv_switch_relay_errors": 0xFFFF,
    "port_xmit_discards": 0xFFFF, "port_xmit_constraint_errors": 0xFF, "port_rcv_constraint_errors": 0xFF,
    "local_link_integrity_errors": 0xF, "excessive_buffer_overrun_errors": 0xF, "VL15_dropped": 0xFFFF,
    "port_xmit_wait": 0xFFFFFFFF,
}
_HEAD = re.compile(r"^#\s*Port (?:extended )?counters:\s*Lid\s+(\d+)\s+port\s+(\d+)")
_OTHER_HEAD = re.compile(r"^#\s*Port\w* counters:|^#\s*\w+ counters:")
_LINE = re.compile(r"^(\w+):\.*(\S+)\s*$")


# Driver counters of /sys/class/infiniband/*/ports/*/hw_counters that count errors (mlx5:
# local_ack_timeout_err, packet_seq_err, out_of_buffer, out_of_sequence, rx_icrc_encapsulated, ...).
HW_ERROR = re.compile(r"err|out_of_buffer|out_of_sequence|timeout|icrc")


def hw_errors(counters: Mapping[str, int]) -> dict[str, int]:
    """The error counters among a port's hw_counters."""
    return {k: v for k, v in counters.items() if HW_ERROR.search(k)}


def error_metrics(counters: Mapping[str, int], labels: Mapping[str, LabelValue],
                  name: str = "ib.port_errors") -> list[Metric]:
    """One metric per known error counter present in `counters` (sysfs names)."""
    known = set(ERROR_COUNTERS.values())
    return [Metric(name, float(v), COUNT, {**labels, "counter": k})
            for k, v in sorted(counters.items()) if k in known]


def saturated(counters: Mapping[str, int]) -> list[str]:
    """Error counters stuck at their legacy width's maximum (e.g. link_downed at 255)."""
    return sorted(k for k, v in counters.items() if k in WIDTH_MAX and v == WIDTH_MAX[k])


def deltas(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """after - before for counters in both; a counter that went down (reset) counts from zero."""
    return {k: (after[k] - before[k] if after[k] >= before[k] else after[k])
            for k in after if k in before}


def parse_perfquery(text: str) -> ParseResult:
    """`perfquery -x` (one or more port blocks): ib.port_errors per {lid, port, counter}."""
    blocks: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    for raw in text.splitlines():
        s = raw.strip()
        if m := _HEAD.match(s):
            cur = {"lid": int(m.group(1)), "port": int(m.group(2)), "counters": {}, "other": {}}
            blocks.append(cur)
        elif _OTHER_HEAD.match(s):
            cur = None  # e.g. PortRcvErrorDetails: not the port counters
        elif cur is not None and (m := _LINE.match(s)):
            key, value = m.group(1), m.group(2)
            if key in ERROR_COUNTERS and value.isdecimal():
                cur["counters"][ERROR_COUNTERS[key]] = int(value)
            elif value.isdecimal():
                cur["other"][key] = int(value)
    if not blocks:
        return invalid("perfquery", "not perfquery port counters (no '# Port counters: Lid N port N' block)")
    metrics: list[Metric] = []
    problems: list[str] = []
    for b in blocks:
        if not b["counters"]:
            problems.append(f"lid {b['lid']} port {b['port']}: no error counters (output truncated)")
        metrics += error_metrics(b["counters"], {"lid": b["lid"], "port": b["port"]})
        b["saturated"] = saturated(b["counters"])
    return ParseResult("perfquery", not problems, tuple(problems), tuple(metrics), {"ports": blocks})
