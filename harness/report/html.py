"""The self-contained HTML acceptance report: one file, inline CSS, no script, no network.

Python builds plain view rows (formatted text); the Jinja2 templates only lay them out, with
autoescape on for every template, so nothing from the machine or a tool can become markup.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.fsutil import inside
from harness.model import CheckResult, Evaluation, Metric, RunRecord, ToolRun
from harness.numfmt import digits_for, fmt_band, fmt_bytes, fmt_delta, fmt_duration, fmt_num, fmt_value
from harness.report import tplcache, views
from harness.report.drives import drive_table
from harness.report.fmt import fmt_labels, fmt_time
from harness.report.trends import history_view
from harness.report.views import Shown

if TYPE_CHECKING:
    from jinja2 import Environment

TAIL_BYTES = 64 * 1024
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def clean_text(text: str) -> str:
    """Tool text fit to show: ANSI colour codes dropped, control characters made visible as U+FFFD."""
    text = _ANSI.sub("", text.replace("\r\n", "\n"))
    return _CONTROL.sub("\ufffd", text)


# ---------------------------------------------------------------- view rows

@dataclass(frozen=True)
class Output:
    """The tail of one raw output file, or why it cannot be shown."""

    label: str
    path: str
    text: str = ""
    omitted: int = 0
    size: int = 0
    problem: str = ""


@dataclass(frozen=True)
class RunView:
    """One tool run with its shell-quoted command line and output tails."""

    run: ToolRun
    command: str
    outputs: tuple[Output, ...]


@dataclass(frozen=True)
class EvalRow:
    """One evaluation with its numbers formatted to a shared precision."""

    ev: Evaluation
    measured: str
    reference: str
    band: str
    delta: str
    matched: int


@dataclass(frozen=True)
class CheckView:
    """A check as the template shows it: expectation rows, uncovered metrics, tool runs, and the
    views of its sections (report/views.py), each included by its own template."""

    anchor: str
    result: CheckResult
    rows: tuple[EvalRow, ...]
    extra: tuple[Metric, ...]
    runs: tuple[RunView, ...]
    details: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    sections: tuple[Shown, ...] = ()


def read_tail(path: Path, limit: int = TAIL_BYTES) -> tuple[str, int, int]:
    """The last `limit` bytes of a file as text, the bytes omitted before them, and the size."""
    with path.open("rb") as f:
        size = f.seek(0, 2)
        start = max(0, size - limit)
        f.seek(start)
        data = f.read(limit)
    if start:  # do not begin mid-character or mid-line when a newline is near
        cut = data.find(b"\n", 0, 512)
        if cut >= 0:
            start, data = start + cut + 1, data[cut + 1:]
    return clean_text(data.decode("utf-8", errors="replace")), start, size


def _output(label: str, rel: str, run_dir: Path | None) -> Output:
    if not rel:
        return Output(label, rel, problem="no file recorded")
    if run_dir is None:
        return Output(label, rel, problem="not available: no run directory given")
    path = inside(run_dir, rel)
    if path is None:
        return Output(label, rel, problem="not shown: path lies outside the run directory")
    try:
        text, omitted, size = read_tail(path)
    except FileNotFoundError:
        return Output(label, rel, problem="file missing")
    except OSError as e:
        return Output(label, rel, problem=f"unreadable: {e.strerror or e}")
    return Output(label, rel, text, omitted, size)


def _covered(m: Metric, evs: Sequence[Evaluation]) -> int:
    return sum(1 for e in evs if e.metric == m.name and m.matches(e.labels))


def _row(ev: Evaluation, metrics: Sequence[Metric]) -> EvalRow:
    d = digits_for(ev.measured, (ev.reference, ev.low, ev.high))
    matched = sum(1 for m in metrics if m.name == ev.metric and m.matches(ev.labels))
    return EvalRow(ev, fmt_value(ev.measured, ev.unit, d), fmt_value(ev.reference, ev.unit, d),
                   fmt_band(ev.low, ev.high, ev.unit, d), fmt_delta(ev.delta_pct), matched)


def _check_view(i: int, c: CheckResult, run_dir: Path | None) -> CheckView:
    runs = tuple(
        RunView(t, shlex.join(t.argv), (_output("stdout", t.stdout_file, run_dir),
                                      _output("stderr", t.stderr_file, run_dir)))
        for t in c.tool_runs)

    found = views.shown(c, run_dir)
    evs = [e for e in c.evaluations if not any(sv.hides_evaluation(v.view, e) for sv, v in found)]
    extra = tuple(m for m in c.metrics if not _covered(m, c.evaluations)
                  and not any(sv.hides_metric(v.view, m) for sv, v in found))
    hidden = {k for sv, _ in found for k in sv.hides_details}
    details = tuple((str(k), inv_cell(str(k), v)) for k, v in c.details.items() if k not in hidden)
    return CheckView(f"check-{i}", c, tuple(_row(e, c.metrics) for e in evs), extra, runs,
                     details, tuple(v for _, v in found))


# ---------------------------------------------------------------- inventory

_HEADERS = {
    "name": "Name", "model": "Model", "serial": "Serial", "size_bytes": "Size", "transport": "Transport",
    "rotational": "Media", "driver": "Driver", "speed_mbps": "Speed", "state": "State", "mac": "MAC",
    "index": "#", "uuid": "UUID", "vbios": "VBIOS", "pci_bus_id": "PCI bus", "memory_bytes": "Memory",
    "mtu": "MTU", "numa_node": "NUMA node", "pci": "PCI", "ip": "IP", "ipv4": "IPv4", "ipv6": "IPv6",
}
_TABLES = {  # inventory key: (title, preferred column order)
    "gpus": ("GPUs", ("index", "name", "serial", "uuid", "driver", "vbios", "pci_bus_id")),
    "block_devices": ("Block devices",
                      ("name", "model", "serial", "size_bytes", "transport", "rotational")),
    "nics": ("Network interfaces", ("name", "driver", "speed_mbps", "state", "mac")),
}


def inv_cell(key: str, v: Any) -> str:
    """One inventory value as display text."""
    if v is None or v == "":
        return "—"
    if key == "rotational" and isinstance(v, bool):
        return "HDD" if v else "SSD"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if key.endswith("_bytes") and isinstance(v, (int, float)):
        return fmt_bytes(v)  # binary everywhere: 23.5 GiB of RAM, a 256 GiB disk
    if key == "speed_mbps" and isinstance(v, (int, float)):
        if v <= 0:
            return "—"
        return f"{fmt_num(v / 1000)} Gb/s" if v >= 1000 else f"{fmt_num(v)} Mb/s"
    if isinstance(v, float):
        return fmt_num(v)
    if isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float)) for x in v):
        return "; ".join(str(x) for x in v) or "—"
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, default=str, ensure_ascii=False)
    return str(v)


_ACRONYMS = {"pci": "PCI", "pcie": "PCIe", "gpu": "GPU", "gpus": "GPUs", "cpu": "CPU", "cpus": "CPUs",
             "numa": "NUMA", "mtu": "MTU", "os": "OS", "ip": "IP", "mac": "MAC", "nvme": "NVMe",
             "bios": "BIOS", "dmi": "DMI", "hca": "HCA", "nic": "NIC", "nics": "NICs", "id": "ID"}


def _header(key: str) -> str:
    """A key as a column or row title: 'pci_gpus' -> 'PCI GPUs', 'mtu' -> 'MTU' (never 'Mtu')."""
    if key in _HEADERS:
        return _HEADERS[key]
    words = [_ACRONYMS.get(w.lower(), w) for w in key.split("_") if w]
    text = " ".join(words) or key
    return text[:1].upper() + text[1:]


def _table(title: str, items: Sequence[Any], preferred: Sequence[str] = ()) -> dict[str, Any]:
    dicts = [x if isinstance(x, Mapping) else {"value": x} for x in items]
    keys = [k for k in preferred if any(k in d for d in dicts)]
    for d in dicts:
        keys += [str(k) for k in d if str(k) not in keys]
    return {"title": title, "headers": [_header(k) for k in keys],
            "rows": [[inv_cell(k, d.get(k)) for k in keys] for d in dicts]}


def _identity(inv: Mapping[str, Any], host: str) -> list[tuple[str, str]]:
    def sec(name: str) -> Mapping[str, Any]:
        v = inv.get(name)
        return v if isinstance(v, Mapping) else {}

    h, s, cpu, mem = sec("host"), sec("system"), sec("cpu"), sec("memory")
    out: list[tuple[str, str]] = [("Hostname", str(h.get("hostname") or host or "—"))]
    system = " ".join(str(s[k]) for k in ("vendor", "product") if s.get(k))
    for label, value in (("System", system), ("Serial number", s.get("serial")),
                         ("BIOS", s.get("bios_version")), ("OS", h.get("os")),
                         ("Kernel", h.get("kernel")), ("Architecture", h.get("arch"))):
        if value:
            out.append((label, str(value)))
    if cpu:
        parts = [f"{cpu[k]} {word}{'' if cpu[k] == 1 else 's'}"
                 for k, word in (("sockets", "socket"), ("cores", "core"), ("threads", "thread"),
                                 ("numa_nodes", "NUMA node")) if cpu.get(k) is not None]
        model = str(cpu.get("model") or "CPU")
        out.append(("CPU", model + (f" — {', '.join(parts)}" if parts else "")))
    if mem.get("total_bytes") is not None:
        out.append(("Memory", inv_cell("total_bytes", mem["total_bytes"])))
    shown = {"host": {"hostname", "os", "kernel", "arch"}, "system": {"vendor", "product", "serial",
             "bios_version"}, "cpu": {"model", "sockets", "cores", "threads", "numa_nodes"},
             "memory": {"total_bytes"}}
    extra = {("system", "board_serial"): "Board serial", ("cpu", "online"): "CPUs online"}
    for name, keys in shown.items():
        out += [(extra.get((name, str(k)), f"{name}.{k}"), inv_cell(str(k), v))
                for k, v in sec(name).items() if k not in keys]
    return out


def inventory_view(inv: Mapping[str, Any], host: str) -> dict[str, Any]:
    """Identity pairs, device tables and key/value sections from whatever inventory keys exist."""
    tables, sections = [], []
    done = {k for k in ("host", "system", "cpu", "memory") if isinstance(inv.get(k), Mapping)}
    for key, (title, cols) in _TABLES.items():
        items = inv.get(key)
        if isinstance(items, (list, tuple)):
            done.add(key)
            if items:
                tables.append(_table(title, items, cols))
    identity = _identity(inv, host)
    for key, v in inv.items():
        if key in done:
            continue
        if isinstance(v, Mapping):
            sections.append({"title": _header(str(key)),
                             "pairs": [(str(k), inv_cell(str(k), x)) for k, x in v.items()]})
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, Mapping) for x in v):
            tables.append(_table(_header(str(key)), v))
        else:
            identity.append((_header(str(key)), inv_cell(str(key), v)))
    return {"identity": identity, "tables": tables, "sections": sections}


# ---------------------------------------------------------------- page one

_WORST = {"fail": 0, "error": 1, "warn": 2}


def findings(record: RunRecord) -> list[tuple[str, str, str]]:
    """What failed, errored or warned, by name, worst first: (outcome, 'check · metric{labels}',
    why) for each such rule, and a check that errored or warned without one."""
    out: list[tuple[str, str, str]] = []
    for c in record.checks:
        bad = [e for e in c.evaluations if e.outcome.value in _WORST]
        out += [(e.outcome.value, f"{c.id} · {e.metric}{fmt_labels(e.labels)}", e.message) for e in bad]
        if not bad and c.status.value in ("errored", "warned"):
            out.append(("error" if c.status.value == "errored" else "warn", c.id, c.message))
    return sorted(out, key=lambda f: _WORST[f[0]])


# ---------------------------------------------------------------- rendering

@lru_cache(maxsize=4)
def _environment(cache_parent: Path | None = None) -> Environment:
    import jinja2  # start-up: Jinja2 loads only when a report is rendered

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.report", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        bytecode_cache=tplcache.bytecode_cache(cache_parent),
    )
    env.filters.update(num=fmt_num, value=fmt_value, duration=fmt_duration, time=fmt_time,
                       bytes=fmt_bytes)
    return env


def load_template(cache_parent: Path | None) -> Any:
    """Jinja2 and the report's template (compiled, from the cache under `cache_parent` when there),
    loaded now: render_html of a run directory in `cache_parent` then finds them loaded."""
    return _environment(cache_parent).get_template("report.html.j2")


def render_html(record: RunRecord, run_dir: Path | None) -> str:
    """The whole report as one self-contained HTML document."""

    checks = [_check_view(i, c, run_dir) for i, c in enumerate(record.checks)]
    # the output directory holds the compiled-template cache (run dirs live directly in it)
    cache_parent = run_dir.parent if run_dir is not None else None
    return load_template(cache_parent).render(
        record=record, verdict=record.verdict, counts=record.counts, checks=checks,
        inventory=inventory_view(record.inventory, record.host), tail_kib=TAIL_BYTES // 1024,
        history=history_view(record), drives=drive_table(record), findings=findings(record),
    )
