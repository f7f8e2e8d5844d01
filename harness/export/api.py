"""Runs, fleets and history as pandas DataFrames: one row per metric value.

    from harness.export import api
    df = api.load_run("reports/gpu001-20261129T100000Z")
    df = api.load_fleet("fleet/2026-q4")          # each node's latest run
    df = api.load_history("/var/lib/harness/history.sqlite", node="gpu001")
    df = api.read("metrics.parquet")              # what `harness export` wrote (csv, jsonl, parquet)

Columns: node, serial, run, time (datetime64, UTC), suite, profile, check, kind, metric, the
labels (one column each, text), value (float64), unit, status, outcome, verdict. pandas is
imported here only (`pip install 'gpu-acceptance-harness[analysis]'`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import ToolMissing, UsageError
from harness.export import sources
from harness.export.rows import columns
from harness.export.sources import Source
from harness.export.write import ANALYSIS_HINT
from harness.history.store import open_store


def _pandas() -> Any:
    try:
        import pandas  # start-up: optional ([analysis] extra), loaded only when a frame is made
    except ImportError as e:
        raise ToolMissing(f"harness.export.api needs pandas: {ANALYSIS_HINT}") from e
    return pandas


def typed(df: Any) -> Any:
    """The frame with the export's dtypes: time datetime64[UTC], value float64, every other column text."""
    pd = _pandas()
    if "time" in df:
        df["time"] = pd.to_datetime(df["time"], utc=True, format="ISO8601")
    if "value" in df:
        df["value"] = df["value"].astype("float64")
    for c in df.columns:
        if c not in ("time", "value"):
            df[c] = df[c].astype("string")
    return df


def frame(source: Source) -> Any:
    """A DataFrame of a source's rows, with the export's columns and dtypes."""
    pd = _pandas()
    cols = columns(source())
    return typed(pd.DataFrame.from_records(list(source()), columns=cols))


def load_run(run_dir: str | Path) -> Any:
    """One run directory's metric values."""
    return frame(sources.run_source(Path(run_dir)))


def load_fleet(fleet_dir: str | Path) -> Any:
    """Each node's latest run in a fleet directory or results volume (nodes without a readable run are
    left out)."""
    return frame(sources.fleet_source(Path(fleet_dir), []))


def load_history(store_path: str | Path, node: str | None = None) -> Any:
    """Every run in a history store, or one node's (hostname, serial or store id)."""
    path = Path(store_path)
    if not path.is_file():
        raise UsageError(f"no history store at {path}")
    store = open_store(path)
    try:
        return frame(sources.history_source(store, node))
    finally:
        store.close()


def read(path: str | Path) -> Any:
    """A file `harness export` wrote (by its suffix: .csv, .jsonl, .parquet), with the export's dtypes."""
    pd = _pandas()
    p = Path(path)
    if p.suffix == ".parquet":
        return typed(pd.read_parquet(p))
    if p.suffix in (".jsonl", ".json"):
        return typed(pd.read_json(p, lines=True, dtype=False))
    if p.suffix == ".csv":
        # an empty cell is a missing label (CSV cannot tell it from an empty one); "NA" stays text
        text = {c: "string" for c in pd.read_csv(p, nrows=0).columns if c != "value"}
        return typed(pd.read_csv(p, dtype={**text, "value": "float64"}, keep_default_na=False,
                                 na_values=[""]))
    raise UsageError(f"{p}: not a .csv, .jsonl or .parquet file")
