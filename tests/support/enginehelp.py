"""What the tests of the subprocess engines (harness.engines.burn, harness.engines.copy) share."""

from __future__ import annotations

import subprocess
import sys


def run_engine(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m MODULE ARGS` for real, output captured."""
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          timeout=120, check=False)


class Clock:
    """A clock that advances one second per reading."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t
