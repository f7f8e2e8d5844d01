"""Parse `ethtool -S IFACE` (NIC statistics) into its counters and the error counters among them.

Pure: text in, ParseResult out, never an exception. Every `name: value` line is a counter (with
or without the `NIC statistics:` header and the indentation; a name may itself hold a colon, as
bnxt's `[0]: rx_ucast_packets`). All counters go to details["counters"]; the port-level error
counters (names with err, discard, drop, crc, symbol, out_of_buffer, link_down, timeout, ...)
become `net.port_errors` {counter[, iface]}. Per-queue and per-priority counters (rx0_*,
tx_queue_3_*, rx_prio0_*) stay in details only: the port-level totals already count them.
XDP drops are a program's verdict, not an error, and are left out. Output without a single
counter (`no stats available`, `Cannot get stats strings information`) is invalid.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from harness.model import LabelValue, Metric
from harness.parsers.base import ParseResult, invalid
from harness.units import COUNT

KIND = "ethtool-stats"
_LINE = re.compile(r"^\s*(\S.*?):\s+(\d+)\s*$")
_HEADER = re.compile(r"^\s*(NIC statistics|\w[\w -]* stats for \S+):\s*$")
ERROR_NAME = re.compile(r"err|discard|drop|crc|symbol|out_of_buffer|link_down|timeout|signal_integrity"
                        r"|jabber|fragments|undersize|oversize|too_long|module_(?:bus_stuck|high_temp|bad_shorted)",
                        re.IGNORECASE)
NOT_ERROR = re.compile(r"xdp_drop", re.IGNORECASE)
PER_QUEUE = re.compile(r"^(?:rx|tx|ch|xdp|xsk|ptp)\d+_|queue_\d+|^\[\d+\]|_prio\d+_|^(?:rx|tx)_\d+_",
                       re.IGNORECASE)


def is_error_counter(name: str) -> bool:
    """A port-level error counter (rx_crc_errors_phy, rx_discards_phy, link_down_events_phy, ...)."""
    return bool(ERROR_NAME.search(name)) and not NOT_ERROR.search(name) and not PER_QUEUE.search(name)


def error_metrics(counters: Mapping[str, int], labels: Mapping[str, LabelValue],
                  name: str = "net.port_errors") -> list[Metric]:
    """One metric per error counter in `counters`, labelled counter (plus `labels`)."""
    return [Metric(name, float(v), COUNT, {**labels, "counter": k})
            for k, v in sorted(counters.items()) if is_error_counter(k)]


def counters_of(text: str) -> tuple[dict[str, int], list[str]]:
    """(every counter, the lines that are neither a counter nor the header nor blank)."""
    counters: dict[str, int] = {}
    other: list[str] = []
    for raw in text.splitlines():
        if (m := _LINE.match(raw)) and len(m.group(2)) <= 20 and int(m.group(2)) < 1 << 64:
            counters[m.group(1).strip()] = int(m.group(2))  # a kernel counter is 64 bits
        elif raw.strip() and not _HEADER.match(raw):
            other.append(raw.strip())
    return counters, other


def parse(text: str, iface: str = "") -> ParseResult:
    """`ethtool -S IFACE`: net.port_errors per error counter; every counter in details."""
    counters, other = counters_of(text)
    if not counters:
        why = other[0][:300] if other else "empty output"
        return invalid(KIND, f"no NIC counters in the output: {why}")
    labels: dict[str, LabelValue] = {"iface": iface} if iface else {}
    errors = error_metrics(counters, labels)
    details = {"counters": counters, "error_counters": [str(m.labels["counter"]) for m in errors],
               "other_lines": other[:20]}
    return ParseResult(KIND, True, (), tuple(errors), details)
