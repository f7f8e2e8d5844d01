"""Inline SVG charts for the report: pure functions, every text escaped, no script, no network.

A trend chart shows a metric over a node's runs: one dot per run (red for a rejected run, the
last one ringed as this run), the allowed band shaded, and the go-live value as a dashed line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

W, H = 360, 132
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 12, 26


@dataclass(frozen=True)
class ChartPoint:
    """One run on the chart: its value and the texts around it."""

    value: float
    label: str  # shown under the axis for the first and last point (a date)
    tip: str  # tooltip: run id, value, verdict
    bad: bool = False


def thin(values: Sequence[float | None], max_points: int) -> list[int]:
    """Indices to draw of a long series: per bucket its minimum and maximum, in time order.

    Taking every n-th sample hides spikes (a one-sample 12.9 kW peak among 3,600 samples vanished);
    keeping each bucket's extremes draws every spike and every dip with at most `max_points`
    points. The first and last samples are always kept; a bucket with no values keeps its first.
    """
    n = len(values)
    if n <= max_points:
        return list(range(n))
    size = math.ceil(n / max(1, max_points // 2))
    keep = {0, n - 1}
    for start in range(0, n, size):
        bucket = [i for i in range(start, min(n, start + size)) if values[i] is not None]
        if not bucket:
            keep.add(start)
            continue
        keep.add(min(bucket, key=lambda i: values[i]))  # type: ignore[arg-type,return-value]
        keep.add(max(bucket, key=lambda i: values[i]))  # type: ignore[arg-type,return-value]
    return sorted(keep)


def num(v: float) -> str:
    """Compact number for axis labels: 3 significant digits, k/M/G from 1 000 (1.13k, 38k, 1M)."""
    if not math.isfinite(v):
        return str(v)
    a = float(f"{abs(v):.3g}")  # rounded first: 999 999 is 1M, not 1e+03k
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{math.copysign(a, v) / div:.3g}{suffix}"
    return f"{v:.3g}"


def _range(values: Sequence[float], extra: Sequence[float | None]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    span = max(hi - lo, abs(hi) * 0.05, abs(lo) * 0.05, 1e-9)  # flat series still get some height
    near = [x for x in extra if x is not None and math.isfinite(x) and lo - span <= x <= hi + span]
    lo, hi = min([lo, *near]), max([hi, *near])
    pad = max(hi - lo, span) * 0.08
    return lo - pad, hi + pad


def trend_chart(points: Sequence[ChartPoint], *, unit: str, title: str, golive: float | None = None,
                low: float | None = None, high: float | None = None) -> Markup:
    """An SVG line chart of `points` (oldest first) as markup safe to put into the page."""
    pts = [p for p in points if math.isfinite(p.value)]
    if not pts:
        return Markup('<svg class="trend" viewBox="0 0 {w} {h}" role="img" aria-label="no data"></svg>'
                      ).format(w=W, h=H)
    y0, y1 = _range([p.value for p in pts], [golive, low, high])
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(i: int) -> float:
        return LEFT + (pw * i / (len(pts) - 1) if len(pts) > 1 else pw / 2)

    def y(v: float) -> float:
        return TOP + ph * (1 - (v - y0) / (y1 - y0))

    def clamp(v: float) -> float:
        return min(max(v, y0), y1)

    parts = [Markup('<svg class="trend" viewBox="0 0 {w} {h}" '
                    'width="{w}" height="{h}" role="img" aria-label="{t}"><title>{t}</title>')
             .format(w=W, h=H, t=title)]
    if low is not None or high is not None:
        top = y(clamp(high)) if high is not None else TOP
        bottom = y(clamp(low)) if low is not None else TOP + ph
        if bottom - top > 0.5:
            parts.append(Markup('<rect class="band" x="{x}" y="{y:.1f}" width="{w}" height="{h:.1f}">'
                                '<title>allowed band</title></rect>')
                         .format(x=LEFT, y=top, w=pw, h=bottom - top))
    parts.append(Markup('<line class="axis" x1="{l}" y1="{b}" x2="{r}" y2="{b}"/>'
                        '<line class="axis" x1="{l}" y1="{t}" x2="{l}" y2="{b}"/>')
                 .format(l=LEFT, r=LEFT + pw, t=TOP, b=TOP + ph))
    vals = [p.value for p in pts]
    for v in sorted({min(vals), max(vals)}):
        parts.append(Markup('<line class="grid" x1="{l}" y1="{y:.1f}" x2="{r}" y2="{y:.1f}"/>'
                            '<text class="tick" x="{x}" y="{ty:.1f}" text-anchor="end">{v}</text>')
                     .format(l=LEFT, r=LEFT + pw, y=y(v), x=LEFT - 5, ty=y(v) + 4, v=num(v)))
    if golive is not None and y0 <= golive <= y1:
        gy = y(golive)
        parts.append(Markup('<line class="golive" x1="{l}" y1="{y:.1f}" x2="{r}" y2="{y:.1f}">'
                            '<title>go-live {v} {u}</title></line>')
                     .format(l=LEFT, r=LEFT + pw, y=gy, v=num(golive), u=unit))
        parts.append(Markup('<text class="golive-label" x="{x}" y="{y:.1f}" text-anchor="end">go-live'
                            '</text>').format(x=LEFT + pw - 2, y=gy - 3))
    if len(pts) > 1:
        path = " ".join(f"{x(i):.1f},{y(p.value):.1f}" for i, p in enumerate(pts))
        parts.append(Markup('<polyline class="line" points="{p}"/>').format(p=path))
    for i, p in enumerate(pts):
        cls = "dot bad" if p.bad else "dot"
        if i == len(pts) - 1:
            cls += " now"
        parts.append(Markup('<circle class="{c}" cx="{x:.1f}" cy="{y:.1f}" r="{r}">'
                            '<title>{t}</title></circle>')
                     .format(c=cls, x=x(i), y=y(p.value), r=4.5 if i == len(pts) - 1 else 3, t=p.tip))
    first, last = pts[0].label, pts[-1].label
    parts.append(Markup('<text class="tick" x="{x}" y="{y}" text-anchor="start">{t}</text>')
                 .format(x=LEFT, y=H - 8, t=first))
    if len(pts) > 1:
        parts.append(Markup('<text class="tick" x="{x}" y="{y}" text-anchor="end">{t}</text>')
                     .format(x=LEFT + pw, y=H - 8, t=last))
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)
