"""Parse iperf3's JSON output (`-J`, and the `--json-stream` event lines of iperf 3.17+).

Pure: text in, ParseResult out, never an exception. Text around the JSON (a terminal escape
before it, an "iperf3: error - ..." line after it) is tolerated and read. iperf3 reports
bits per second; metrics are GB/s (10^9 bytes per second):

  TCP: net.tcp_bw {side: sender|receiver, direction}   from end.sum_sent / end.sum_received
       net.tcp_retransmits {direction}                  sender retransmits (Linux senders only)
  UDP: net.udp_bw, net.udp_loss (%), net.udp_jitter (us) {direction}   from end.sum

`direction` is `forward` (client sends) or `reverse` (-R: the server sends). An "error" in the
JSON, an error event, an "iperf3: error" line, a missing end summary or a receiver that
counted no bytes make the run invalid.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from harness.model import Metric
from harness.parsers.base import ParseResult, invalid, json_objects, number
from harness.units import COUNT, GBPS, PERCENT, US

KIND = "iperf3"
NOT_IPERF3 = "not iperf3 JSON output (run iperf3 with -J)"
_ERROR_LINE = re.compile(r"^iperf3:\s*(error\b.*)$", re.MULTILINE)
_ERROR_KEY = re.compile(r'"error"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _from_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The -J document rebuilt from --json-stream events."""
    doc: dict[str, Any] = {}
    for e in events:
        kind, data = e.get("event"), e.get("data")
        if kind in ("start", "end") and isinstance(data, dict):
            doc[kind] = data
        elif kind == "error":
            doc["error"] = str(data)
    return doc


def find_document(text: str) -> Optional[dict[str, Any]]:
    """The iperf3 report in `text` (or one rebuilt from its event stream), else None."""
    objects = list(json_objects(text))
    doc = next((o for o in objects if "start" in o or "end" in o or "intervals" in o), None)
    if doc is not None:
        return doc
    events = [o for o in objects if isinstance(o.get("event"), str)]
    return _from_stream(events) if events else None


def parse(text: str) -> ParseResult:
    """net.tcp_* or net.udp_* metrics from one iperf3 client run."""
    doc = find_document(text)
    errors = [m.group(1).strip() for m in _ERROR_LINE.finditer(text)]
    if doc is None:
        # a fragment may still carry the error it died with
        errors += [m.group(1) for m in _ERROR_KEY.finditer(text)]
        return invalid(KIND, *([f"iperf3: {e}" for e in errors] or [NOT_IPERF3]))
    if isinstance(doc.get("error"), str):
        errors.insert(0, doc["error"])
    start, end = _sum(doc, "start"), _sum(doc, "end")
    test = _sum(start, "test_start")
    protocol = str(test.get("protocol") or ("UDP" if "sum" in end and "sum_sent" not in end else "TCP"))
    direction = "reverse" if test.get("reverse") else "forward"
    problems = [f"iperf3: {e}" for e in dict.fromkeys(errors)]
    metrics = _udp(end, direction, problems) if protocol == "UDP" else _tcp(end, direction, problems)
    if not metrics and not problems:
        problems.append("no end summary: the test did not finish")
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), _details(doc, start, test, end))


def _sum(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """obj[key] when it is an object, else {}."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _tcp(end: dict[str, Any], direction: str, problems: list[str]) -> list[Metric]:
    out: list[Metric] = []
    for side, key in (("sender", "sum_sent"), ("receiver", "sum_received")):
        s = _sum(end, key)
        bps = number(s.get("bits_per_second"))
        if bps is None:
            continue
        out.append(Metric("net.tcp_bw", bps / 8e9, GBPS, {"side": side, "direction": direction}))
        if side == "receiver" and number(s.get("bytes")) == 0:
            problems.append("the receiver counted 0 bytes: nothing was measured (test too short?)")
        retrans = number(s.get("retransmits"))
        if side == "sender" and retrans is not None:
            out.append(Metric("net.tcp_retransmits", retrans, COUNT, {"direction": direction}))
    if out and not _sum(end, "sum_received"):
        problems.append("no receiver summary: the test did not finish")
    return out


def _udp(end: dict[str, Any], direction: str, problems: list[str]) -> list[Metric]:
    s = _sum(end, "sum") or _sum(end, "sum_received")
    labels = {"direction": direction}
    out: list[Metric] = []
    bps, lost, jitter = (number(s.get(k)) for k in ("bits_per_second", "lost_percent", "jitter_ms"))
    if bps is not None:
        out.append(Metric("net.udp_bw", bps / 8e9, GBPS, labels))
    if lost is not None:
        out.append(Metric("net.udp_loss", lost, PERCENT, labels))
    if jitter is not None:
        out.append(Metric("net.udp_jitter", jitter * 1000.0, US, labels))
    if out and number(s.get("packets")) == 0:
        problems.append("no UDP packet arrived")
    return out


def _details(doc: dict[str, Any], start: dict[str, Any], test: dict[str, Any],
             end: dict[str, Any]) -> dict[str, Any]:
    connected = start.get("connected")
    first = _sum({"c": connected[0]}, "c") if isinstance(connected, list) and connected else {}
    cpu = _sum(end, "cpu_utilization_percent")
    out = {"version": start.get("version"), "protocol": test.get("protocol"),
           "streams": test.get("num_streams"), "duration": test.get("duration"), "omit": test.get("omit"),
           "bytes": test.get("bytes") or None, "reverse": bool(test.get("reverse")),
           "remote": first.get("remote_host"), "port": first.get("remote_port"),
           "cpu_host_pct": number(cpu.get("host_total")), "cpu_remote_pct": number(cpu.get("remote_total")),
           "congestion": end.get("sender_tcp_congestion"), "intervals": len(doc.get("intervals") or [])}
    return {k: v for k, v in out.items() if v is not None}
