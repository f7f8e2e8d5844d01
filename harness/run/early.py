"""What a run begins as its process starts, before the command line and the run's modules load
(cli.start calls begin() for `harness run`): the contention gate's first look, which the CLI's and
the run's loading then fill (about 0.03 s more of it than when the look began in the run command).
Handed out once; a run that finds none takes its own (nodeload.first_look).

The inventory is not begun here: read in a thread beside the imports, it made a run's start-up
slower on this 2-core machine (0.305 -> 0.31-0.316 s of own time, bench_fio_overhead), its Python
work contending with theirs for the interpreter."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.run.nodeload import Snapshot

_look: Snapshot | None = None


def begin() -> None:
    """Take the first look's start now."""
    global _look
    from harness.run import nodeload  # start-up: only a run's process begins early

    _look = nodeload.first_look()


def look() -> Snapshot | None:
    """The first look's start begin() took (once), else None."""
    global _look
    taken, _look = _look, None
    return taken
