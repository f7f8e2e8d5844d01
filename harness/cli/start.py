"""The console script's entry (`harness`, `python -m harness`): for `harness run`, the contention
gate's first look begins before the command line loads (run.early), then main parses the arguments."""

from __future__ import annotations

import sys


def main() -> None:
    """cli.main.main, with a run's early work begun first."""
    if sys.argv[1:2] == ["run"]:
        from harness.run import early  # start-up: before click and the commands load

        early.begin()
    from harness.cli.main import main as cli_main  # start-up: after a run's early work has begun

    cli_main()
