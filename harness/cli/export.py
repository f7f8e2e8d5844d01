"""`harness export`: metric values of a run, a fleet or the history store as a table."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from harness.errors import UsageError


@click.command("export")
@click.argument("source", required=False)
@click.option("--history", "from_history", is_flag=True,
              help="export the history store instead: every run, or SOURCE's (a node: hostname, "
                   "serial or id)")
@click.option("--store", type=click.Path(dir_okay=False, path_type=Path), envvar="HARNESS_HISTORY",
              help="with --history: the store (default: $HARNESS_HISTORY, else the node's store)")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl", "parquet"]),
              help="default: from the --output suffix, else csv")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="file to write (default: standard output; Parquet needs a file)")
def export(source: str | None, from_history: bool, store: Path | None, fmt: str | None,
           output: Path | None) -> None:
    """Write one row per metric value of SOURCE (a run or fleet directory, or a results volume) as CSV,
    JSON Lines or Parquet.

    Columns: node, serial, run, time, suite, profile, check, kind, metric, one column per label,
    value, unit, status, outcome, verdict. In pandas: harness.export.api.read(FILE).
    """
    # start-up: the export and its sources load only for this command, not for `harness --help`
    from harness.export import sources, write

    fmt = write.fmt_for(fmt, output)
    problems: list[str] = []
    if from_history:
        from harness.history import view  # start-up: the history store loads only with --history

        db = view.open_existing(store)
        try:
            n = write.export(sources.history_source(db, source), fmt, output, sys.stdout)
        finally:
            db.close()
            view.warn_problems(db)
    elif source is None:
        raise UsageError("give a run or fleet directory, or --history [NODE]")
    else:
        n = write.export(sources.path_source(Path(source), problems), fmt, output, sys.stdout)
    for p in problems:
        click.echo(f"warning: {p}", err=True)
    if output is not None:
        click.echo(f"{n} rows: {output}", err=True)
