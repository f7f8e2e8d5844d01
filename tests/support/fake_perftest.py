"""A stand-in for a perftest binary, for tests on machines without RDMA hardware.

It behaves like perftest at the process level only: without a host argument it is the server
(listens on the -p port, accepts one client), with one it is the client (connects, then prints
a real captured perftest output). Options let a test make either side hang or fail.
"""

from __future__ import annotations

import stat
from pathlib import Path

TEMPLATE = '''#!{python}
import os, socket, sys, time
args = sys.argv[1:]
port = int(args[args.index("-p") + 1])
device = args[args.index("-d") + 1]
log = {log!r}
with open(log, "a") as f:
    f.write(" ".join(args) + "\\n")
client = not args[-1].startswith("-") and args[-2] not in ("-d", "-p", "-s", "-q", "-n", "-D", "-x")
if client:
    if {client_hang!r}:
        open(log + ".client.pid", "w").write(str(os.getpid()))
        time.sleep(120)
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.sendall(b"x")
    for path, value in {bump!r}.items():  # stands in for the HCA counting errors during the run
        open(path, "w").write(value)
    sys.stdout.write(open({sample!r}).read())
    sys.exit({client_rc!r})
open(log + "." + device + ".server.pid", "w").write(str(os.getpid()))
if {server_fail!r}:
    sys.stderr.write(" Did not detect devices \\n Unable to find the Infiniband/RoCE device\\n")
    sys.exit(1)
time.sleep({listen_delay!r})
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(1)
conn, _ = s.accept()
conn.recv(1)
if {server_linger!r}:
    time.sleep(120)
'''


def write_fake(path: Path, sample: Path, *, log: Path, client_rc: int = 0, client_hang: bool = False,
               server_fail: bool = False, server_linger: bool = False, listen_delay: float = 0.0,
               bump: dict[str, str] | None = None) -> Path:
    """Write an executable fake perftest binary at `path`."""
    import sys

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TEMPLATE.format(python=sys.executable, log=str(log), sample=str(sample),
                                    client_rc=client_rc, client_hang=client_hang, server_fail=server_fail,
                                    server_linger=server_linger, listen_delay=listen_delay,
                                    bump=bump or {}))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def gone(pid: int) -> bool:
    """True when no process has this pid any more (it was reaped)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False
