"""`harness observe`: thin like the other commands; the work is in harness.run.observe."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click

from harness.errors import UsageError


def _seconds(text: Optional[str], option: str) -> Optional[float]:
    """A duration as suites write them (90, 90s, 10m, 1h, 500ms), through the one parser."""
    if text is None:
        return None
    # start-up: pydantic and config load only when a duration is given
    from pydantic import TypeAdapter, ValidationError

    from harness.config.numbers import Seconds

    try:
        return float(TypeAdapter(Seconds).validate_python(text))
    except ValidationError as e:
        raise UsageError(f"{option} {text!r}: {e.errors()[0]['msg']}") from None


def _threshold(values: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for v in values:
        name, sep, num = v.partition("=")
        try:
            out[name.strip()] = float(num)
        except ValueError:
            sep = ""
        if not sep:
            raise UsageError(f"--threshold {v!r}: expected NAME=NUMBER, e.g. min_share=0.3")
    return out


@click.command(context_settings={"ignore_unknown_options": False})
@click.option("--duration", "-d", metavar="S", help="window length (90, 90s, 10m); default 30 s, or until "
              "the command exits")
@click.option("--interval", "-i", metavar="S", default="1s", show_default=True, help="sampling interval")
@click.option("--pid", "-p", "pids", type=int, multiple=True, metavar="PID",
              help="watch this process and its children (repeatable)")
@click.option("--output", "-o", type=click.Path(file_okay=False, path_type=Path),
              help="write observe.json and series.json here")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object (primary, findings, window)")
@click.option("--threshold", "thresholds", multiple=True, metavar="NAME=VALUE",
              help="override one attribution threshold (see harness.series.stall.Thresholds)")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def observe(duration: Optional[str], interval: str, pids: tuple[int, ...], output: Optional[Path],
            as_json: bool, thresholds: tuple[str, ...], command: tuple[str, ...]) -> None:
    """Say what holds a running workload back: GPU, throttling, storage, CPU, memory, network, shm.

    Watches the node, the processes given with --pid, or COMMAND (after --), which it starts and
    waits for, without adding load. Exit status: 0 observed, 2 bad arguments, 3 could not observe.
    """
    from harness.run.observe import main  # start-up: the observer loads only when the command runs

    d = _seconds(duration, "--duration")
    i = _seconds(interval, "--interval")
    sys.exit(main(pids, command, d, i if i is not None else 1.0, output, as_json, _threshold(thresholds)))
