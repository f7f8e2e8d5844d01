"""The console script's entry (`harness`, `python -m harness`): for `harness run`, the contention
gate's first look begins before the command line loads (run.early), then main parses the arguments.

A run ends its process itself once it has written its outputs and the CLI has said its last word
(end_fast): the exit handlers run (the helper's close, logging's flush), the standard streams are
flushed, and the interpreter's teardown, clearing some 400 modules (~9 ms of every run), is left
to the OS. Nothing depends on that teardown: every file the run writes is closed explicitly, and
every thread the harness starts is a daemon.

Pydantic's plugins (code that any installed distribution names under the `pydantic` entry point)
are off unless PYDANTIC_DISABLE_PLUGINS says otherwise: suites and profiles validate the same
wherever the harness is installed, and no command pays pydantic's search for them (~3 ms)."""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def main(end_fast: bool = True) -> None:
    """cli.main.main, with a run's early work begun first; `end_fast` (the console script's way)
    ends a run's process as it exits. A caller that goes on after a run passes False."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    run = sys.argv[1:2] == ["run"]
    if run:
        from harness.run import early  # start-up: before click and the commands load

        early.begin()
    from harness.cli.main import main as cli_main  # start-up: after a run's early work has begun

    try:
        cli_main()
    except SystemExit as e:
        if run and end_fast:
            end(e.code)
        raise


def end(code: object) -> NoReturn:
    """Exit now with `code` as SystemExit would: the exit handlers, the streams flushed, then
    os._exit (no interpreter teardown)."""
    import atexit  # start-up: only as a run ends

    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # SystemExit("text") prints the text and exits 1
        print(code, file=sys.stderr)
        status = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said
                pass
        os._exit(status)
