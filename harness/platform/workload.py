"""Start the command `harness observe` watches, in its own process group, and stop it.

Never a shell: argv is executed as given. `stop()` ends the whole group (TERM, then KILL after
a grace period), so nothing the workload started outlives the observation.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import IO, Optional

from harness.errors import ToolMissing
from harness.platform.proc import group_alive, which

GRACE_S = 3.0


def start(argv: Sequence[str], stdout: Optional[IO[bytes]] = None) -> subprocess.Popen[bytes]:
    """Run argv (stdin closed; stdout to `stdout` or ours); ToolMissing when it cannot execute."""
    exe = which(str(argv[0]))
    try:
        return subprocess.Popen((exe, *map(str, argv[1:])), stdin=subprocess.DEVNULL, stdout=stdout,
                                start_new_session=True)
    except OSError as e:
        raise ToolMissing(f"cannot execute {argv[0]}: {e.strerror}", argv=tuple(argv)) from e


def finished(p: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to `timeout` s for the command to exit; True once it has."""
    try:
        p.wait(timeout=timeout if timeout > 0 else 0.001)
    except subprocess.TimeoutExpired:
        return False
    return True


def stop(p: subprocess.Popen[bytes]) -> None:
    """End the command's process group (a no-op when it has exited and left nothing behind)."""
    for sig, grace in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 1.0)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if p.poll() is not None and not group_alive(p.pid):
                return
            time.sleep(0.02)
    p.poll()
