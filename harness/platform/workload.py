"""Start the command `harness observe` watches, in its own process group, and stop it.

Never a shell: argv is executed as given. `stop()` ends the whole group (TERM, then KILL after
a grace period), then whatever carries the command's run token (a setsid child), so nothing the
workload started outlives the observation.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import IO, Optional

from harness.errors import ToolMissing
from harness.platform import procscan
from harness.platform.proc import group_alive, tool_environ, which

GRACE_S = 3.0


def start(argv: Sequence[str], stdout: Optional[IO[bytes]] = None) -> subprocess.Popen[bytes]:
    """Run argv (stdin closed; stdout to `stdout` or ours), marked with a run token of its own so
    that `stop` finds what left its session; ToolMissing when it cannot execute."""
    exe = which(str(argv[0]))
    token = secrets.token_hex(8)
    env = tool_environ()
    outer = env.get(procscan.TOKEN_VAR)
    env[procscan.TOKEN_VAR] = f"{token}:{outer}" if outer else token
    try:
        p = subprocess.Popen((exe, *map(str, argv[1:])), stdin=subprocess.DEVNULL, stdout=stdout,
                             start_new_session=True, env=env)
    except OSError as e:
        raise ToolMissing(f"cannot execute {argv[0]}: {e.strerror}", argv=tuple(argv)) from e
    info = procscan.proc_info(p.pid)
    p._harness_token = token  # type: ignore[attr-defined]
    p._harness_start = info.start if info else 0  # type: ignore[attr-defined]
    return p


def finished(p: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to `timeout` s for the command to exit; True once it has."""
    try:
        p.wait(timeout=timeout if timeout > 0 else 0.001)
    except subprocess.TimeoutExpired:
        return False
    return True


def stop(p: subprocess.Popen[bytes]) -> None:
    """End the command's process group, then every process carrying its run token (a child that
    left the session with setsid); a no-op when it has exited and left nothing behind."""
    try:
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
    finally:
        token = getattr(p, "_harness_token", "")
        if token:
            procscan.kill_marked([token], GRACE_S, since=getattr(p, "_harness_start", 0))
