"""Writing rows as CSV, JSON Lines or Parquet (pyarrow, imported only for Parquet).

Every format has the same columns in the same order: the fixed ones with the label columns
after `metric`. Times stay ISO 8601 UTC text in CSV and JSON Lines and are timestamps in
Parquet; a value that is not finite is empty (CSV) or null. A CSV cell that starts like a
spreadsheet formula is written with a leading "'" (cell). A file is written to a new temporary
file beside it (O_EXCL|O_NOFOLLOW) and renamed over it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import IO, Any, BinaryIO

from harness.errors import StorageError, ToolMissing, UsageError
from harness.export.rows import Row, columns, fit
from harness.export.sources import Source
from harness.fsutil import atomic_write_with

FORMATS = ("csv", "jsonl", "parquet")
BATCH = 50_000  # Parquet rows per written batch: memory stays flat in the fleet size
ANALYSIS_HINT = "pip install 'gpu-acceptance-harness[analysis]'"


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula


def cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet cannot run: text starting like a formula ('=cmd|...', '@SUM',
    '-2+3') gets a leading "'" (as OWASP advises for CSV injection); a number as text stays."""
    if not isinstance(value, str) or not value.startswith(FORMULA_START):
        return value
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value


def write_csv(source: Source, out: IO[str]) -> int:
    cols = columns(source())
    known = frozenset(cols)
    w = csv.DictWriter(out, cols, restval="", lineterminator="\n")
    # the csv module quotes a field for '\n' but not for a bare '\r' (a line end to readers): a
    # row holding one is written with every field quoted
    quoted = csv.DictWriter(out, cols, restval="", lineterminator="\n", quoting=csv.QUOTE_ALL)
    w.writerow({c: cell(c) for c in cols})
    n = 0
    for row in source():
        cells = {**{k: cell(v) for k, v in fit(row, cols, known).items()},
                 "value": "" if _finite(row["value"]) is None else repr(row["value"])}
        cr = any(isinstance(v, str) and "\r" in v for v in cells.values())
        (quoted if cr else w).writerow(cells)
        n += 1
    return n


def write_jsonl(source: Source, out: IO[str]) -> int:
    cols = columns(source())
    known = frozenset(cols)
    n = 0
    for raw in source():
        row = fit(raw, cols, known)
        doc = {c: row.get(c) for c in cols}
        doc["value"] = _finite(row["value"])
        out.write(json.dumps(doc, allow_nan=False, ensure_ascii=False) + "\n")
        n += 1
    return n


def arrow() -> Any:
    """pyarrow (with pyarrow.parquet loaded), or ToolMissing with the extra that installs it."""
    try:
        import pyarrow  # start-up: optional ([analysis] extra), loaded only when Parquet is written
        import pyarrow.parquet  # the submodule is not loaded with pyarrow
    except ImportError as e:
        raise ToolMissing(f"Parquet needs pyarrow: {ANALYSIS_HINT}") from e
    return pyarrow


def arrow_schema(cols: Iterable[str]) -> Any:
    pa = arrow()
    types = {"value": pa.float64(), "time": pa.timestamp("us", tz="UTC")}
    return pa.schema([(c, types.get(c, pa.string())) for c in cols])


def arrow_batch(rows: list[Row], schema: Any) -> Any:
    """A record batch of rows; times parsed from ISO 8601 ('' is null)."""
    pa = arrow()
    data: dict[str, list[Any]] = {c: [] for c in schema.names}
    known = frozenset(schema.names)
    for raw in rows:
        r = fit(raw, schema.names, known)
        for c in schema.names:
            v: Any = r.get(c)
            if c == "time":
                v = datetime.fromisoformat(v.replace("Z", "+00:00")) if v else None
            elif c == "value":
                v = _finite(r["value"])
            data[c].append(v)
    return pa.RecordBatch.from_pydict(data, schema=schema)


def write_parquet(source: Source, path: str | BinaryIO) -> int:
    pq = arrow().parquet
    schema = arrow_schema(columns(source()))
    n = 0
    with pq.ParquetWriter(path, schema) as w:
        batch: list[Row] = []
        for row in source():
            batch.append(row)
            if len(batch) >= BATCH:
                w.write_batch(arrow_batch(batch, schema))
                n, batch = n + len(batch), []
        if batch or not n:
            w.write_batch(arrow_batch(batch, schema))
            n += len(batch)
    return n


def fmt_for(fmt: str | None, output: Path | None) -> str:
    """The format asked for, else the output file's suffix, else csv; UsageError for a suffix that
    names no format (`-o rows.xlsx` would be CSV under a spreadsheet's name)."""
    if fmt:
        return fmt
    suffix = output.suffix.lstrip(".") if output is not None else ""
    if suffix and suffix.lower() not in FORMATS:
        known = ", ".join(f".{f}" for f in FORMATS)
        raise UsageError(f"--output {output}: no export format has the extension .{suffix}; name the "
                         f"file {known}, or give --format")
    return suffix.lower() or "csv"


def export(source: Source, fmt: str, output: Path | None, stdout: IO[str]) -> int:
    """Write the rows to `output` (replaced atomically: a reader never sees half) or to stdout."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    if output is None:
        if fmt == "parquet":
            raise UsageError("--format parquet writes a file: give --output FILE.parquet")
        return (write_csv if fmt == "csv" else write_jsonl)(source, stdout)
    if output.is_dir():
        raise UsageError(f"--output {output} is a directory; give a file")
    written: list[int] = []

    def fill(f: BinaryIO) -> None:  # into a new temporary file (O_EXCL|O_NOFOLLOW), renamed over
        if fmt == "parquet":
            written.append(write_parquet(source, f))
            return
        text = io.TextIOWrapper(f, encoding="utf-8", newline="")
        written.append((write_csv if fmt == "csv" else write_jsonl)(source, text))
        text.flush()
        text.detach()

    try:
        atomic_write_with(output, fill, durable=False)
    except OSError as e:  # pyarrow's own writes
        raise StorageError(f"cannot write {output}: {e.strerror or e}") from e
    return written[0]
