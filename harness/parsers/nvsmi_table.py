"""Parse the default `nvidia-smi` table (the boxed one operators paste) into per-GPU metrics. Pure.

The table is read by its `|` cells, never by column offsets, so every layout reads the same:
two rows per GPU before driver 450, three (with "MIG M.") since, and the wider boxes of 530+.
Per GPU (label `gpu`: the index printed in the table): temperature, power draw and limit,
memory used and total (the table's MiB are 2^20 bytes), utilisation, persistence mode and
the volatile uncorrected ECC count. A cell showing N/A (or "On"/"Off" in the ECC column, as it
does with ECC or MIG in that state) gives no metric, never a zero. Details: driver and CUDA
versions, each GPU's name, bus id, fan, performance state, compute and MIG mode, the MIG
devices and the processes. `nvidia-smi -l` captures hold many tables: the last complete one
is read.
"""

from __future__ import annotations

import re
from typing import Any

from harness.model import Metric
from harness.parsers.base import ParseResult, finite, invalid
from harness.units import BYTES, CELSIUS, COUNT, PERCENT, WATT

KIND = "nvidia-smi"
MIB = 2**20
_HEADER = re.compile(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s*(\S+)(?:\s+CUDA Version:\s*(\S+))?")
_BUS = re.compile(r"^([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*(\S*)$")
# index, name, persistence (or TCC/WDDM); numbers are bounded: int() refuses a 5,000-digit one
_GPU_CELL = re.compile(r"^(\d{1,6})\s+(.*?)\s+(\S+)$")
_MIG_ROW = re.compile(r"\d{1,6}(\s+\d{1,6}){3}")  # GPU GI CI MIG-device
_STATE = re.compile(r"^(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*/\s*(\S+)$")  # fan temp perf usage / cap
_MEM = re.compile(r"^(\S+?)\s*/\s*(\S+)$")
_STAMP = re.compile(r"^\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4}$")
_PROC_TYPES = {"C", "G", "C+G", "M", "M+C", "M+G", "M+C+G"}
_FAILURES = ("No devices were found", "couldn't communicate with the NVIDIA driver",
             "Unable to determine the device handle", "NVML: Driver/library version mismatch")


def _cells(line: str) -> list[str] | None:
    """The cells of a `| a | b |` row, stripped; None for any other line."""
    s = line.strip()
    if len(s) < 2 or not s.startswith("|") or not s.endswith("|"):
        return None
    return [c.strip() for c in s[1:-1].split("|")]


def _number(tok: str, suffix: str) -> float | None:
    """'28C' -> 28.0 for suffix 'C'; None for N/A, ERR! or anything else."""
    return finite(tok[: -len(suffix)]) if tok.endswith(suffix) else None


def _mib(tok: str) -> float | None:
    v = _number(tok, "MiB")
    return v * MIB if v is not None else None


def parse(text: str) -> ParseResult:
    """gpu.temp, gpu.power, gpu.power_limit, gpu.memory_used, gpu.memory, gpu.util,
    gpu.persistence_mode, gpu.ecc_uncorrected{scope=volatile}, labelled {gpu}."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    heads = [i for i, line in enumerate(lines) if _HEADER.search(line)]
    if not heads:
        failure = next((line.strip() for line in lines if any(f in line for f in _FAILURES)), None)
        if failure:
            return invalid(KIND, f"nvidia-smi reported no usable GPU: {failure[:200]}")
        return invalid(KIND, "not the default nvidia-smi table (no 'NVIDIA-SMI ... Driver Version' header)")
    tables = [(h, _table(lines, h, nxt)) for h, nxt in zip(heads, [*heads[1:], len(lines)], strict=True)]
    head, chosen = next((t for t in reversed(tables) if t[1].valid), tables[-1])
    details = {**chosen.details, "tables": len(tables)}
    stamp = lines[head - 2].strip() if head >= 2 else ""  # the date line above the box's top edge
    if _STAMP.match(stamp):
        details["timestamp"] = stamp
    return ParseResult(KIND, chosen.valid, chosen.problems, chosen.metrics, details)


def _table(lines: list[str], head: int, end: int) -> ParseResult:
    """One table: the header line at `head`, its boxes up to line `end`."""
    m = _HEADER.search(lines[head])
    assert m is not None  # the caller found it
    problems: list[str] = []
    gpus: list[dict[str, Any]] = []
    metrics: list[Metric] = []
    mig: list[dict[str, int]] = []
    procs: list[dict[str, Any]] = []
    section = "gpus"
    i = head + 1
    while i < end:
        line = lines[i]
        cells = _cells(line)
        if cells and len(cells) == 1 and cells[0].startswith(("Processes:", "MIG devices:")):
            section = "procs" if cells[0].startswith("Processes:") else "mig"
        elif cells and section == "gpus" and len(cells) == 3 and _BUS.match(cells[1]) \
                and _GPU_CELL.match(cells[0]):
            rows = [cells]
            while i + 1 < end and len(rows) < 3 and (nxt := _cells(lines[i + 1])) is not None \
                    and len(nxt) == 3 and not _BUS.match(nxt[1]):
                rows.append(nxt)
                i += 1
            gpu, ms, problem = _gpu(rows, i + 1)
            gpus.append(gpu)
            metrics += ms
            if problem:
                problems.append(problem)
        elif cells and section == "mig" and len(cells) == 4 and _MIG_ROW.fullmatch(cells[0]):
            g, gi, ci, dev = (int(x) for x in cells[0].split())
            mig.append({"gpu": g, "gi": gi, "ci": ci, "mig_dev": dev})
        elif cells and section == "procs" and len(cells) == 1:
            proc = _process(cells[0])
            if proc:
                procs.append(proc)
        i += 1
    if not gpus:
        problems.append("no GPU rows in the nvidia-smi table")
    seen = [g["gpu"] for g in gpus]
    if len(set(seen)) != len(seen):
        problems.append(f"GPU indices repeat in one table: {seen}")
    details = {"nvidia_smi_version": m.group(1), "driver_version": m.group(2),
               "cuda_version": m.group(3), "gpus": gpus, "mig_devices": mig, "processes": procs}
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)


def _gpu(rows: list[list[str]], lineno: int) -> tuple[dict[str, Any], list[Metric], str | None]:
    """One GPU's box (2 or 3 rows of 3 cells): its details, its metrics, and a problem if cut short."""
    head, bus = _GPU_CELL.match(rows[0][0]), _BUS.match(rows[0][1])
    assert head is not None and bus is not None  # the caller matched both
    idx = int(head.group(1))
    pm = head.group(3)
    info: dict[str, Any] = {"gpu": idx, "name": head.group(2), "bus_id": bus.group(1),
                            "display_active": bus.group(2) or None, "ecc_cell": rows[0][2]}
    if pm not in ("On", "Off"):
        info["driver_model"] = pm  # Windows prints TCC/WDDM where Linux prints persistence mode
    lab = {"gpu": idx}
    out: list[Metric] = []

    def add(name: str, value: float | None, unit: str, **extra: str) -> None:
        if value is not None:
            out.append(Metric(name, value, unit, {**lab, **extra}))

    add("gpu.persistence_mode", {"On": 1.0, "Off": 0.0}.get(pm), COUNT)
    add("gpu.ecc_uncorrected", finite(rows[0][2]) if rows[0][2].isdecimal() else None, COUNT,
        scope="volatile")
    state = _STATE.match(rows[1][0]) if len(rows) > 1 else None
    mem = _MEM.match(rows[1][1]) if len(rows) > 1 else None
    if state is None or mem is None:
        return info, out, f"GPU {idx} (near line {lineno}): its state row is missing or unreadable"
    fan, temp, perf, usage, cap = state.groups()
    info.update(fan=fan, perf=perf)
    add("gpu.temp", _number(temp, "C"), CELSIUS)
    add("gpu.power", _number(usage, "W"), WATT)
    add("gpu.power_limit", _number(cap, "W"), WATT)
    add("gpu.memory_used", _mib(mem.group(1)), BYTES)
    add("gpu.memory", _mib(mem.group(2)), BYTES)
    util_mode = rows[1][2].split()
    if util_mode:
        add("gpu.util", _number(util_mode[0], "%"), PERCENT)
        info["compute_mode"] = " ".join(util_mode[1:]) or None
    if len(rows) > 2 and rows[2][2]:
        info["mig_mode"] = rows[2][2]
    errs = [k for k, v in (("fan", fan), ("temp", temp), ("perf", perf), ("power", usage)) if "ERR" in v]
    if errs:
        info["err"] = errs  # nvidia-smi prints ERR! for a field the GPU failed to report
    return info, out, None


def _count(tok: str) -> bool:
    """A token int() reads as a GPU, GI, CI or process id: decimal digits, at most 10 of them."""
    return tok.isdecimal() and len(tok) <= 10


def _process(cell: str) -> dict[str, Any] | None:
    """A Processes row: 'GPU [GI CI] PID Type name... memory' (GI/CI since driver 450)."""
    toks = cell.split()
    if len(toks) < 5 or not _count(toks[0]):
        return None
    t = next((k for k in range(2, len(toks) - 1) if toks[k] in _PROC_TYPES and _count(toks[k - 1])), None)
    if t is None:
        return None
    gi, ci = (int(x) if _count(x) else None for x in (toks[1:t - 1] if t == 4 else ("", "")))
    return {"gpu": int(toks[0]), "gi": gi, "ci": ci, "pid": int(toks[t - 1]), "type": toks[t],
            "name": " ".join(toks[t + 1:-1]), "memory_bytes": _mib(toks[-1])}
