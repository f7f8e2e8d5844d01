"""Inline SVG charts for the report: pure functions from numbers to SVG text.

No script, no fonts fetched, no network: the SVG is plain markup inside the HTML file.
Every text from a run (labels, profile names) is escaped here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

from harness.model import CheckResult

COLOURS = ("#0969da", "#8250df", "#1a7f37", "#bc4c00", "#bf3989", "#1b7c83", "#6e7781", "#953800")
THRESHOLD_COLOUR = "#cf222e"
REFERENCE_COLOUR = "#9a6700"
_W, _PLOT_H = 720, 228
_LEFT, _RIGHT, _TOP = 64, 30, 18
_LEGEND_ROW, _PER_ROW = 14, 3


@dataclass(frozen=True)
class Line:
    """A horizontal rule across the chart (a threshold or a reference), with its caption."""

    value: float
    caption: str
    colour: str = THRESHOLD_COLOUR
    dashed: bool = True
    caption_right: bool = False  # caption at the right end (keeps two close lines readable)


def size_label(n: float) -> str:
    """Bytes as a short binary label: 8 B, 32 KiB, 16 GiB (1.5 GiB when not whole)."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    v, i = float(n), 0
    while v >= 1024 and i < len(units) - 1:
        v, i = v / 1024, i + 1
    return f"{v:.0f} {units[i]}" if v == int(v) else f"{v:.3g} {units[i]}"


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _fmt(v: float) -> str:
    return f"{v:.0f}" if v >= 10 or v == int(v) else f"{v:.3g}"


def log_x_chart(series: Mapping[str, Sequence[tuple[float, float]]], lines: Sequence[Line] = (), *,
                title: str, y_label: str, x_label: str = "message size") -> str:
    """Series of (x > 0, y) points on a log2 x axis (sizes in bytes) with horizontal lines.

    Returns "" when there is nothing to draw.
    """
    points = {name: sorted((x, y) for x, y in pts if x > 0 and math.isfinite(y))
              for name, pts in series.items()}
    points = {k: v for k, v in points.items() if v}
    if not points:
        return ""
    xs = [x for pts in points.values() for x, _ in pts]
    ys = [y for pts in points.values() for _, y in pts] + [ln.value for ln in lines]
    lo, hi = math.log2(min(xs)), math.log2(max(xs))
    if hi - lo < 1:
        lo, hi = lo - 1, hi + 1
    y_step = _nice_step(max(max(ys), 1e-9) * 1.08)
    y_top = y_step * math.ceil(max(max(ys), 1e-9) * 1.08 / y_step)
    pw, ph = _W - _LEFT - _RIGHT, _PLOT_H
    legend_y = _TOP + ph + 52
    height = legend_y + _LEGEND_ROW * math.ceil(len(points) / _PER_ROW)

    def px(x: float) -> float:
        return _LEFT + (math.log2(x) - lo) / (hi - lo) * pw

    def py(y: float) -> float:
        return _TOP + ph - max(0.0, y) / y_top * ph

    # Inline in HTML the parser puts <svg> in the SVG namespace: no xmlns (the report has no URLs).
    # Shapes are all <path> and <circle>, labels <text>: a small, inert set of tags.
    out = [f'<svg class="chart" role="img" viewBox="0 0 {_W} {height}" '
           f'width="{_W}" height="{height}" font-family="sans-serif" font-size="11">',
           f"<title>{escape(title)}</title>",
           f'<path d="M{_LEFT} {_TOP}h{pw}v{ph}h-{pw}Z" fill="#fff" stroke="#d1d9e0"/>']
    n = 0
    while n * y_step <= y_top + 1e-9:
        y = py(n * y_step)
        out.append(f'<path d="M{_LEFT} {y:.1f}H{_LEFT + pw}" stroke="#eff2f5"/>'
                   f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#59636e">'
                   f"{_fmt(n * y_step)}</text>")
        n += 1
    every = max(1, math.ceil((hi - lo) / 8))
    for e in range(math.ceil(lo), math.floor(hi) + 1):
        if e % every:
            continue
        x = px(2.0 ** e)
        out.append(f'<path d="M{x:.1f} {_TOP}V{_TOP + ph}" stroke="#eff2f5"/>'
                   f'<text x="{x:.1f}" y="{_TOP + ph + 15}" text-anchor="middle" fill="#59636e">'
                   f"{escape(size_label(2.0 ** e))}</text>")
    out.append(f'<text x="{_LEFT + pw / 2:.1f}" y="{_TOP + ph + 32}" text-anchor="middle" '
               f'fill="#59636e">{escape(x_label)} (log scale)</text>'
               f'<text x="14" y="{_TOP + ph / 2:.1f}" text-anchor="middle" fill="#59636e" '
               f'transform="rotate(-90 14 {_TOP + ph / 2:.1f})">{escape(y_label)}</text>')
    for ln in lines:
        y = py(ln.value)
        dash = ' stroke-dasharray="6 4"' if ln.dashed else ""
        # right-hand captions sit above their line, left-hand ones below it: close lines stay legible
        tx, ty, anchor = (_LEFT + pw - 4, y - 4, "end") if ln.caption_right else (_LEFT + 4, y + 13, "start")
        out.append(f'<path class="threshold" d="M{_LEFT} {y:.1f}H{_LEFT + pw}" '
                   f'stroke="{ln.colour}" stroke-width="1.5"{dash}/>'
                   f'<text x="{tx}" y="{ty:.1f}" text-anchor="{anchor}" fill="{ln.colour}">'
                   f"{escape(ln.caption)}</text>")
    for i, (name, pts) in enumerate(points.items()):
        colour = COLOURS[i % len(COLOURS)]
        path = "M" + " L".join(f"{px(x):.1f} {py(y):.1f}" for x, y in pts)
        out.append(f'<path class="series" d="{path}" fill="none" stroke="{colour}" '
                   'stroke-width="2"/>')
        out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}">'
                f"<title>{escape(name)}: {escape(size_label(x))}: {y:.4g}</title></circle>"
                for x, y in pts]
        lx = _LEFT + (i % _PER_ROW) * 220
        ly = legend_y + (i // _PER_ROW) * _LEGEND_ROW
        out.append(f'<path d="M{lx} {ly - 6.5}h12" stroke="{colour}" stroke-width="3"/>'
                   f'<text x="{lx + 16}" y="{ly - 4}" fill="#1f2328">{escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)


def nccl_busbw_chart(check: CheckResult) -> str:
    """busbw against message size per op and placement, with the busbw expectations' bounds."""
    series: dict[str, list[tuple[float, float]]] = {}
    for m in check.metrics:
        size = m.labels.get("size")
        if m.name != "nccl.busbw" or not isinstance(size, int):
            continue
        name = f"{m.labels.get('op', '?')} {m.labels.get('placement', '')}".strip()
        extra = [f"{k}={v}" for k, v in m.labels.items() if k not in ("op", "placement", "size",
                                                                      "dtype", "redop")]
        if extra:
            name += f" ({', '.join(extra)})"
        series.setdefault(name, []).append((float(size), m.value))
    lines: dict[tuple[float, str], Line] = {}
    for e in check.evaluations:
        if e.metric != "nccl.busbw":
            continue
        size = e.labels.get("size")
        what = " ".join(str(e.labels[k]) for k in ("op", "placement") if k in e.labels)
        where = (f" at {size_label(size)}" if isinstance(size, int) else "") + (f" ({what})" if what else "")
        src = f" — {e.source}" if e.source else ""
        if e.low is not None:
            lines.setdefault((e.low, "min"), Line(e.low, f"min {e.low:.4g} GB/s{where}{src}"))
        if e.reference is not None:
            lines.setdefault((e.reference, "ref"), Line(e.reference, f"reference {e.reference:.4g} GB/s",
                                                         REFERENCE_COLOUR, dashed=False, caption_right=True))
    return log_x_chart(series, list(lines.values()), title=f"{check.id}: NCCL bus bandwidth",
                       y_label="busbw (GB/s)")


def nccl_busbw_figure(check: CheckResult) -> Markup:
    """The NCCL chart as template markup ("" when nothing to draw); its texts are escaped above."""
    return Markup(nccl_busbw_chart(check))  # noqa: S704 - built from escaped parts only
