"""Telemetry charts for the report: temperature, power and SM clock per GPU over the check's time.

Pure functions from a telemetry Series to inline SVG text; spans in which any GPU throttled
(a throttling clock-event reason, see harness.parsers.clockreasons) are shaded, each with a tooltip
naming the GPU and reason. Series longer than MAX_POINTS keep each bucket's minimum and maximum
(svg.thin), so a spike is always drawn. Every text is escaped; no script, no network.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from markupsafe import Markup

from harness.fsutil import load_recorded
from harness.model import CheckResult
from harness.parsers import clockreasons
from harness.report.charts import COLOURS
from harness.report.svg import thin
from harness.series.telemetry import Series, intervals, load

W, H = 720, 150
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 20, 24
MAX_POINTS = 400
MIN_SAMPLES = 3  # fewer make no line worth drawing
PANELS = (("temp", "GPU temperature", "C"), ("power", "Power", "W"), ("sm_clock", "SM clock", "MHz"))
SHADE = "#cf222e"


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 10 or v == int(v) else f"{v:.2g}"


def _bounds(values: Sequence[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if hi - lo < 1e-9:
        lo, hi = lo - 1, hi + 1
    pad = (hi - lo) * 0.08
    return lo - pad, hi + pad


def throttle_spans(series: Series) -> list[tuple[float, float, str]]:
    """(start s, end s, 'GPU n: reason') for every throttling span of every GPU and reason."""
    out = []
    for g in sorted(series.gpus):
        for reason in clockreasons.THROTTLING:
            for a, b in intervals(series, g, clockreasons.BITS[reason]):
                out.append((a, b, f"GPU {g}: {reason} {a:.1f}-{b:.1f} s"))
    return out


def panel(series: Series, field: str, title: str, unit: str,
          spans: Sequence[tuple[float, float, str]]) -> str:
    """One chart: a line per GPU for `field` over time, throttling spans shaded; '' without data."""
    t = series.t
    lines: dict[int, list[tuple[float, float]]] = {}
    for g in sorted(series.gpus):
        col = list(series.column(g, field)[: len(t)])
        pts = [(t[i], float(v)) for i in thin(col, MAX_POINTS) if (v := col[i]) is not None]
        if pts:
            lines[g] = pts
    if not lines or len(t) < 2:
        return ""
    t0, t1 = t[0], max(t[-1], t[0] + 1e-6)
    lo, hi = _bounds([v for pts in lines.values() for _, v in pts])
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(s: float) -> float:
        return LEFT + (s - t0) / (t1 - t0) * pw

    def y(v: float) -> float:
        return TOP + (hi - v) / (hi - lo) * ph

    out = [f'<svg class="chart" role="img" viewBox="0 0 {W} {H}" '
           f'width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f"<title>{escape(title)} ({escape(unit)}) per GPU</title>",
           f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="#fff" stroke="#d1d9e0"/>']
    for a, b, tip in spans:
        xa, xb = x(max(a, t0)), x(min(b, t1))
        if xb > xa:
            out.append(f'<rect x="{xa:.1f}" y="{TOP}" width="{xb - xa:.1f}" height="{ph}" fill="{SHADE}" '
                       f'fill-opacity="0.12"><title>{escape(tip)}</title></rect>')
    for v in (lo, (lo + hi) / 2, hi):
        out.append(f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end" fill="#59636e">'
                   f"{_num(v)}</text>")
    out.append(f'<text x="{LEFT}" y="{TOP - 6}" fill="#1f2328">{escape(title)} ({escape(unit)})</text>')
    out.append(f'<text x="{LEFT}" y="{H - 6}" fill="#59636e">{_num(t0)} s</text>'
               f'<text x="{W - RIGHT}" y="{H - 6}" text-anchor="end" fill="#59636e">{_num(t1)} s</text>')
    for g, pts in lines.items():
        colour = COLOURS[g % len(COLOURS)]
        path = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in pts)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}">'
                   f"<title>GPU {g}</title></polyline>")
    out.append("</svg>")
    return "".join(out)


def legend(series: Series) -> str:
    """Colour key: one swatch per GPU, plus the shading."""
    items = [f'<span style="color:{COLOURS[g % len(COLOURS)]}">&#9632;</span> GPU {g}'
             for g in sorted(series.gpus)]
    items.append(f'<span style="color:{SHADE};opacity:.5">&#9632;</span> throttling')
    return '<div class="note">' + " &nbsp; ".join(items) + "</div>"


def charts_html(series: Series) -> str:
    """The three panels and the legend as one HTML fragment ('' when there is nothing to draw).
    A check over in fewer than MIN_SAMPLES samples (a health read of a few ms) gets no lines: two
    points say nothing over time, and its numbers are in the per-GPU table."""
    lost = "".join(f'<div class="note">GPU {g} stopped answering at {t:.1f} s: {escape(why)}</div>'
                   for g, (t, why) in sorted(series.lost.items()))
    if len(series.t) < MIN_SAMPLES:
        return lost
    spans = throttle_spans(series)
    panels = [p for p in (panel(series, f, title, unit, spans) for f, title, unit in PANELS) if p]
    if not panels:
        return lost
    figures = "".join(f'<figure class="chart" style="margin:4px 0">{p}</figure>' for p in panels)
    return figures + legend(series) + lost


def telemetry_figure(check: CheckResult, run_dir: Path | None) -> Markup | None:
    """The check's telemetry charts from its saved series, or None (no telemetry, file unreadable)."""
    series = load_recorded(run_dir, check.details.get("telemetry"), load)
    if series is None:
        return None
    html = charts_html(series)
    if not html:
        return None
    return Markup(html)  # noqa: S704 - built from escaped parts only
