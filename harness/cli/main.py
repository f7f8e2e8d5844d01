"""Thin command line: parse arguments, call the core, map errors to exit codes in one place.

Exit codes (harness.model.EXIT_CODES): 0 accepted, 1 rejected (a check failed: the hardware
measured badly), 2 invalid input (suite, profile, arguments), 3 errored (a check could not run
validly, or the run could not go on, or the harness itself failed: no hardware verdict), 4 untested
(nothing failed or errored, but no check judged anything, or a check the profile or an acceptance
suite expects was skipped or left out by --only/--skip), 130/143 interrupted by SIGINT/SIGTERM.
Nothing but a failed check exits 1.
Heavy modules are imported inside the commands so `harness --help` starts fast.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import sys
import traceback
from pathlib import Path

import click

from harness.cli.audit import audit
from harness.cli.export import export
from harness.cli.fleet import fleet
from harness.cli.history import baseline, compare, history
from harness.cli.k8s import k8s
from harness.cli.listing import list_cmd
from harness.errors import ConfigError, HarnessError, UsageError, printable

# 0 accepted, 1 rejected (hardware measured badly), 2 invalid input, 3 errored (no hardware verdict:
# a tool or the environment failed, or the run could not go on), 4 untested (nothing judged, or an
# expected check skipped or left out); see harness.model.EXIT_CODES
EXIT_OK, EXIT_REJECTED, EXIT_INVALID, EXIT_ERRORED = 0, 1, 2, 3
DEFAULT_KEEP = 20  # harness.run.session.DEFAULT_KEEP (not imported: `harness --help` stays fast)


def _ids(values: tuple[str, ...]) -> tuple[str, ...]:
    """Check ids from every --only/--skip given, each comma-separated."""
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gpu-acceptance-harness", prog_name="harness")
def cli() -> None:
    """GPU server stress-test and acceptance harness."""


@cli.command()
@click.argument("suite", required=False)
@click.option("--profile", "-p", help="profile name or file (default: chosen from the hardware)")
@click.option("--output", "-o", type=click.Path(file_okay=False, path_type=Path),
              default=Path("reports"), show_default=True, help="directory for run directories")
@click.option("--only", multiple=True, help="comma-separated check ids to run (repeatable)")
@click.option("--skip", multiple=True, help="comma-separated check ids to leave out (repeatable)")
@click.option("--tags", "-t", multiple=True,
              help="comma-separated tags: run only the checks carrying one of them (repeatable)")
@click.option("--dry-run", is_flag=True, help="print the plan (commands, expectations); run nothing")
@click.option("--allow-destructive", is_flag=True,
              help="command-line half of the opt-in for raw-device writes")
@click.option("--resume", metavar="RUN_DIR", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="finish a killed or interrupted run: rerun only its unfinished checks")
@click.option("--history", type=click.Path(dir_okay=False, path_type=Path), envvar="HARNESS_HISTORY",
              help="history store to record into (default: $HARNESS_HISTORY, else the node's store: "
                   "/var/lib/harness/history.sqlite as root, ~/.local/state/harness/history.sqlite "
                   "otherwise, whatever --output is; 'off' records nothing)")
@click.option("--quiet", "-q", is_flag=True,
              help="print one line (verdict, failures, report) for a Slurm prolog or HealthCheckProgram")
@click.option("--keep", type=click.IntRange(min=1), default=DEFAULT_KEEP, show_default=True,
              help="with --quiet: keep the newest N quiet run directories in OUTPUT, delete older ones")
@click.option("--node", metavar="NAME",
              help="the node's name for results, history and fleet reports (default: $HARNESS_NODE, "
                   "else $NODE_NAME as a pod's downward API sets it, else the hostname)")
@click.option("--prom-textfile", metavar="DIR", type=click.Path(file_okay=False, path_type=Path),
              help="write the run's Prometheus exposition to DIR/harness.prom (node_exporter's textfile "
                   "collector directory), atomically")
@click.option("--npd", is_flag=True,
              help="node-problem-detector custom plugin: one line of at most 80 bytes; exit 0 "
                   "accepted (OK), 1 rejected (NonOK), other codes Unknown")
@click.pass_context
def run(ctx: click.Context, suite: str | None, profile: str | None, output: Path, only: tuple[str, ...],
        skip: tuple[str, ...], tags: tuple[str, ...], dry_run: bool, allow_destructive: bool,
        resume: Path | None,
        history: Path | None, quiet: bool, keep: int, node: str | None, prom_textfile: Path | None,
        npd: bool) -> None:
    """Run SUITE (default: smoke) and write a report.

    Exit status: 0 accepted, 1 rejected (the hardware measured badly), 2 invalid input, 3 errored
    (a tool, the environment or the harness failed: no hardware verdict), 4 untested (no check judged
    anything, or an expected check was skipped or left out by --only/--skip/--tags), 130/143
    interrupted.
    """
    from harness.run import early, nodeload  # start-up: the first look began in cli.start, or begins now

    began = early.look()  # taken either way: a --dry-run leaves no look behind
    helper = early.helper()  # the run's helper process, when cli.start forked one
    first_look = None if dry_run else began or nodeload.first_look()
    from harness.run import session as app  # start-up: the run's modules load only for `harness run`

    early.resume_gc()

    if ctx.get_parameter_source("keep") is click.core.ParameterSource.COMMANDLINE and not (quiet or npd):
        raise UsageError("--keep prunes --quiet runs; give it with --quiet or --npd")
    quiet = quiet and not dry_run  # --dry-run prints the plan either way
    npd = npd and not dry_run

    options = app.RunOptions(suite=suite, profile=profile, output=output, only=_ids(only), skip=_ids(skip),
                             tags=_ids(tags), dry_run=dry_run, allow_destructive=allow_destructive,
                             argv=("harness", *sys.argv[1:]), resume=resume, history=history,
                             quiet=quiet or npd, keep=keep, node=node, prom_textfile=prom_textfile)

    def launch() -> app.Finished:
        return app.execute(options=options, first_look=first_look, helper=helper)

    if quiet or npd:
        from harness.cli.quiet import run_quietly  # start-up: only --quiet needs it

        sys.exit(run_quietly(launch, npd=npd))
    sys.exit(launch().code)


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(files: tuple[Path, ...]) -> None:
    """Check suites and profiles; print every problem as FILE:LINE:COL: message."""
    # start-up: check kinds and config load only for this command, not for `harness --help`
    from harness.checks.registry import kinds
    from harness.config import validate_paths

    problems = validate_paths(list(files), kinds())
    for p in problems:
        click.echo(str(p), err=True)
    if problems:
        sys.exit(EXIT_INVALID)
    click.echo(f"{len(files)} file(s) valid")


@cli.command()
@click.argument("which", type=click.Choice(["suite", "profile", "results"]))
def schema(which: str) -> None:
    """Print the JSON Schema of suites, profiles or results.json."""
    if which == "results":
        from harness.results import json_schema as results_schema  # start-up: pydantic loads only here

        doc = results_schema()
    else:
        # start-up: check kinds and config load only for this command, not for `harness --help`
        from harness.checks.registry import kinds
        from harness.config import json_schema

        doc = json_schema(which, kinds())  # type: ignore[arg-type]
    click.echo(json.dumps(doc, indent=2))


@cli.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def report(run_dir: Path) -> None:
    """Re-render report.html and junit.xml from RUN_DIR/results.json."""
    # start-up: results and the report writers load only for this command, not for `harness --help`
    from harness import results
    from harness.report.outputs import write_reports

    record = results.load(run_dir)
    write_reports(record, run_dir)
    click.echo(f"{record.verdict}: {run_dir / 'report.html'}")


@cli.command()
@click.argument("kind")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def parse(kind: str, file: Path) -> None:
    """Parse a saved tool output FILE with the KIND parser and print JSON.

    Exit 0 when the output is a complete, valid KIND output; 2 when it is not (the JSON, with its
    problems, is still printed, and the first problem goes to stderr)."""
    from harness.cli.parse import parse_file  # start-up: the parsers load only for this command

    parsed = parse_file(kind, file)
    click.echo(json.dumps(parsed, indent=2))
    if not parsed["valid"]:
        why = next(iter(parsed["problems"]), "no metric found")
        raise UsageError(f"{file}: not a valid {kind} output: {why}")


for command in (list_cmd, export, baseline, history, compare, audit, fleet, k8s):
    cli.add_command(command)


def _add_observe_command() -> None:
    # start-up: cli.observe's own imports wait for the command; registering it costs nothing
    from harness.cli.observe import observe

    cli.add_command(observe)


_add_observe_command()


def main() -> None:
    """Entry point: the one place where errors become exit codes."""
    # At exit, CPython sweeps every object still alive for reference cycles (~0.1 s after a run);
    # frozen, they are left to the OS. Nothing depends on that sweep: files and the history store
    # are closed explicitly, and atexit handlers (logging's flush) still run.
    atexit.register(gc.freeze)
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_INVALID)
    except UsageError as e:
        click.echo(f"error: {printable(str(e))}", err=True)
        sys.exit(EXIT_INVALID)
    except ConfigError as e:
        for p in e.problems:
            click.echo(str(p), err=True)
        sys.exit(EXIT_INVALID)
    except HarnessError as e:
        click.echo(f"error: {printable(str(e))}", err=True)
        sys.exit(EXIT_ERRORED)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as e:  # a bug: one line and exit 3, never a hardware verdict (not SystemExit)
        if os.environ.get("HARNESS_DEBUG"):
            traceback.print_exc()
        first = printable(next(iter(str(e).splitlines()), ""))
        click.echo(f"error: internal error: {type(e).__name__}: {first} (a bug in the harness; "
                   "HARNESS_DEBUG=1 prints the traceback)", err=True)
        sys.exit(EXIT_ERRORED)
