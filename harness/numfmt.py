"""How every number reads to a person: significant digits, thousands separators, scaled units
(37.0 ms, 1.08 GB/s, 72,390 IOPS, 23.5 GiB), bands, deltas, durations and counted words; never
scientific notation.

The one formatter. It is vocabulary so that what sits below the report (compare's and the
siblings' verdict messages, checks' notes) words numbers as the report does; harness.report.fmt
re-exports it with the report's own helpers (timestamps, labels).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

# Units scaled for reading: unit -> [(at least this, shown in that unit, divided by)], largest first.
_SCALES: dict[str, tuple[tuple[float, str, float], ...]] = {
    "us": ((1e6, "s", 1e6), (1e3, "ms", 1e3), (0.0, "us", 1.0)),
    "GB/s": ((1.0, "GB/s", 1.0), (1e-3, "MB/s", 1e-3), (0.0, "kB/s", 1e-6)),
}
_BARE = ("count", "ratio", "")


def fmt_num(v: float | None, digits: int = 3, trim: bool = False) -> str:
    """About `digits` significant digits, trailing zeros kept (37.0: a measurement) unless `trim`
    (1.5: a bound someone wrote); whole numbers and values >= 1000 with thousands separators;
    small values as plain decimals (0.000412), never 4.12e-04; beyond 15 places, and from 10^15,
    as a power of ten (1.00 × 10^-308)."""
    if v is None:
        return "—"
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    a = abs(v)
    if a >= 1e15:  # beyond any measurement: no 20-digit runs of separators
        exp = math.floor(math.log10(a))
        return f"{v / 10 ** exp:.{max(0, digits - 1)}f} × 10^{exp}"
    if v.is_integer() or abs(v - round(v)) < 1e-9 * a:  # 5.000000000000001 (0.05 x 100) reads 5
        return f"{round(v):,}"
    if a >= 1000:
        return f"{v:,.{max(0, digits - len(str(int(a))))}f}"
    if a < 1e-3:
        places = digits - 1 - math.floor(math.log10(a))
        if places > 15:  # 1e-308 is no run of zeros (it read 0.000000000000000): a power of ten
            mantissa, _, power = f"{v:.{max(0, digits - 1)}e}".partition("e")
            return f"{mantissa} × 10^{int(power)}"
        return f"{v:.{places}f}"
    s = f"{v:#.{digits}g}"  # '#' keeps the trailing zeros: 37.0 ms, not 37 ms
    if "e" in s:
        return f"{v:,.0f}"
    return s.rstrip("0").rstrip(".") if trim and "." in s else s.rstrip(".")


def fmt_bytes(n: float | None, si: bool = False, digits: int = 3) -> str:
    """Bytes as B/KiB/MiB/GiB/... (or kB/MB/GB/... with `si`, as drives are sold)."""
    if n is None:
        return "—"
    step, names = (1000.0, ("B", "kB", "MB", "GB", "TB", "PB")) if si else \
        (1024.0, ("B", "KiB", "MiB", "GiB", "TiB", "PiB"))
    v, i = float(n), 0
    while math.isfinite(v) and abs(v) >= step and i < len(names) - 1:
        v, i = v / step, i + 1
    return f"{fmt_num(v, digits)} {names[i]}"


def scaled(v: float, unit: str) -> tuple[float, str]:
    """(value, unit) in the unit a person reads best: 36960 us -> (36.96, 'ms'),
    0.9 GB/s -> (900, 'MB/s'); other units unchanged."""
    for least, name, div in _SCALES.get(unit, ()):
        if abs(v) >= least or not math.isfinite(v):
            return v / div, name
    return v, unit


def fmt_value(v: float | None, unit: str, digits: int = 3, trim: bool = False) -> str:
    """A number with its unit, scaled (bytes in KiB/MiB/GiB, us as ms or s, GB/s below 1 as MB/s);
    counts and ratios bare."""
    if v is None:
        return "—"
    if unit == "B":
        return fmt_bytes(v, digits=digits)
    if unit in _BARE:
        return fmt_num(v, digits, trim)
    if unit == "%":
        return f"{fmt_num(v, digits, trim)} %"
    x, shown = scaled(float(v), unit)
    return f"{fmt_num(x, digits, trim)} {shown}"


def fmt_band(low: float | None, high: float | None, unit: str, digits: int = 3, ascii_: bool = False) -> str:
    """The allowed band: '[low, high]', '≥ low', '≤ high', or 'any' when both sides are open
    (bounds without trailing zeros: '≥ 1.5 GB/s')."""
    ge, le = (">=", "<=") if ascii_ else ("≥", "≤")
    if low is not None and high is not None:
        if unit == "B" or unit in _SCALES:
            lo, hi = fmt_value(low, unit, digits, True), fmt_value(high, unit, digits, True)
            a, b = lo.rsplit(" ", 1), hi.rsplit(" ", 1)
            return f"[{a[0]}, {b[0]}] {a[1]}" if a[1] == b[1] else f"[{lo}, {hi}]"
        tail = "" if unit in _BARE else f" {unit}"
        return f"[{fmt_num(low, digits, True)}, {fmt_num(high, digits, True)}]{tail}"
    if low is not None:
        return f"{ge} {fmt_value(low, unit, digits, True)}"
    if high is not None:
        return f"{le} {fmt_value(high, unit, digits, True)}"
    return "any"


def fmt_delta(pct: float | None) -> str:
    """Signed percent difference from the reference, e.g. '+55.2 %' ('—' when there is none)."""
    return "—" if pct is None or not math.isfinite(pct) else f"{pct:+,.1f} %"


def fmt_pct(fraction: float | None, digits: int = 3) -> str:
    """A fraction as a percent: 0.15 -> '15 %'."""
    return "—" if fraction is None else f"{fmt_num(fraction * 100, digits, trim=True)} %"


def fmt_duration(s: float | None) -> str:
    """Seconds as '12.3 s', '4 min 05 s' or '2 h 03 min'."""
    if s is None:
        return "—"
    if not math.isfinite(s):
        return fmt_num(s)
    if s < 60:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 disk', '2 disks', '1,024 GPUs' ('many' for an irregular plural)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def digits_for(measured: float | None, others: Iterable[float | None], unit: str = "") -> int:
    """Fewest digits (3..6) at which `measured` does not read the same as a different bound."""
    if measured is None or not math.isfinite(measured):
        return 3
    rivals = [o for o in others if o is not None and o != measured]
    for d in range(3, 7):
        if all(fmt_value(measured, unit, d, True) != fmt_value(o, unit, d, True) for o in rivals):
            return d
    return 6
