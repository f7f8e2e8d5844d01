"""Commands for baselines and history: `baseline capture`, `history [NODE]`, `history import`,
`compare RUN_A RUN_B`. Thin like cli.py: the work is in harness.history.baseline, history and runcompare.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from harness.errors import ConfigError, ConfigProblem, UsageError

HISTORY_OPTION = click.option(
    "--history", "history", type=click.Path(dir_okay=False, path_type=Path), envvar="HARNESS_HISTORY",
    help="history store (default: $HARNESS_HISTORY, else the node's store: "
         "/var/lib/harness/history.sqlite as root, ~/.local/state/harness/history.sqlite otherwise)")


class _DefaultGroup(click.Group):
    """A group whose first argument is a subcommand when it names one, else an argument of `show`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args = ["show", *args]
        return super().parse_args(ctx, args)


@click.group()
def baseline() -> None:
    """Capture profiles from golden runs."""


@baseline.command("capture")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--name", required=True, help="profile name")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="profile file to write (default: profiles/NAME.yaml)")
@click.option("--extends", help="profile (name or file) this baseline overrides")
@click.option("--force", is_flag=True, help="replace an existing output file")
@click.option("--tails", type=click.Choice(["warn", "fail"]), default="warn", show_default=True,
              help="severity of latency-tail rules (p99, p99.9): they scatter more than throughput")
def capture(run_dirs: tuple[Path, ...], name: str, output: Path | None, extends: str | None,
            force: bool, tails: str) -> None:
    """Write a profile from the metrics of one or more accepted RUN_DIRS."""
    # start-up: config, results and history load only for this command, not for `harness --help`
    from harness import config, results
    from harness.history import baseline as bl

    out = output or Path("profiles") / f"{name}.yaml"
    if extends:
        config.load_profile(extends)  # a broken parent is an input error before any writing
        extends = bl.extends_value(extends, out)
    if out.suffix not in (".yaml", ".yml"):
        raise UsageError(f"{out}: a profile file ends in .yaml")
    captured = bl.capture([results.load(d) for d in run_dirs], name, extends, tails=tails)
    bl.write(captured, out, force=force)
    for warning in captured.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"wrote {out}: {len(captured.doc['expectations'])} expectation(s) from "
               f"{len(run_dirs)} run(s); {len(captured.skipped)} series not baselined (listed in the file)")


@click.group(cls=_DefaultGroup)
def history() -> None:
    """Runs of a node over time (`history [NODE]`), `history import RUN_DIR...`, or
    `history pin RUN --as go-live`."""


@history.command("show")
@click.argument("node", required=False)
@HISTORY_OPTION
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def show(node: str | None, history: Path | None, as_json: bool) -> None:
    """List nodes, or NODE's runs (hostname, serial or id) with verdicts and key metrics."""
    from harness.history import view as hv  # start-up: history loads only for this command

    store = hv.open_existing(history)
    try:
        data: Any = hv.node_data(store, node) if node else hv.nodes_data(store)
    finally:
        store.close()
        hv.warn_problems(store)
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    for text in (hv.show_node(data) if node else hv.show_nodes(data)):
        if text is not None:
            click.echo(text)
            click.echo("")


@history.command("import")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@HISTORY_OPTION
def import_cmd(run_dirs: tuple[Path, ...], history: Path | None) -> None:
    """Add existing run directories to the history store (created when missing)."""
    # start-up: history loads only for this command, not for `harness --help`
    from harness.history import view as hv
    from harness.history.record import import_runs, store_path
    from harness.history.store import open_store

    path = store_path(None, history)
    if path is None:
        raise UsageError("history is switched off (HARNESS_HISTORY=off)")
    store = open_store(path)
    unreadable: list[str] = []
    try:
        rows = import_runs(store, list(run_dirs), unreadable)
        names = {r.node_id: getattr(store.node(r.node_id), "name", str(r.node_id)) for r in rows}
    finally:
        store.close()
        hv.warn_problems(store)
    for r in rows:
        click.echo(f"{r.run_id}: node {names[r.node_id]}, {r.verdict}")
    click.echo(f"imported {len(rows)} run(s) into {path}")
    if unreadable:  # the others are in: each bad one named, exit 2
        raise ConfigError([ConfigProblem("", 0, 0, p) for p in unreadable])


@history.command("pin")
@click.argument("run_id")
@click.option("--as", "kind", type=click.Choice(["go-live"]), required=True,
              help="what the run becomes for its node: go-live (the reference of `vs: golive` drift rules)")
@HISTORY_OPTION
def pin(run_id: str, kind: str, history: Path | None) -> None:
    """Pin RUN_ID (a run recorded in the store) as its node's go-live run."""
    # start-up: the store and its views load only when the command runs
    from harness.history import view as hv

    store = hv.open_existing(history)
    try:
        found = store.run(run_id)
        if found is None:
            raise UsageError(f"no run {run_id!r} in {store.path} (see `harness history NODE`)")
        if found.verdict != "ACCEPTED":
            raise UsageError(f"{run_id} is {found.verdict}: only an accepted run can be the {kind} run")
        row = store.pin(run_id, kind)
        node = store.node(row.node_id)
    finally:
        store.close()
    click.echo(f"{run_id} ({row.suite}, {row.verdict}, {row.started}) is now the {kind} run of node "
               f"{node.name if node else row.node_id}")


@click.command()
@click.argument("run_a")
@click.argument("run_b")
@HISTORY_OPTION
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def compare(run_a: str, run_b: str, history: Path | None, as_json: bool) -> None:
    """Every metric of RUN_A and RUN_B side by side, largest regression first (exit 0)."""
    from harness.history import compare as runcompare  # start-up: history loads only for this command
    from harness.history import view as hv

    a, b = hv.load_run(run_a, history), hv.load_run(run_b, history)
    rows = runcompare.compare_runs(a, b)
    if as_json:
        click.echo(json.dumps(runcompare.to_json(a, b, rows), indent=2, allow_nan=False))
        return
    title = (f"A = {a.run_id} ({a.suite.get('name', '?')}, {a.verdict})   "
             f"B = {b.run_id} ({b.suite.get('name', '?')}, {b.verdict})")
    for note in runcompare.notes(a, b):
        click.echo(f"note: {note}")
    text = hv.render_table(title, ["series", "A", "B", "Δ", "better", ""],
                           runcompare.table_rows(rows), right=(1, 2, 4), wrap=(0,))
    if text is not None:
        click.echo(text)
