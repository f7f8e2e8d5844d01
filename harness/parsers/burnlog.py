"""Parse the builtin burn's JSON-lines output (harness/engines/burn.py). Pure.

Valid when the start and done lines are there, every device listed at the start has a result,
and no device reported an error. A device that completed no comparison (fewer than two
multiplies) did no checked work and is not OK. Metrics per device: gpu_burn.{ok,tflops,errors,
iterations}, labels `gpu` and `dtype`.
"""

from __future__ import annotations

import json
from typing import Any

from harness.model import Metric
from harness.parsers.base import ParseResult, invalid
from harness.units import COUNT, TFLOPS

KIND = "builtin-burn"


def _events(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("event"), str):
                out.append(obj)
    return out


def parse(text: str) -> ParseResult:
    """gpu_burn.* metrics labelled {gpu, dtype} from `python -m harness.engines.burn` output."""
    events = _events(text)
    start = next((e for e in events if e["event"] == "start"), None)
    problems = [(f"GPU {e['gpu']}: " if e.get("gpu") is not None else "") + str(e.get("message"))
                for e in events if e["event"] == "error"]
    if start is None:
        return invalid(KIND, *(problems or ["not builtin burn output (no start line)"]))
    dtype = str(start.get("dtype", "?"))
    devices = [d for d in start.get("devices", []) if isinstance(d, int)]
    results = {e["gpu"]: e for e in events if e["event"] == "result" and isinstance(e.get("gpu"), int)}
    if not any(e["event"] == "done" for e in events):
        problems.append("no done line: the burn did not finish")
    metrics: list[Metric] = []
    for d in devices:
        r = results.get(d)
        if r is None:
            problems.append(f"GPU {d}: no result")
            metrics.append(Metric("gpu_burn.ok", 0.0, COUNT, {"gpu": d, "dtype": dtype}))
            continue
        lab: dict[str, str | int] = {"gpu": d, "dtype": dtype}
        iterations, errors = int(r.get("iterations", 0)), int(r.get("errors", 0))
        if iterations < 2:
            problems.append(f"GPU {d}: {iterations} multiply(ies): nothing was compared")
        metrics += [Metric("gpu_burn.ok", 1.0 if iterations >= 2 and errors == 0 else 0.0, COUNT, lab),
                    Metric("gpu_burn.iterations", float(iterations), COUNT, lab),
                    Metric("gpu_burn.errors", float(errors), COUNT, lab),
                    Metric("gpu_burn.tflops", float(r.get("tflops", 0.0)), TFLOPS, lab)]
    details = {"backend": start.get("backend"), "dtype": dtype, "size": start.get("size"), "devices": devices}
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)
