"""Run a server and a client tool as a pair (perftest style), never leaving the server behind.

The server starts in its own process group; once it listens on its TCP port (read from
/proc/net/tcp and tcp6, which does not disturb it) or `ready_s` passes, the client runs
through proc.run with its timeout. The server then gets `grace_s` to finish on its own and
its whole group is killed on every path: success, client failure, timeout, interrupt, or
an exception. No shell.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from harness.platform import proc

LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
PROC_NET = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))


@dataclass(frozen=True)
class PairResult:
    """Both halves; `client` is None when the server died before the client could start."""

    server: proc.ProcResult
    client: Optional[proc.ProcResult]


def listening_ports(text: str) -> set[int]:
    """Ports in LISTEN state in the text of /proc/net/tcp or /proc/net/tcp6 (pure)."""
    ports: set[int] = set()
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) > 3 and parts[3] == LISTEN and ":" in parts[1]:
            try:
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
            except ValueError:
                continue
    return ports


def is_listening(port: int) -> bool:
    """True when some local socket listens on TCP `port`."""
    for path in PROC_NET:
        try:
            if port in listening_ports(path.read_text()):
                return True
        except OSError:
            continue
    return False


def run_pair(server_argv: Sequence[str], client_argv: Sequence[str], *, server_out: Path,
             server_err: Path, client_out: Path, client_err: Path, timeout: Optional[float],
             port: Optional[int] = None, ready_s: float = 5.0, grace_s: float = 10.0,
             env: Optional[Mapping[str, str]] = None) -> PairResult:
    """Start the server, wait until it listens on `port` (or ready_s), run the client, reap both.

    The server's `timed_out` is True when it had to be killed after a client that finished.
    """
    server_argv = tuple(str(a) for a in server_argv)
    server_out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(server_out, "wb") as out, open(server_err, "wb") as err:
        # tracked, so that the signal handler's kill_all() reaches it too
        server = proc.popen(server_argv, stdout=out, stderr=err, env=env)
    client: Optional[proc.ProcResult] = None
    try:
        _wait_ready(server, port, ready_s)
        if server.poll() is None:
            client = proc.run(client_argv, client_out, client_err, timeout, env=env)
            wait = 0.0 if client.timed_out or client.interrupted else grace_s
            deadline = time.monotonic() + wait
            while server.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        still_running = server.poll() is None
        proc.reap(server, server_argv)
    timed_out = still_running and client is not None and not client.timed_out
    res = proc.ProcResult(server_argv, server.returncode, time.monotonic() - t0, server_out, server_err,
                          timed_out, getattr(server, "_harness_interrupted", False))
    return PairResult(res, client)


def _wait_ready(server: subprocess.Popen[bytes], port: Optional[int], ready_s: float) -> None:
    deadline = time.monotonic() + ready_s
    while time.monotonic() < deadline and server.poll() is None:
        if port is not None and is_listening(port):
            return
        time.sleep(0.05)
