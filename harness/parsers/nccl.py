"""Parse nccl-tests output (all_reduce_perf, all_gather_perf, alltoall_perf, ...) into metrics.

Pure: text in, ParseResult out, never an exception. Handles the old header (no version line)
and the new one (2.17+: "# nccl-tests version", "# Collective test starting/concluded"),
several tests back to back, launcher and remote-shell noise before a header, bare
"NCCL version" lines, hostnames and PCI ids of any shape, N/A in #wrong, a run that fails
mid-way, and a table without the summary lines.

nccl-tests computes algbw as bytes / 1e9 / seconds, so its GB/s already are 10^9 B/s; its
time column is in microseconds. The op comes from "Collective test starting: X_perf", else
from the `op` argument (the check knows the binary it ran), else from an `X_perf` word
printed before the header (an echoed command line), else it is "unknown".

Output that went through a launcher carries its tag on every line: `srun --label` (" 0: "), mpirun
`--tag-output` ("[1,0]<stdout>:", with a job-runner's "(head, rank=0, pid=1) " before it) or pdsh
("host: "). The tag in front of the first "# nThread" header says which; that shape is taken off every
line that has it (details `launcher`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from harness.model import Metric
from harness.parsers.base import ParseResult, invalid
from harness.units import COUNT, GBPS, US

KIND = "nccl"
PLACEMENTS = ("out-of-place", "in-place")
NOT_NCCL = "not nccl-tests output (no '# nThread ... nGpus ...' header found)"

_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\w+?)(?:_perf(?:_mpi)?)?\s*$")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded")
_N = r"(\d{1,20})(?!\d)"  # a count or size; more digits than that is not a header (nor an int() input)
_HEADER = re.compile(rf"^#\s*nThread\s+{_N}\s+nGpus\s+{_N}\s+minBytes\s+{_N}\s+maxBytes\s+{_N}"
                     rf"(?:\s+step:\s*{_N}\((factor|bytes)\))?")
_HEADER_INT = re.compile(r"\b(warmup iters|iters|agg iters|validation|graph):\s*(-?\d{1,20})(?!\d)")
_RANK = re.compile(rf"^#\s*Rank\s+{_N}\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+{_N}"
                   r"\s+\[([^\]]*)\]\s*(.*?)\s*$")
_LIBRARY = re.compile(r"^#?\s*NCCL version\s+(\S+)")
_OOB = re.compile(rf"^#\s*Out of bounds values\s*:\s*{_N}\s+(\w+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_FAILURE = re.compile(r"Test (?:NCCL |CUDA )?failure")
_PERF_WORD = re.compile(r"\b([a-z][a-z_]*?)_perf\b")
_NUM = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_LAUNCHERS = (  # (name, the tag at the start of a line)
    ("mpirun --tag-output", re.compile(r"^(?:\([^)]*\)\s+)?\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:")),
    ("srun --label", re.compile(r"^\s*\d+:(?: |$)")),
    ("pdsh", re.compile(r"^[A-Za-z0-9][\w.-]*:(?: |$)")),
)
_HEADER_AT = re.compile(r"#\s*nThread\s+\d+\s+nGpus")


@dataclass
class _Row:
    size: int
    dtype: Optional[str]
    redop: Optional[str]
    values: tuple[tuple[float, float, float, Optional[float]], ...]  # per placement


@dataclass
class _Block:
    """One test: its header, rank lines, result rows and summary."""

    op: Optional[str]
    version: Optional[str]
    ngpus: int
    min_bytes: int
    max_bytes: int
    step: int
    step_kind: str
    settings: dict[str, int]
    ranks: list[dict[str, object]] = field(default_factory=list)
    rows: list[_Row] = field(default_factory=list)
    wrong_is_count: bool = True
    oob: Optional[tuple[int, str]] = None
    avg_busbw: Optional[float] = None
    concluded: bool = False


def _num(tok: str) -> Optional[float]:
    """A finite float from a table cell, None for N/A or anything else."""
    if not _NUM.match(tok):
        return None
    v = float(tok)
    return v if math.isfinite(v) else None


def _row(line: str) -> Optional[_Row]:
    """A result row: size count [type] [redop] [root] then 4 cells per placement."""
    toks = line.split()
    if len(toks) < 10 or not toks[0].isdecimal() or not toks[1].isdecimal() or len(toks[0]) > 20:
        return None
    tail = toks[-8:]
    cells: list[tuple[float, float, float, Optional[float]]] = []
    for i in (0, 4):
        time, algbw, busbw = (_num(t) for t in tail[i:i + 3])
        if time is None or algbw is None or busbw is None:
            return None
        wrong = None if tail[i + 3] == "N/A" else _num(tail[i + 3])
        if wrong is None and tail[i + 3] != "N/A":
            return None
        cells.append((time, algbw, busbw, wrong))
    middle = toks[2:-8]
    words = [t for t in middle if not re.match(r"^-?\d+$", t)]
    dtype = words[0] if words else None
    redop = words[1] if len(words) > 1 else None
    return _Row(int(toks[0]), dtype, redop, tuple(cells))


def _problem_line(line: str) -> str:
    return line.strip().lstrip(".").strip()[:300]


def parse(text: str, op: Optional[str] = None) -> ParseResult:
    """Metrics nccl.time/algbw/busbw/wrong per {op, size, placement}, nccl.avg_busbw and nccl.ranks."""
    blocks: list[_Block] = []
    failures: list[str] = []
    version: Optional[str] = None
    starting: Optional[str] = None
    perf_word: Optional[str] = None
    library: Optional[str] = None
    cur: Optional[_Block] = None
    launcher, lines = _untagged(text.splitlines())
    for raw in lines:
        line = raw.rstrip()
        s = line.strip()
        if _FAILURE.search(s):
            failures.append(_problem_line(s))
            continue
        if m := _VERSION.match(s):
            version = m.group(1)
            continue
        if m := _STARTING.match(s):
            starting = m.group(1)
            continue
        if m := _HEADER.match(s):
            settings = {k.replace(" ", "_"): int(v) for k, v in _HEADER_INT.findall(s)}
            cur = _Block(op=starting or op or perf_word, version=version, ngpus=int(m.group(2)),
                         min_bytes=int(m.group(3)), max_bytes=int(m.group(4)),
                         step=int(m.group(5) or 2), step_kind=m.group(6) or "factor",
                         settings=settings)
            blocks.append(cur)
            version = starting = None
            continue
        if m := _LIBRARY.match(s):
            library = library or m.group(1)
            continue
        if cur is None:
            if pm := _PERF_WORD.search(s):
                perf_word = pm.group(1)
            continue
        if m := _RANK.match(s):
            cur.ranks.append({"rank": int(m.group(1)), "host": m.group(2),
                              "device": int(m.group(3)), "pci": m.group(4), "name": m.group(5)})
        elif s.startswith("#") and "size" in s and "count" in s:
            cur.wrong_is_count = "#wrong" in s or "error" not in s
        elif m := _OOB.match(s):
            cur.oob = (int(m.group(1)), m.group(2))
        elif m := _AVG.match(s):
            cur.avg_busbw = _num(m.group(1))
        elif _CONCLUDED.match(s):
            cur.concluded = True
        elif not s.startswith("#") and (row := _row(s)) is not None:
            cur.rows.append(row)
    if not blocks:
        if failures:
            return invalid(KIND, *_failure_problems(failures))
        return invalid(KIND, NOT_NCCL)
    return _result(blocks, failures, library, launcher)


def _untagged(lines: list[str]) -> tuple[Optional[str], list[str]]:
    """(launcher name, the lines without its tag): the tag in front of the first header decides."""
    for line in lines:
        at = _HEADER_AT.search(line)
        if at is None:
            continue
        prefix = line[:at.start()]
        if not prefix.strip():
            return None, lines
        for name, tag in _LAUNCHERS:
            m = tag.match(prefix)
            if m is not None and not prefix[m.end():].strip():
                return name, [tag.sub("", ln, count=1) for ln in lines]
        return None, lines
    return None, lines


def _failure_problems(failures: list[str]) -> list[str]:
    more = f" (and {len(failures) - 1} more failure lines)" if len(failures) > 1 else ""
    return [f"nccl-tests reported a failure: {failures[0]}{more}"]


def _result(blocks: list[_Block], failures: list[str], library: Optional[str],
            launcher: Optional[str] = None) -> ParseResult:
    problems: list[str] = []
    metrics: list[Metric] = []
    ops = Counter(b.op or "unknown" for b in blocks)
    seen: Counter[str] = Counter()
    tests = []
    for b in blocks:
        name = b.op or "unknown"
        base: dict[str, str | int] = {"op": name}
        if ops[name] > 1:
            base["instance"] = seen[name]
            seen[name] += 1
        where = f"{name}" + (f" (instance {base['instance']})" if "instance" in base else "")
        problems += _block_problems(b, where)
        metrics += _block_metrics(b, base)
        tests.append({"op": name, "nccl_tests_version": b.version, "ngpus": b.ngpus,
                      "ranks": len(b.ranks), "min_bytes": b.min_bytes, "max_bytes": b.max_bytes,
                      "rows": len(b.rows), **b.settings,
                      "hosts": sorted({str(r["host"]) for r in b.ranks})})
    if failures:
        problems += _failure_problems(failures)
    details: dict[str, object] = {"nccl_version": library, "tests": tests}
    if launcher:
        details["launcher"] = launcher
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)


def _block_problems(b: _Block, where: str) -> list[str]:
    out: list[str] = []
    if not b.rows:
        out.append(f"{where}: no result rows")
        return out
    bad = [(r.size, PLACEMENTS[i], c[3]) for r in b.rows for i, c in enumerate(r.values)
           if b.wrong_is_count and c[3] is not None and c[3] > 0]
    if bad:
        size, place, n = bad[0]
        out.append(f"{where}: #wrong > 0 in {len(bad)} results (first: {size} B {place}: {n:g})")
    if b.oob is not None and (b.oob[0] > 0 or b.oob[1].upper() != "OK"):
        out.append(f"{where}: Out of bounds values : {b.oob[0]} {b.oob[1]}")
    if b.avg_busbw is None and b.oob is None:
        last = b.rows[-1].size
        done = last * b.step > b.max_bytes if b.step_kind == "factor" else last + b.step > b.max_bytes
        if not done:
            out.append(f"{where}: table stops at {last} B before maxBytes {b.max_bytes} and has no "
                       "summary lines: output truncated")
    return out


def _block_metrics(b: _Block, base: dict[str, str | int]) -> list[Metric]:
    out: list[Metric] = []
    for r in b.rows:
        labels = dict(base, size=r.size)
        if r.dtype is not None:
            labels["dtype"] = r.dtype
        if r.redop is not None:
            labels["redop"] = r.redop
        for place, (time, algbw, busbw, wrong) in zip(PLACEMENTS, r.values, strict=True):
            lab = {**labels, "placement": place}
            out += [Metric("nccl.time", time, US, lab), Metric("nccl.algbw", algbw, GBPS, lab),
                    Metric("nccl.busbw", busbw, GBPS, lab)]
            if wrong is not None and b.wrong_is_count:
                out.append(Metric("nccl.wrong", wrong, COUNT, lab))
    if b.avg_busbw is not None:
        out.append(Metric("nccl.avg_busbw", b.avg_busbw, GBPS, base))
    if b.ranks:
        out.append(Metric("nccl.ranks", float(len(b.ranks)), COUNT, base))
    return out
