"""fleet.html: one self-contained page (inline CSS and SVG, no script, no network).

Python computes every number, colour and coordinate; the Jinja2 template (autoescape on) only
lays them out, so no node name, reason or label from a run can become markup.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape

from harness.fleet.analysis import FleetReport, natural
from harness.fleet.collect import NodeOutcome, NodeStatus
from harness.fleet.stats import Outlier, SeriesKey
from harness.numfmt import fmt_num, fmt_value
from harness.report import tplcache
from harness.report.fmt import fmt_time

if TYPE_CHECKING:
    from jinja2 import Environment

MAX_HEAT_COLUMNS = 30
MAX_PLOTS = 24
CELL, ROW = 16, 14
PLOT_W, PLOT_H = 520, 46
# on paper the heatmap is a table: values printed in its cells up to this many columns (A4 portrait
# holds about ten values of 9 characters beside a node name), healthy nodes listed up to this many
PRINT_VALUE_COLUMNS = 10
PRINT_HEALTHY_ROWS = 40
# the legend: how far worse than the median, and its colour
LEGEND = (0.0, 0.05, 0.10, 0.20)


@dataclass(frozen=True)
class HeatCell:
    x: int
    fill: str
    title: str
    value: str = ""  # printed in the cell on paper ('' when the node has none)


@dataclass(frozen=True)
class HeatRow:
    node: str
    status: str
    y: int
    cells: tuple[HeatCell, ...]

    def svg(self) -> Markup:
        """The row on screen: the node's name and a coloured cell a column, each with its title."""
        cells = "".join(f'<rect x="{130 + c.x}" y="0" width="{CELL - 2}" height="{ROW - 2}" '
                        f'fill="{escape(c.fill)}"><title>{escape(c.title)}</title></rect>'
                        for c in self.cells)
        text = (f'<g transform="translate(0,{self.y + ROW})"><text x="0" y="{ROW - 3}">'
                f"{escape(self.node[:18])}</text>\n{cells}</g>\n")
        return Markup(text)  # noqa: S704 - every text in it escaped

    def paper(self, values: bool) -> Markup:
        """The row on paper: name, status and a cell a column, with its value when `values`."""
        cells = "".join(f'<td class="num" style="background:{escape(c.fill)}">'
                        f'{escape(c.value or "—") if values else ""}</td>' for c in self.cells)
        status = escape(self.status)
        text = (f'<tr><td class="mono">{escape(self.node)}</td><td class="st {status}">{status}</td>'
                f"{cells}</tr>\n")
        return Markup(text)  # noqa: S704 - every text in it escaped


@dataclass(frozen=True)
class Heatmap:
    columns: tuple[tuple[int, str], ...]  # x, series text
    rows: Sequence[HeatRow]  # built as they are rendered (HeatRows): 10,000 nodes hold none
    width: int
    height: int

    def svg_rows(self) -> Iterator[Markup]:
        return (row.svg() for row in self.rows)

    def paper_rows(self, values: bool) -> Iterator[Markup]:
        return (row.paper(values) for row in self.rows)


@dataclass(frozen=True)
class Dot:
    x: float
    node: str
    value: str
    outlier: bool


@dataclass(frozen=True)
class Plot:
    title: str
    better: str
    median_x: float
    dots: tuple[Dot, ...]
    low: str
    high: str
    median: str

    def marks(self) -> Markup:
        """Every node as a tick on the line, outliers as red dots, each with its title."""
        mid = PLOT_H // 2
        text = "".join(
            f'<circle cx="{d.x}" cy="{mid}" r="5" fill="#cf222e"><title>{escape(d.node)}: {escape(d.value)} '
            "(outlier)</title></circle>" if d.outlier else
            f'<line x1="{d.x}" y1="{mid - 7}" x2="{d.x}" y2="{mid + 7}" stroke="#57606a" stroke-opacity=".5">'
            f"<title>{escape(d.node)}: {escape(d.value)}</title></line>" for d in self.dots)
        return Markup(text)  # noqa: S704 - every text in it escaped


def badness(value: float, median: float, better: str) -> float:
    """How much worse than the fleet median, as a fraction of it (0 when not worse)."""
    if median == 0:
        return 0.0 if value == 0 else 1.0
    rel = (value - median) / abs(median)
    if better == "higher":
        return max(0.0, -rel)
    if better == "lower":
        return max(0.0, rel)
    return abs(rel)


def colour(bad: float) -> str:
    """White-green at the median to deep red at 20 % or more on the bad side."""
    t = min(1.0, bad / 0.20)
    if t <= 0.0:
        return "#e8f5e9"
    r, g, b = 255, int(235 - 190 * t), int(230 - 190 * t)
    return f"#{r:02x}{g:02x}{b:02x}"


def heat_columns(report: FleetReport) -> list[SeriesKey]:
    """Series worth a column: those with outliers first, then those any node failed on."""
    keys: dict[SeriesKey, None] = {}
    for o in report.outliers:
        keys.setdefault(o.key, None)
    failed = {(e.check, e.what) for n in report.nodes for e in n.evidence if e.kind == "failed"}
    for k in sorted(report.series):
        lab = ",".join(f"{a}={b}" for a, b in k.labels)
        if (k.check, k.metric + (f"{{{lab}}}" if lab else "")) in failed:
            keys.setdefault(k, None)
    return list(keys)[:MAX_HEAT_COLUMNS]


def heatmap(report: FleetReport, nodes: Sequence[NodeOutcome], columns: Sequence[SeriesKey],
            medians: Mapping[SeriesKey, float],
            values: Mapping[SeriesKey, Mapping[str, float]] | None = None) -> Heatmap:
    """`values`: the columns' series, when the caller has them at hand (else from the report)."""
    vals = values if values is not None else {k: report.series[k] for k in columns}
    rows = HeatRows(report, tuple(nodes), tuple(columns), medians, vals)
    cols = tuple((j * CELL, k.text()) for j, k in enumerate(columns))
    return Heatmap(cols, rows, max(1, len(columns)) * CELL, max(1, len(nodes)) * ROW)


class HeatRows(Sequence[HeatRow]):
    """A heatmap's rows, each built when it is read: the page renders them as they come, so memory
    does not grow with the nodes (a fleet of 10,000 would hold some 100 MB of cells)."""

    def __init__(self, report: FleetReport, nodes: tuple[NodeOutcome, ...], columns: tuple[SeriesKey, ...],
                 medians: Mapping[SeriesKey, float], values: Mapping[SeriesKey, Mapping[str, float]]):
        self._report, self._nodes, self._columns = report, nodes, columns
        self._medians, self._values = medians, values
        self._texts = [k.text() for k in columns]
        self._median_texts = [fmt_value(medians[k], k.unit) for k in columns]

    def __len__(self) -> int:
        return len(self._nodes)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return tuple(self._row(j) for j in range(*i.indices(len(self._nodes))))
        return self._row(range(len(self._nodes))[i])

    def __iter__(self) -> Iterator[HeatRow]:
        return (self._row(i) for i in range(len(self._nodes)))

    def _row(self, i: int) -> HeatRow:
        n, medians, better = self._nodes[i], self._medians, self._report.better
        cells = []
        for j, k in enumerate(self._columns):
            v = self._values[k].get(n.node)
            if v is None:
                cells.append(HeatCell(j * CELL, "#eeeeee", f"{n.node} {self._texts[j]}: no value"))
                continue
            b = badness(v, medians[k], better[k])
            shown = fmt_value(v, k.unit)
            cells.append(HeatCell(j * CELL, colour(b), f"{n.node} {self._texts[j]}: {shown} "
                                  f"(fleet median {self._median_texts[j]})", shown))
        return HeatRow(n.node, n.status.value, i * ROW, tuple(cells))


def legend() -> list[tuple[str, str]]:
    """(colour, words) of the heatmap's scale, at the median to 20 % or more worse, and no value."""
    words = ["at the median", *(f"{t * 100:.0f} % worse" for t in LEGEND[1:-1]),
             f"{LEGEND[-1] * 100:.0f} % or more worse"]
    return [*zip([colour(t) for t in LEGEND], words, strict=True), ("#eeeeee", "no value")]


def plot(key: SeriesKey, values: Mapping[str, float], outliers: set[str], better: str,
         median: float, rank: Mapping[str, int] | None = None) -> Plot:
    """A strip plot of one series: every node a tick, outliers in red, the median as a line.
    `rank`: each node's place in natural order, when the caller has it (else worked out here)."""
    if rank is None:
        rank = {n: i for i, n in enumerate(sorted(values, key=natural))}
    lo, hi = min(values.values()), max(values.values())
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return round(10 + (PLOT_W - 20) * (v - lo) / span, 1)

    dots = tuple(Dot(x(v), n, fmt_value(v, key.unit), n in outliers)
                 for n, v in sorted(values.items(), key=lambda kv: (kv[0] in outliers, rank[kv[0]])))
    return Plot(f"{key.text()} [{key.sku}]", better, x(median), dots, fmt_value(lo, key.unit),
                fmt_value(hi, key.unit), fmt_value(median, key.unit))


def outlier_row(o: Outlier) -> dict[str, str]:
    dev = o.deviation_pct
    return {"node": o.node, "series": o.key.text(), "sku": o.key.sku, "value": fmt_value(o.value, o.key.unit),
            "median": fmt_value(o.median, o.key.unit), "dev": "—" if dev is None else f"{dev:+.1f} %",
            "z": f"{o.z:+.1f}", "n": str(o.n), "better": o.better}


def _medians(values: Mapping[SeriesKey, Mapping[str, float]]) -> dict[SeriesKey, float]:
    return {k: median(v.values()) for k, v in values.items()}


def cache_parent() -> Path | None:
    """Where the fleet's compiled templates are kept between reports: the invoking user's cache
    ($XDG_CACHE_HOME or ~/.cache, then harness/), never the fleet directory, which nodes write to
    (compiled code from there would run as the reporting user). None when there is no home."""
    home = os.path.expanduser("~/.cache") if "HOME" in os.environ else ""
    base = os.environ.get("XDG_CACHE_HOME") or home
    if not base or not os.path.isabs(base):
        return None
    parent = Path(base) / "harness"
    try:
        parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return parent


@lru_cache(maxsize=1)
def _environment() -> Environment:
    import jinja2  # start-up: Jinja2 loads only when a report is rendered

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.fleet", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        bytecode_cache=tplcache.bytecode_cache(cache_parent()),  # compiling them costs ~0.25 s
    )
    env.filters.update(num=fmt_num, time=fmt_time)
    return env


def render_html(report: FleetReport) -> str:
    """The fleet report as one HTML document."""
    return "".join(html_chunks(report))


def html_chunks(report: FleetReport) -> Iterator[str]:
    """render_html in pieces, to be written as they come (10,000 nodes make some 30 MB)."""
    flagged = set(report.outlier_nodes)
    attention = [n for n in report.nodes if n.status is not NodeStatus.ACCEPTED or n.node in flagged]
    healthy = [n for n in report.nodes if n.status is NodeStatus.ACCEPTED and n.node not in flagged]
    columns = heat_columns(report)
    plot_keys: list[SeriesKey] = []
    for o in report.outliers:
        if o.key not in plot_keys and len(plot_keys) < MAX_PLOTS:
            plot_keys.append(o.key)
    # the few series drawn, each as {node: value} once (report.series may build them on demand)
    values = {k: report.series[k] for k in dict.fromkeys([*columns, *plot_keys])}
    medians = _medians(values)
    rank = {name: i for i, name in enumerate(sorted({n.node for n in report.nodes}, key=natural))}
    by_key: dict[SeriesKey, set[str]] = {}
    for o in report.outliers:
        by_key.setdefault(o.key, set()).add(o.node)
    ctx: dict[str, Any] = {
        "r": report, "verdict": report.verdict, "counts": report.counts,
        "drain": report.to_drain, "attention": attention, "healthy": healthy,
        "errored": [n for n in report.nodes if n.status is NodeStatus.ERRORED],
        "untested": [n for n in report.nodes if n.status is NodeStatus.UNTESTED],
        "waiting": [n for n in report.nodes
                    if n.status in (NodeStatus.PENDING, NodeStatus.RUNNING, NodeStatus.INCOMPLETE)],
        "outliers": [outlier_row(o) for o in report.outliers],
        "outliers_by_node": {n: len(report.outliers_of(n)) for n in flagged},
        "heat_attention": heatmap(report, attention, columns, medians, values) if columns else None,
        "heat_healthy": heatmap(report, healthy, columns, medians, values) if columns and healthy else None,
        "plots": [plot(k, values[k], by_key[k], report.better[k], medians[k], rank) for k in plot_keys],
        "plot_w": PLOT_W, "plot_h": PLOT_H, "cell": CELL, "rowh": ROW,
        "heat_units": [k.unit for k in columns], "legend": legend(),
        "print_values": len(columns) <= PRINT_VALUE_COLUMNS,
        "print_healthy": len(healthy) <= PRINT_HEALTHY_ROWS,
        "rejected": [n for n in report.nodes if n.status is NodeStatus.REJECTED],
    }
    return _environment().get_template("fleet.html.j2").generate(**ctx)
