"""Parse the builtin copy test's JSON-lines output (harness/engines/copy.py). Pure.

Valid when the start and done lines are there, every planned copy has a result and none
reported an error. Metrics as for nvbandwidth (the tests carry nvbandwidth's names):
gpu.h2d_bw / gpu.d2h_bw {test, gpu} and gpu.p2p_bw {test, src, dst}, GB/s.
"""

from __future__ import annotations

from typing import Any

from harness.model import Metric
from harness.parsers.base import ParseResult, invalid, json_objects, number
from harness.parsers.nvbandwidth import cell_metric

KIND = "builtin-copy"


def _where(e: dict[str, Any]) -> str:
    if e.get("src") is None:
        return ""
    return f"{e.get('test')} {e.get('src')}->{e.get('dst')}: "


def parse(text: str) -> ParseResult:
    """gpu.*_bw metrics from `python -m harness.engines.copy` output."""
    events = [e for e in json_objects(text) if isinstance(e.get("event"), str)]
    start = next((e for e in events if e["event"] == "start"), None)
    problems = [_where(e) + str(e.get("message")) for e in events if e["event"] == "error"]
    if start is None:
        return invalid(KIND, *(problems or ["not builtin copy test output (no start line)"]))
    planned = [(str(p[0]), str(p[1]), str(p[2])) for p in start.get("plan", [])
               if isinstance(p, list) and len(p) == 3]
    results: dict[tuple[str, str, str], dict[str, Any]] = {}
    for e in events:
        if e["event"] == "result":
            results[(str(e.get("test")), str(e.get("src")), str(e.get("dst")))] = e
    metrics: list[Metric] = []
    for key in planned:
        r = results.get(key)
        value = number(r.get("gbps")) if r is not None else None
        if value is None:
            if r is not None or not any(p.startswith(f"{key[0]} {key[1]}->{key[2]}: ") for p in problems):
                problems.append(f"{key[0]} {key[1]}->{key[2]}: no result")
            continue
        try:
            metrics.append(cell_metric(key[0], None, key[1], key[2], value))
        except ValueError:
            problems.append(f"{key[0]}: unknown endpoints {key[1]}->{key[2]}")
    if not any(e["event"] == "done" for e in events):
        problems.append("no done line: the copy test did not finish")
    details = {k: start.get(k) for k in ("backend", "size", "iterations", "trials", "devices", "pci_bus_ids")}
    details["cpus"] = {f"{k[1]}->{k[2]}": r.get("cpus") for k, r in results.items() if r.get("cpus")}
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)
