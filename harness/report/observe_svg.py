"""An observe window in the report (the `primary`, `findings` and `series` sections): what held
the work back, its findings, and a chart of the signals that mattered (one panel per finding: the
resource's own signal over the window).

Pure functions from the saved window (raw/<check>/observe-series.json) to inline SVG; every
text from the machine (device and process names, the verdict) is escaped; no script, no network.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any, Optional

from markupsafe import Markup

from harness.fsutil import load_recorded
from harness.model import CheckResult
from harness.report.charts import COLOURS
from harness.series.observed import Tick, Window, load

W, H = 720, 140
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 20, 24
MAX_POINTS = 400
Lines = dict[str, list[tuple[float, float]]]


def _lines(ticks: Sequence[Tick], named: Mapping[str, Callable[[Tick], Optional[float]]]) -> Lines:
    out: Lines = {}
    step = max(1, math.ceil(len(ticks) / MAX_POINTS))
    for label, fn in named.items():
        pts = [(t.t, v) for t in ticks[::step] if (v := fn(t)) is not None and math.isfinite(v)]
        if pts:
            out[label] = pts
    return out


def _pct(v: Optional[float]) -> Optional[float]:
    return None if v is None else 100.0 * v


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or not b else 100.0 * a / b


def signals(w: Window, resource: str, devices: Sequence[str]) -> tuple[str, str, Lines]:
    """(title, unit, lines) of the signal that made `resource` a finding."""
    t = w.ticks
    if resource == "cpu":
        named: dict[str, Callable[[Tick], Optional[float]]] = {"node CPUs busy": lambda k: _pct(k.cpu_busy)}
        if w.scope != "node":
            named["workload CPU use, of the node"] = lambda k: _ratio(k.work_cpu, float(k.ncpu))
            named["periods throttled by the quota"] = lambda k: _pct(k.cg_throttled)
        return "CPU", "%", _lines(t, named)
    if resource == "storage":
        named = {}
        for d in devices:
            named[f"{d} busy"] = _disk(d)
            named[f"{d} rate, of the cgroup's limit"] = _io_of_limit(d)
        named["workload tasks in D state (x100)"] = lambda k: 100.0 * k.tasks_d
        return "Storage", "%", _lines(t, named)
    if resource == "memory":
        return "Memory", "%", _lines(t, {
            "cgroup memory, of its limit": lambda k: _ratio(k.mem_used, k.mem_limit),
            "tasks stalled on memory (PSI)": lambda k: _pct(k.cg_psi.get("memory.some",
                                                                         k.psi.get("memory.some")))})
    if resource == "network":
        named = {}
        for d in devices:
            named[f"{d} sent"] = _net(d, "tx_bps")
            named[f"{d} received"] = _net(d, "rx_bps")
        named["TCP bytes queued to send (MB)"] = lambda k: None if k.tcp_send is None else k.tcp_send / 1e6
        return "Network", "MB/s", _lines(t, named)
    if resource == "shm":
        return "/dev/shm", "%", _lines(t, {"used, of its size": lambda k: _ratio(k.shm_used, k.shm_size)})
    gpus = sorted({g.gpu for k in t for g in k.gpus})
    chosen = [int(d[3:]) for d in devices if d.startswith("gpu") and d[3:].isdigit()] or gpus

    def gpu_line(i: int, fn: Callable[[Any], Optional[float]]) -> Callable[[Tick], Optional[float]]:
        return lambda k: next((fn(g) for g in k.gpus if g.gpu == i), None)

    if resource == "throttling":
        return "SM clock", "MHz", _lines(t, {f"gpu{i}": gpu_line(i, lambda g: g.sm_clock) for i in chosen})
    if resource == "gpu_memory":
        return "PCIe traffic", "GB/s", _lines(t, {f"gpu{i}": gpu_line(
            i, lambda g: None if g.pcie_bps is None else g.pcie_bps / 1e9) for i in chosen})
    return "GPU utilisation", "%", _lines(t, {f"gpu{i}": gpu_line(i, lambda g: _pct(g.util)) for i in chosen})


def _net(d: str, field: str) -> Callable[[Tick], Optional[float]]:
    return lambda k: getattr(k.net[d], field) / 1e6 if d in k.net else None


def _disk(d: str) -> Callable[[Tick], Optional[float]]:
    return lambda k: _pct(k.disks[d].util) if d in k.disks else None


def _io_of_limit(d: str) -> Callable[[Tick], Optional[float]]:
    def of(k: Tick) -> Optional[float]:
        io = k.io.get(d)
        if io is None:
            return None
        return _ratio(io.read_bps + io.write_bps, (io.read_limit or 0) + (io.write_limit or 0))

    return of


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10 or v == int(v) else f"{v:.2g}"


def panel(title: str, unit: str, lines: Lines) -> str:
    """One line chart over the window's seconds; '' when there is nothing to draw."""
    if not lines:
        return ""
    ts = [s for pts in lines.values() for s, _ in pts]
    t0, t1 = min(ts), max(max(ts), min(ts) + 1e-6)
    hi = max(max(v for pts in lines.values() for _, v in pts), 1e-9) * 1.08
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(s: float) -> float:
        return LEFT + (s - t0) / (t1 - t0) * pw

    def y(v: float) -> float:
        return TOP + (hi - max(v, 0.0)) / hi * ph

    out = [f'<svg class="chart" role="img" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="11"><title>{escape(title)} ({escape(unit)})</title>',
           f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="#fff" stroke="#d1d9e0"/>']
    for v in (0.0, hi / 2, hi):
        out.append(f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end" fill="#59636e">'
                   f"{_num(v)}</text>")
    out.append(f'<text x="{LEFT}" y="{TOP - 6}" fill="#1f2328">{escape(title)} ({escape(unit)})</text>'
               f'<text x="{LEFT}" y="{H - 6}" fill="#59636e">{_num(t0)} s</text>'
               f'<text x="{W - RIGHT}" y="{H - 6}" text-anchor="end" fill="#59636e">{_num(t1)} s</text>')
    for i, (label, pts) in enumerate(lines.items()):
        path = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in pts)
        out.append(f'<polyline fill="none" stroke="{COLOURS[i % len(COLOURS)]}" stroke-width="1.5" '
                   f'points="{path}"><title>{escape(label)}</title></polyline>')
    out.append("</svg>")
    keys = " &nbsp; ".join(f'<span style="color:{COLOURS[i % len(COLOURS)]}">&#9632;</span> {escape(label)}'
                           for i, label in enumerate(lines))
    return "".join(out) + f'<div class="note">{keys}</div>'


def observe_figure(check: CheckResult, run_dir: Path | None) -> Markup | None:
    """The charts of a check's observe findings, or None (no saved window, or not readable)."""
    window = load_recorded(run_dir, check.details.get("series"), load)
    if window is None or len(window.ticks) < 2:
        return None
    findings = [f for f in check.details.get("findings", []) if isinstance(f, Mapping)][:4]
    html = "".join(f'<figure class="chart" style="margin:4px 0">{p}</figure>'
                   for f in findings
                   if (p := panel(*signals(window, str(f.get("resource")),
                                           [str(d) for d in f.get("devices", [])]))))
    if not html:
        return None
    return Markup(html)  # noqa: S704 - built from escaped parts only


@dataclass(frozen=True)
class ObserveView:
    """What the report shows of an observe window: the primary resource, the findings, the charts."""

    primary: object
    findings: Sequence[Mapping[str, Any]]
    figure: Markup | None


def observe_view(check: CheckResult, run_dir: Path | None) -> ObserveView | None:
    """The view of a check's observe `findings` section, or None when it has none."""
    if "findings" not in check.details:
        return None
    details = check.details
    return ObserveView(details.get("primary"), details["findings"], observe_figure(check, run_dir))
