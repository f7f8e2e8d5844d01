"""`harness fleet ...`: cluster-wide runs on Slurm, the fleet report, drain/resume, Prometheus.

Thin like cli.py: parse options, call harness.fleet.commands, exit with its code. Errors are
mapped to exit codes by cli.main().
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from harness.errors import UsageError

if TYPE_CHECKING:
    from harness.fleet.analysis import OutlierSettings
    from harness.fleet.commands import Exports

F = TypeVar("F", bound=Callable[..., Any])

_DIR = click.Path(file_okay=False, path_type=Path)
_EXISTING = click.Path(exists=True, file_okay=False, path_type=Path)


def _seconds(value: str, what: str) -> float:
    # start-up: pydantic and config load only when a fleet command parses a duration
    from pydantic import TypeAdapter, ValidationError

    from harness.config.numbers import Seconds

    try:
        return float(TypeAdapter(Seconds).validate_python(value))
    except ValidationError as e:
        raise UsageError(f"{what}: {e.errors()[0]['msg']}") from None


def _exports(prom_textfile: Path | None, pushgateway: str | None) -> Exports:
    from harness.fleet.commands import Exports  # start-up: fleet loads only for a fleet command

    return Exports(prom_textfile, pushgateway)


def _settings(threshold: float, min_nodes: int) -> OutlierSettings:
    from harness.fleet.analysis import OutlierSettings  # start-up: fleet loads only for a fleet command

    return OutlierSettings(threshold=threshold, min_nodes=min_nodes)


_prom = [
    click.option("--prom-textfile", type=click.Path(path_type=Path),
                 help="write the Prometheus exposition here (a directory gets harness.prom)"),
    click.option("--pushgateway", metavar="URL", help="push each node's metrics (job harness, node=X)"),
]
_outliers = [
    click.option("--outlier-z", "threshold", type=float, default=3.5, show_default=True,
                 help="robust z-score beyond which a node is a fleet outlier"),
    click.option("--outlier-min-nodes", "min_nodes", type=int, default=4, show_default=True,
                 help="smallest series (nodes) in which outliers are sought"),
]


def _options(opts: list[Callable[[F], F]]) -> Callable[[F], F]:
    """Apply a shared list of click options, in order."""
    def wrap(f: F) -> F:
        for o in reversed(opts):
            f = o(f)
        return f
    return wrap


@click.group()
def fleet() -> None:
    """Run a suite on many nodes through Slurm and judge the fleet."""


@fleet.command("run")
@click.argument("suite")
@click.option("--nodes", "-w", required=True, help="Slurm hostlist, e.g. 'gpu[001-128]'")
@click.option("--output", "-o", type=_DIR, required=True, help="fleet directory (new)")
@click.option("--profile", "-p", help="profile for every node (default: each node chooses)")
@click.option("--partition")
@click.option("--account")
@click.option("--time", "time_limit", help="Slurm time limit per node job, e.g. 30:00")
@click.option("--no-wait", is_flag=True, help="submit and return; follow with fleet status/report")
@click.option("--drain-failed", is_flag=True, help="drain nodes where a check failed")
@click.option("--drain-unfit", is_flag=True, help="drain nodes that failed, errored (e.g. a driver not "
              "loaded) or are untested; the reason says which ('harness: ERRORED ...')")
@click.option("--start-timeout", default="30m", show_default=True,
              help="cancel and error a node's job not started by then (e.g. 90s, 10m)")
@click.option("--poll-interval", default="10s", show_default=True, help="how often to ask Slurm")
@click.option("--history", metavar="PATH",
              help="one history store for every node, on a file system all nodes mount at the same path "
                   "('off' records nothing; default: each node's own store)")
@_options(_prom + _outliers)
def run_cmd(suite: str, nodes: str, output: Path, profile: str | None, partition: str | None,
            account: str | None, time_limit: str | None, no_wait: bool, drain_failed: bool,
            drain_unfit: bool, start_timeout: str, poll_interval: str, history: str | None,
            prom_textfile: Path | None, pushgateway: str | None, threshold: float, min_nodes: int) -> None:
    """Run SUITE on every node of --nodes, one exclusive Slurm job per node."""
    from harness.fleet import commands  # start-up: fleet loads only for a fleet command

    sys.exit(commands.run(
        suite=suite, nodes=nodes, output=output, profile=profile, partition=partition, account=account,
        time_limit=time_limit, wait=not no_wait, drain_failed=drain_failed,
        start_timeout_s=_seconds(start_timeout, "--start-timeout"),
        poll_s=_seconds(poll_interval, "--poll-interval"), exports=_exports(prom_textfile, pushgateway),
        settings=_settings(threshold, min_nodes), history=history, drain_unfit=drain_unfit))


@fleet.command()
@click.argument("fleet_dir", type=_EXISTING)
def status(fleet_dir: Path) -> None:
    """Ask Slurm about a fleet run's jobs and print each node's state."""
    from harness.fleet import commands  # start-up: fleet loads only for a fleet command

    sys.exit(commands.status(fleet_dir))


@fleet.command()
@click.argument("fleet_dir", type=_EXISTING)
@click.option("--drain-failed", is_flag=True, help="drain nodes where a check failed")
@click.option("--drain-unfit", is_flag=True, help="drain nodes that failed, errored (e.g. a driver not "
              "loaded) or are untested; the reason says which ('harness: ERRORED ...')")
@_options(_prom + _outliers)
def report(fleet_dir: Path, drain_failed: bool, drain_unfit: bool, prom_textfile: Path | None,
           pushgateway: str | None, threshold: float, min_nodes: int) -> None:
    """Write fleet.html, fleet.json and junit.xml for a fleet directory."""
    from harness.fleet import commands  # start-up: fleet loads only for a fleet command

    sys.exit(commands.report(fleet_dir, drain_failed=drain_failed, drain_unfit=drain_unfit,
                             exports=_exports(prom_textfile, pushgateway),
                             settings=_settings(threshold, min_nodes)))


@fleet.command()
@click.argument("fleet_dir", type=_EXISTING)
def resume(fleet_dir: Path) -> None:
    """Resume the fleet's nodes drained by the harness (reason 'harness: ...'), never others."""
    from harness.fleet import commands  # start-up: fleet loads only for a fleet command

    sys.exit(commands.resume(fleet_dir))


@fleet.command()
@click.argument("directory", type=_EXISTING)
@_options(_prom)
def export(directory: Path, prom_textfile: Path | None, pushgateway: str | None) -> None:
    """Export a fleet directory or a single run directory to Prometheus."""
    from harness.fleet import commands  # start-up: fleet loads only for a fleet command

    sys.exit(commands.export(directory, _exports(prom_textfile, pushgateway)))
