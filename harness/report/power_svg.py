"""A check's `power` and `psus` sections in the report (power_headroom writes them): node power
over time, the headroom figure, the PSU table.

One inline SVG chart: node input power (BMC, or estimated: dashed) over the check's time, the
load phase shaded, the usable PSU capacity and its 80% line drawn across, each GPU's power
stacked beneath as filled bands, and a marker where a PSU failed. Pure functions from the
saved series (raw/<check>/power.json) and the check's result to escaped markup; no script.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any, Optional

from markupsafe import Markup

from harness.fsutil import load_recorded
from harness.model import CheckResult
from harness.report.charts import COLOURS
from harness.report.svg import thin
from harness.series.power import PowerSeries, load

W, H = 760, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 132, 18, 34
MAX_POINTS = 500
CAPACITY_COLOUR, EIGHTY_COLOUR, NODE_COLOUR, FAIL_COLOUR = "#cf222e", "#9a6700", "#1f2328", "#cf222e"


def _w(v: float) -> str:
    return f"{v / 1000:.1f} kW" if abs(v) >= 10_000 else f"{v:,.0f} W"


def _step(top: float) -> float:
    raw = top / 5
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if raw <= m * mag)


def psu_failures(series: PowerSeries) -> list[tuple[float, str]]:
    """(t, 'PSU3 not OK') where a PSU first reads not OK after an OK reading, or at the start."""
    out = []
    for name, oks in series.psu_ok.items():
        prev: Optional[bool] = None
        for t, ok in zip(series.t, oks, strict=False):
            if ok is False and prev is not False:
                out.append((t, f"{name} not OK"))
            if ok is not None:
                prev = ok
    return sorted(out)


def chart(series: PowerSeries) -> str:
    """The SVG chart as text ('' when there are fewer than two samples)."""
    t = series.t
    if len(t) < 2:
        return ""
    gpus = sorted(series.gpu_w)
    gpu_sum = [sum(series.gpu_w[g][i] or 0.0 for g in gpus) for i in range(len(t))]
    drawn = series.node_w if any(v is not None for v in series.node_w) else gpu_sum
    idx = thin(drawn, MAX_POINTS)  # each bucket's extremes: a one-sample spike is still drawn
    node = [(t[i], v) for i in idx if (v := series.node_w[i]) is not None]
    every_node = [(t[i], v) for i, v in enumerate(series.node_w) if v is not None]
    lines = [series.capacity_w or 0.0, max((v for _, v in every_node), default=0.0)]
    top_v = max(*lines, max(gpu_sum, default=0.0), 1.0)
    ystep = _step(top_v * 1.06)
    y_top = ystep * math.ceil(top_v * 1.06 / ystep)
    t0, t1 = t[0], max(t[-1], t[0] + 1e-6)
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(s: float) -> float:
        return LEFT + (s - t0) / (t1 - t0) * pw

    def y(v: float) -> float:
        return TOP + ph - max(0.0, v) / y_top * ph

    title = "Node input power over time" + (" (estimated)" if series.estimated else "")
    out = [f'<svg class="chart power" role="img" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="11"><title>{escape(title)}</title>',
           f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="#fff" stroke="#d1d9e0"/>']
    load = [s for s, p in zip(t, series.phase, strict=False) if p == "load"]
    if load:
        out.append(f'<rect x="{x(min(load)):.1f}" y="{TOP}" width="{x(max(load)) - x(min(load)):.1f}" '
                   f'height="{ph}" fill="#ddf4ff" fill-opacity="0.55"><title>load phase</title></rect>'
                   f'<text x="{x(min(load)) + 4:.1f}" y="{TOP + 12}" fill="#0969da">load</text>')
    n = 0
    while n * ystep <= y_top + 1e-9:
        yy = y(n * ystep)
        tick = f"{n * ystep / 1000:g} kW" if y_top >= 2000 else f"{n * ystep:g} W"
        out.append(f'<path d="M{LEFT} {yy:.1f}H{LEFT + pw}" stroke="#eff2f5"/><text x="{LEFT - 6}" '
                   f'y="{yy + 4:.1f}" text-anchor="end" fill="#59636e">{tick}</text>')
        n += 1
    out += _stack(series, gpus, idx, x, y)
    if series.capacity_w:
        for value, caption, colour, dash in ((series.capacity_w, "usable capacity", CAPACITY_COLOUR, ""),
                                            (0.8 * series.capacity_w, "80% (20% headroom)", EIGHTY_COLOUR,
                                             ' stroke-dasharray="6 4"')):
            yy = y(value)
            tx = LEFT + pw + 6
            out.append(f'<path class="threshold" d="M{LEFT} {yy:.1f}H{LEFT + pw}" stroke="{colour}" '
                       f'stroke-width="1.5"{dash}/><text x="{tx}" y="{yy + 4:.1f}" fill="{colour}">'
                       f'{escape(caption)}</text><text x="{tx}" y="{yy + 16:.1f}" fill="{colour}">'
                       f"{_w(value)}</text>")
    if len(node) >= 2:
        dash = ' stroke-dasharray="5 3"' if series.estimated else ""
        path = "M" + " L".join(f"{x(s):.1f} {y(v):.1f}" for s, v in node)
        in_load = set(load)
        loaded = [(s, v) for s, v in every_node if s in in_load] or every_node
        peak_t, peak_v = max(loaded, key=lambda p: p[1])  # the true peak, from every sample
        what = "node power (estimated)" if series.estimated else "node power (BMC)"
        out.append(f'<path class="node" d="{path}" fill="none" stroke="{NODE_COLOUR}" stroke-width="2"{dash}>'
                   f"<title>{escape(what)}</title></path>"
                   f'<circle cx="{x(peak_t):.1f}" cy="{y(peak_v):.1f}" r="3.5" fill="{NODE_COLOUR}">'
                   f"<title>peak {_w(peak_v)} at {peak_t:.1f} s</title></circle>")
    for s, what in psu_failures(series):
        out.append(f'<path d="M{x(s):.1f} {TOP}V{TOP + ph}" stroke="{FAIL_COLOUR}" stroke-width="2">'
                   f"<title>{escape(what)} at {s:.1f} s</title></path>"
                   f'<text x="{x(s) + 3:.1f}" y="{TOP + ph - 6}" fill="{FAIL_COLOUR}">{escape(what)}</text>')
    out.append(f'<text x="{LEFT}" y="{H - 8}" fill="#59636e">{t0:.0f} s</text>'
               f'<text x="{LEFT + pw}" y="{H - 8}" text-anchor="end" fill="#59636e">{t1:.0f} s</text>'
               f'<text x="{LEFT + pw / 2:.1f}" y="{H - 8}" text-anchor="middle" fill="#59636e">'
               "seconds from the start of the load</text></svg>")
    return "".join(out)


def _stack(series: PowerSeries, gpus: Sequence[int], idx: Sequence[int], x: Any, y: Any) -> list[str]:
    """Each GPU's power as a band on top of the GPUs before it (gaps where a GPU did not answer)."""
    out = []
    base = [0.0] * len(idx)
    for k, g in enumerate(gpus):
        col = series.gpu_w[g]
        top = [b + (col[i] or 0.0) for b, i in zip(base, idx, strict=True)]
        pts = [i for i in range(len(idx)) if col[idx[i]] is not None]
        if len(pts) >= 2:
            upper = " L".join(f"{x(series.t[idx[i]]):.1f} {y(top[i]):.1f}" for i in pts)
            lower = " L".join(f"{x(series.t[idx[i]]):.1f} {y(base[i]):.1f}" for i in reversed(pts))
            colour = COLOURS[k % len(COLOURS)]
            out.append(f'<path class="gpu" d="M{upper} L{lower} Z" fill="{colour}" fill-opacity="0.45" '
                       f'stroke="{colour}" stroke-width="0.5"><title>GPU {g}</title></path>')
        base = top
    return out


@dataclass(frozen=True)
class PowerView:
    """What the report shows for one power_headroom check."""

    headroom: str  # "28.4 %" or "—"
    outcome: str  # the headroom evaluation's outcome (pass/fail/...), "" when not judged
    peak: str
    capacity: str
    estimated: bool
    basis: str  # where node power came from, in words
    chart: Markup
    psus: tuple[tuple[str, str, str, str, str, str], ...]  # name, before, during, peak in, peak out, status
    legend: tuple[tuple[str, str], ...]  # (colour, GPU n)


def _ok(v: Any) -> str:
    return "OK" if v is True else ("NOT OK" if v is False else "—")


def power_view(check: CheckResult, run_dir: Optional[Path]) -> Optional[PowerView]:
    """The view of a check's `power` section, or None (no such section, or no readable series)."""
    series = load_recorded(run_dir, check.details.get("power"), load)
    if series is None:
        return None
    v = {m.name: m.value for m in check.metrics if not m.labels}
    ev = next((e for e in check.evaluations if e.metric == "power.headroom_pct"), None)
    head = v.get("power.headroom_pct")
    if series.estimated:
        basis = (f"estimated: GPU power (NVML) + {_w(series.allowance_w or 0.0)} allowance for the rest of "
                 "the node; no BMC reading")
    else:
        basis = f"measured by {series.source or 'the BMC'}"
    rows = []
    psus = check.details.get("psus")
    for r in psus if isinstance(psus, list) else []:
        if isinstance(r, Mapping):
            rows.append((str(r.get("psu", "")), _ok(r.get("before")), _ok(r.get("during")),
                         "—" if r.get("peak_in_w") is None else _w(float(r["peak_in_w"])),
                         "—" if r.get("peak_out_w") is None else _w(float(r["peak_out_w"])),
                         str(r.get("status") or "")))
    svg = chart(series)
    return PowerView(
        headroom="—" if head is None else f"{head:.1f} %", outcome=ev.outcome.value if ev else "",
        peak="—" if "power.node_peak" not in v else _w(v["power.node_peak"]),
        capacity="—" if "power.usable_capacity" not in v else _w(v["power.usable_capacity"]),
        estimated=series.estimated, basis=basis,
        chart=Markup(svg),  # noqa: S704 - built from escaped parts only
        psus=tuple(rows),
        legend=tuple((COLOURS[k % len(COLOURS)], f"GPU {g}") for k, g in enumerate(sorted(series.gpu_w))))
