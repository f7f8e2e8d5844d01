"""Numbers in the stall doctor's sentences: percents, three significant digits with thousands
separators, rates and sizes in SI units (as rates are quoted), limits in binary units (as they
are set). Pure."""

from __future__ import annotations


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def num(x: float, digits: int = 3) -> str:
    """Three significant digits, thousands separated (1,410; 2.35; 0.5)."""
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def rate(bps: float) -> str:
    """Bytes per second as GB/s or MB/s (10^9, 10^6)."""
    return f"{num(bps / 1e9)} GB/s" if bps >= 1e9 else f"{num(bps / 1e6)} MB/s"


def size(b: float) -> str:
    """Bytes as GB / MB / KB (10^n, as rates are)."""
    for div, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if b >= div:
            return f"{num(b / div)} {unit}"
    return f"{b:.0f} B"


def mib(b: float) -> str:
    """Bytes in binary units, as limits are set (256 MiB, 1.5 GiB)."""
    for div, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if b >= div:
            return f"{num(b / div)} {unit}"
    return f"{b:.0f} B"
