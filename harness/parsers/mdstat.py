"""Parse /proc/mdstat (Linux software RAID) into per-array health metrics.

Pure: text in, ParseResult out. Per array (labels `array`, `level`): md.degraded (1 when a
member is missing: `[2/1] [U_]`), md.active (0 for an inactive array), md.disks_missing,
md.disks_failed (`(F)`), md.disks_spare (`(S)`), and md.sync_pct (label `action`: recovery,
resync, reshape, check, repair) while one runs. RAID0/linear have no `[n/m]` status: a failed
member is their only sign of trouble. IMSM/DDF metadata containers (`super external:imsm`) are
listed in details, not judged: the arrays inside them are listed separately.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Optional

from harness.model import Metric
from harness.parsers.base import ParseResult, invalid
from harness.units import COUNT, PERCENT

KIND = "mdstat"
NOT_MDSTAT = "not /proc/mdstat text (no 'Personalities' line and no md array)"
_HEADER = re.compile(r"^(md[\w/.-]*)\s*:\s*(active|inactive)\b(.*)$")
_LEVEL = re.compile(r"^(raid\d+|linear|multipath|faulty|container)$")
_MEMBER = re.compile(r"^([\w/.-]+)\[(\d{1,9})\]((?:\([A-Z]\))*)$")
_STATUS = re.compile(r"\[(\d{1,9})/(\d{1,9})\]\s*\[([U_]+)\]")
_PROGRESS = re.compile(r"\b(recovery|resync|reshape|check|repair)\s*=\s*(\d{1,3}(?:\.\d{1,9})?)%")
_WAITING = re.compile(r"\b(recovery|resync|reshape|check|repair)\s*=\s*(DELAYED|PENDING)\b")


@dataclass
class _Array:
    name: str
    active: bool
    level: str = ""
    members: list[tuple[str, str]] = field(default_factory=list)  # (device, flags such as "(F)")
    total: Optional[int] = None
    up: Optional[int] = None
    status: str = ""
    action: Optional[tuple[str, float]] = None
    waiting: Optional[str] = None  # e.g. "resync=DELAYED"
    container: bool = False


def parse(text: str) -> ParseResult:
    """md.* metrics per array from /proc/mdstat."""
    arrays: list[_Array] = []
    saw_personalities = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("Personalities"):
            saw_personalities = True
            continue
        m = _HEADER.match(line)
        if m:
            arrays.append(_header(m))
            continue
        if not arrays or not line or line.startswith("unused devices"):
            continue
        cur = arrays[-1]
        if (s := _STATUS.search(line)) is not None:
            cur.total, cur.up, cur.status = int(s.group(1)), int(s.group(2)), s.group(3)
        if (p := _PROGRESS.search(line)) is not None and math.isfinite(float(p.group(2))):
            cur.action = (p.group(1), float(p.group(2)))
        if (w := _WAITING.search(line)) is not None:
            cur.waiting = f"{w.group(1)}={w.group(2)}"
        if "super external:" in line and "external:/" not in line:
            cur.container = True
    if not arrays and not saw_personalities:
        return invalid(KIND, NOT_MDSTAT)
    metrics: list[Metric] = []
    for a in arrays:
        if not a.container:
            metrics += _metrics(a)
    judged = [a for a in arrays if not a.container]
    metrics.append(Metric("md.arrays", float(len(judged)), COUNT))
    details = {"arrays": [{"name": a.name, "level": a.level, "active": a.active,
                           "members": [d + f for d, f in a.members], "status": a.status or None,
                           "action": a.action[0] if a.action else a.waiting,
                           "container": a.container}
                          for a in arrays]}
    return ParseResult(KIND, True, (), tuple(metrics), details)


def _header(m: re.Match[str]) -> _Array:
    a = _Array(m.group(1), m.group(2) == "active")
    for tok in re.sub(r"\((?:auto-)?read-only\)", " ", m.group(3)).split():
        if _LEVEL.match(tok) and not a.members:
            a.level = tok
        elif (mm := _MEMBER.match(tok)) is not None:
            a.members.append((mm.group(1), mm.group(3)))
    return a


def _metrics(a: _Array) -> list[Metric]:
    labels: dict[str, str | int] = {"array": a.name}
    if a.level:
        labels["level"] = a.level
    failed = sum(1 for _, f in a.members if "(F)" in f)
    spare = sum(1 for _, f in a.members if "(S)" in f)
    missing = 0
    if a.total is not None and a.up is not None:
        missing = max(a.total - a.up, a.status.count("_"))
    degraded = missing > 0 or (a.total is None and failed > 0)
    out = [Metric("md.active", 1.0 if a.active else 0.0, COUNT, labels),
           Metric("md.degraded", 1.0 if degraded else 0.0, COUNT, labels),
           Metric("md.disks_failed", float(failed), COUNT, labels),
           Metric("md.disks_spare", float(spare), COUNT, labels)]
    if a.total is not None:
        out.append(Metric("md.disks_missing", float(missing), COUNT, labels))
    if a.action is not None:
        out.append(Metric("md.sync_pct", a.action[1], PERCENT, {**labels, "action": a.action[0]}))
    return out
