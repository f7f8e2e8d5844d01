"""What `harness history` and `harness compare` print: data as dicts, then tables.

Tables are rich tables on a terminal and plain aligned text otherwise (CI logs, pipes).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness import results
from harness.errors import UsageError
from harness.history.drift import SeriesKey, collapse
from harness.history.identity import changes
from harness.history.record import KEY_METRICS, store_path
from harness.history.store import Store, open_store, problems_text
from harness.model import RunRecord
from harness.numfmt import fmt_value

KEY_COLUMNS = 4


def open_existing(history: str | Path | None) -> Store:
    """The store named by --history / $HARNESS_HISTORY, else the node's default; it must exist."""
    path = store_path(None, history)
    if path is None:
        raise UsageError("history is switched off (HARNESS_HISTORY=off)")
    if not path.is_file():
        raise UsageError(f"no history store at {path} (give --history PATH or set HARNESS_HISTORY)")
    return open_store(path)


def nodes_data(store: Store) -> list[dict[str, Any]]:
    out = []
    for n in store.nodes():
        runs = store.runs(n.node_id)
        out.append({"node_id": n.node_id, "name": n.name, "system_serial": n.system_serial,
                    "runs": len(runs), "first_seen": n.first_seen, "last_seen": n.last_seen,
                    "last_verdict": runs[-1].verdict if runs else None})
    return out


def node_data(store: Store, query: str) -> dict[str, Any]:
    """A node's runs (oldest first) with key metric values, and its hardware/software events."""
    node = store.find_node(query)
    if node is None:
        known = ", ".join(n.name for n in store.nodes()) or "none yet"
        raise UsageError(f"no node {query!r} in {store.path} (known: {known})")
    runs = store.runs(node.node_id)
    metrics = store.metrics([r.run_id for r in runs])
    # a series as the store keys it: a check run with other parameters (fio for 4 s in smoke, 10 s
    # in quarterly) is another series, not the same column
    per_run = [collapse(metrics[r.run_id], None, r.params) for r in runs]
    keys = _key_series(per_run)
    suites: dict[SeriesKey, list[str]] = {k: [] for k in keys}
    for r, series in zip(runs, per_run, strict=True):
        for k in keys:
            if k in series and r.suite not in suites[k]:
                suites[k].append(r.suite)
    twins = Counter((k.check, k.metric, k.labels) for k in keys)
    units = {k: next((series[k][1] for series in per_run if k in series), "") for k in keys}
    events = []
    for a, b in pairwise(runs):
        events += [{"run_id": b.run_id, "started": b.started, **c.to_dict()}
                   for c in changes(a.identity, b.identity)]
    return {
        "node": {"node_id": node.node_id, "name": node.name, "system_serial": node.system_serial,
                 "first_seen": node.first_seen, "last_seen": node.last_seen},
        "key_metrics": [{"check": k.check, "metric": k.metric, "labels": k.label_dict, "params": k.params,
                         "suites": suites[k], "twins": twins[(k.check, k.metric, k.labels)],
                         "unit": units[k]}
                        for k in keys],
        "runs": [{"run_id": r.run_id, "started": r.started, "hostname": r.hostname, "suite": r.suite,
                  "profile": r.profile, "verdict": r.verdict, "run_dir": r.run_dir,
                  "gpus": len(r.identity.gpus),
                  "values": [series.get(k, (None, ""))[0] for k in keys]}
                 for r, series in zip(runs, per_run, strict=True)],
        "events": events,
    }


def _key_series(per_run: Sequence[dict[SeriesKey, tuple[float, str]]]) -> list[SeriesKey]:
    seen: dict[SeriesKey, int] = {}
    for series in per_run:
        for k in series:
            seen[k] = seen.get(k, 0) + 1
    ranked = sorted(((KEY_METRICS.index(k.metric), -n, k.text(), k.params), k) for k, n in seen.items()
                    if k.metric in KEY_METRICS)  # twins (same text, other params) never compare keys
    return [k for _, k in ranked[:KEY_COLUMNS]]


def _num(v: float | None, unit: str) -> str:
    """A table cell: the value with its unit, as compare prints it (594 MB/s, 40,523 IOPS, 36.96 ms)."""
    return fmt_value(v, unit, 4)


def render_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]],
                 right: Sequence[int] = (), wrap: Sequence[int] = ()) -> str | None:
    """Plain aligned text; on a terminal, prints a rich table itself (only `wrap` columns fold)."""
    if sys.stdout.isatty():
        from rich.console import Console  # start-up: rich loads only on a terminal
        from rich.table import Table

        t = Table(title=title, title_justify="left")
        for i, h in enumerate(headers):
            cells = max((len(r[i]) for r in rows), default=0)
            t.add_column(h, justify="right" if i in right else "left", no_wrap=i not in wrap,
                         overflow="fold" if i in wrap else "ellipsis",
                         min_width=cells if i in right else None)
        for r in rows:
            t.add_row(*r)
        Console().print(t)
        return None
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join([title, line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def show_nodes(data: list[dict[str, Any]]) -> list[str | None]:
    rows = [[str(n["node_id"]), n["name"], n["system_serial"] or "—", str(n["runs"]), n["first_seen"][:10],
             n["last_seen"][:10], n["last_verdict"] or "—"] for n in data]
    return [render_table("nodes", ["id", "node", "system serial", "runs", "first", "last", "last verdict"],
                         rows, right=(0, 3), wrap=(1, 2))]


def show_node(data: dict[str, Any]) -> list[str | None]:
    n = data["node"]
    heads = [" ".join([k["metric"], "/".join(str(v) for v in k["labels"].values())]).strip()
             + (f" ({', '.join(k['suites'])})" if k.get("twins", 1) > 1 else "")
             for k in data["key_metrics"]]
    rows = [[r["started"].replace("T", " ")[:16], r["run_id"], r["suite"], r["verdict"],
             *(_num(v, k.get("unit", "")) for v, k in zip(r["values"], data["key_metrics"], strict=True))]
            for r in data["runs"]]
    title = f"node {n['name']} (id {n['node_id']}, system serial {n['system_serial'] or 'unknown'})"
    out = [render_table(title, ["started", "run", "suite", "verdict", *heads], rows,
                        right=tuple(range(4, 4 + len(heads))), wrap=(1, *range(4, 4 + len(heads))))]
    if data["events"]:
        ev = [[e["started"].replace("T", " ")[:16], e["run_id"], e["kind"], e["detail"]]
              for e in data["events"]]
        out.append(render_table("events", ["when", "run", "what", "detail"], ev, wrap=(1, 3)))
    return out


def load_run(ref: str, history: str | Path | None) -> RunRecord:
    """A run directory (or its results.json), or a run id found in the history store."""
    p = Path(ref)
    if p.exists():
        return results.load(p)
    path = store_path(None, history)
    if path is not None and path.is_file():
        store = open_store(path)
        try:
            row = store.run(ref)
        finally:
            store.close()
            warn_problems(store)
        if row is not None and row.run_dir and Path(row.run_dir).exists():
            return results.load(Path(row.run_dir))
    raise UsageError(f"{ref}: neither a run directory nor a run id in the history store")


_WARNED: set[str] = set()


def warn_problems(store: Store) -> None:
    """The one warning line naming the rows `store` skipped as unreadable, if any, on stderr
    (once per command, however often the store was opened)."""
    if (note := problems_text(store)) and note not in _WARNED:
        _WARNED.add(note)
        print(f"warning: {note}", file=sys.stderr)
