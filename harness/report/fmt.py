"""Every number a person reads: significant digits, thousands separators, scaled bytes, units,
durations, timestamps, bands and labels. The HTML report, JUnit, trends, history and fleet views
all format through here, so the same value reads the same everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from harness.model import join_labels


def fmt_num(v: float | None, digits: int = 3) -> str:
    """About `digits` significant digits; whole numbers and values >= 1000 with thousands separators."""
    if v is None:
        return "—"
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    a = abs(v)
    if v.is_integer() and a < 1e15:
        return f"{int(v):,}"
    if a >= 1000:
        return f"{v:,.{max(0, digits - len(str(int(a))))}f}"
    if a < 1e-3:
        return f"{v:.{digits - 1}e}"
    s = f"{v:.{digits}g}"
    return f"{v:,.0f}" if "e" in s else s


def fmt_bytes(n: float | None, si: bool = False, digits: int = 3) -> str:
    """Bytes as B/KiB/MiB/... (or kB/MB/GB/... with `si`, as drives are sold)."""
    if n is None:
        return "—"
    step, names = (1000.0, ("B", "kB", "MB", "GB", "TB", "PB")) if si else \
        (1024.0, ("B", "KiB", "MiB", "GiB", "TiB", "PiB"))
    v, i = float(n), 0
    while abs(v) >= step and i < len(names) - 1:
        v, i = v / step, i + 1
    return f"{fmt_num(v, digits)} {names[i]}"


def fmt_value(v: float | None, unit: str, digits: int = 3) -> str:
    """A number with its unit; bytes scaled, counts and ratios bare."""
    if v is None:
        return "—"
    if unit == "B":
        return fmt_bytes(v, digits=digits)
    if unit in ("count", "ratio", ""):
        return fmt_num(v, digits)
    return f"{fmt_num(v, digits)} {unit}"


def fmt_band(low: float | None, high: float | None, unit: str, digits: int = 3, ascii_: bool = False) -> str:
    """The allowed band: '[low, high]', '≥ low', '≤ high', or 'any' when both sides are open."""
    ge, le = (">=", "<=") if ascii_ else ("≥", "≤")
    if low is not None and high is not None:
        if unit == "B":
            return f"[{fmt_bytes(low, digits=digits)}, {fmt_bytes(high, digits=digits)}]"
        tail = "" if unit in ("count", "ratio", "") else f" {unit}"
        return f"[{fmt_num(low, digits)}, {fmt_num(high, digits)}]{tail}"
    if low is not None:
        return f"{ge} {fmt_value(low, unit, digits)}"
    if high is not None:
        return f"{le} {fmt_value(high, unit, digits)}"
    return "any"


def fmt_delta(pct: float | None) -> str:
    """Signed percent difference from the reference."""
    return "—" if pct is None or not math.isfinite(pct) else f"{pct:+.1f} %"


def fmt_duration(s: float | None) -> str:
    """Seconds as '12.3 s', '4 min 05 s' or '2 h 03 min'."""
    if s is None:
        return "—"
    if s < 60:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def fmt_time(iso: str) -> str:
    """An ISO 8601 timestamp as 'YYYY-MM-DD HH:MM:SS UTC'; unparsable text is returned as is."""
    if not iso:
        return "—"
    try:
        t = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso
    if t.tzinfo is not None:
        t = t.astimezone(timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def digits_for(measured: float | None, others: Iterable[float | None]) -> int:
    """Fewest digits (3..6) at which `measured` does not print the same as a different bound."""
    if measured is None or not math.isfinite(measured):
        return 3
    rivals = [o for o in others if o is not None and o != measured]
    for d in range(3, 7):
        if all(fmt_num(measured, d) != fmt_num(o, d) for o in rivals):
            return d
    return 6


def fmt_labels(labels: Mapping[str, Any]) -> str:
    """Labels as '{k=v,k=v}', or '' when there are none."""
    return join_labels(labels, braces=True)
