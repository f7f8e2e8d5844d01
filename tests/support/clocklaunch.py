"""`harness ARGS` with the run's clock stopped at one second, for tests only: runs started "in the
same second" on one host, however slowly a busy machine starts them.

Usage: python tests/support/clocklaunch.py 2026-12-01T22:34:51 ARGS...   (ARGS as for `harness`).
Only harness.run.runner.utcnow is pinned (the run directory's name, the record's times); the CLI,
runner, checks and history are the real thing.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone


def main() -> None:
    at = datetime.fromisoformat(sys.argv[1]).replace(tzinfo=timezone.utc)
    from harness.run import runner

    runner.utcnow = lambda: at  # type: ignore[assignment]
    sys.argv = ["harness", *sys.argv[2:]]
    from harness.cli.main import main as cli

    cli()


if __name__ == "__main__":
    main()
