"""Parse the builtin burn's JSON-lines output (harness/engines/burn.py). Pure.

Valid when the start and done lines are there, every device listed at the start has a result,
and no device reported an error. A device that verified no product did no checked work and is
not OK. A device fails (ok 0) when a verified product differed from its first, when its memory
pattern came back changed, when its first product's corner is off the float64 reference, or when
its first product differs from the one most GPUs of the same model computed from the same inputs
(details.faults says which). A device that hung, or failed while others finished, is named in
details.dead (its GPU failed the burn). Metrics per device: gpu_burn.{ok,tflops,errors,iterations,
mem_errors}, labels `gpu` and `dtype`; tflops counts the timed products only.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.model import Metric
from harness.parsers.base import ParseResult, invalid, json_document, number
from harness.units import COUNT, TFLOPS

KIND = "builtin-burn"


def _events(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json_document(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("event"), str):
                out.append(obj)
    return out


def reported(text: str) -> set[int]:
    """The devices that printed a result or an error."""
    return {e["gpu"] for e in _events(text)
            if e["event"] in ("result", "error") and isinstance(e.get("gpu"), int)}


def cross_check(results: dict[int, dict[str, Any]]) -> dict[int, str]:
    """GPU -> why its first product disagrees with the other GPUs of its model (same inputs)."""
    out: dict[int, str] = {}
    models: dict[str, list[int]] = {}
    for d, r in results.items():
        if r.get("digest"):
            models.setdefault(str(r.get("name", "")), []).append(d)
    for name, gpus in models.items():
        if len(gpus) < 2:
            continue
        votes = Counter(str(results[d]["digest"]) for d in gpus)
        (top, n), *rest = votes.most_common()
        tie = bool(rest) and rest[0][1] == n
        for d in gpus:
            if tie or str(results[d]["digest"]) != top:
                whom = "the others'" if tie else f"that of {n} of the {len(gpus)}"
                out[d] = (f"its product of the common inputs differs from {whom} {name or 'GPUs'}"
                          + ("" if tie else " (cuBLAS is bitwise reproducible on one model)"))
    return out


def _dead(dead: dict[int, str], results: dict[int, Any]) -> dict[str, str]:
    """GPU -> why it did not finish the burn, where that is the GPU's fault: it hung (no result by
    its deadline), or it failed while other GPUs finished. When no GPU finished and none hung, the
    engine or the environment failed (a missing library, no memory): nothing is named."""
    hung = {d: why for d, why in dead.items() if why.startswith("hung")}
    return {str(d): why for d, why in sorted((dead if results else hung).items())}


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
    faults = cross_check({d: r for d, r in results.items() if d in devices})
    failed = {e["gpu"]: str(e.get("message")) for e in events
              if e["event"] == "error" and isinstance(e.get("gpu"), int)}
    dead = {d: failed.get(d, "no result") for d in devices if d not in results}
    metrics: list[Metric] = []
    for d in devices:
        r = results.get(d)
        if r is None:
            if d not in failed:
                problems.append(f"GPU {d}: no result")
            metrics.append(Metric("gpu_burn.ok", 0.0, COUNT, {"gpu": d, "dtype": dtype}))
            continue
        lab: dict[str, str | int] = {"gpu": d, "dtype": dtype}
        counts = [r.get(k, 0) for k in ("iterations", "errors", "mem_errors")]
        tflops = number(r.get("tflops", 0.0))
        if tflops is None or not all(type(c) is int and number(c) is not None for c in counts):
            problems.append(f"GPU {d}: its result holds a count or rate that is not a finite number")
            metrics.append(Metric("gpu_burn.ok", 0.0, COUNT, lab))
            continue
        iterations, errors, mem_errors = counts
        verified = int(number(r.get("verified", max(0, iterations - 1))) or 0)
        if verified < 1:
            problems.append(f"GPU {d}: {iterations} multiply(ies), none verified: nothing was compared")
        if mem_errors:
            faults[d] = f"{mem_errors:,} words of its memory pattern came back changed"
        if r.get("tile_ok") is False:
            faults[d] = (f"its product is off the float64 reference (relative error "
                         f"{float(r.get('tile_error', 0)):.3g})")
        ok = verified >= 1 and errors == 0 and d not in faults
        metrics += [Metric("gpu_burn.ok", 1.0 if ok else 0.0, COUNT, lab),
                    Metric("gpu_burn.iterations", float(iterations), COUNT, lab),
                    Metric("gpu_burn.errors", float(errors), COUNT, lab),
                    Metric("gpu_burn.mem_errors", float(mem_errors), COUNT, lab),
                    Metric("gpu_burn.tflops", tflops, TFLOPS, lab)]
    details = {"backend": start.get("backend"), "dtype": dtype, "size": start.get("size"), "devices": devices,
               "pci_bus_ids": [results.get(d, {}).get("pci_bus_id") for d in devices],
               "faults": {str(d): why for d, why in sorted(faults.items())},
               "dead": _dead(dead, results),
               "tflops_wall": {str(d): r.get("tflops_wall") for d, r in sorted(results.items())},
               "verified": {str(d): r.get("verified") for d, r in sorted(results.items())},
               "mem_bytes": {str(d): r.get("mem_bytes") for d, r in sorted(results.items())}}
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)
