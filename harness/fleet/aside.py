"""Work done in a forked child beside the parent (fleet.html while fleet.json and junit.xml are
written: the second core sits idle otherwise), watched through a pidfd.

The child never returns into the parent's code: it runs its work and exits 0, or 1 on any error.
Interrupted (SIGINT) or stopped (SIGTERM), it unwinds, so an atomic write removes its temporary
file. No fork is made beside another thread (one could hold a lock the child needs), nor where
pidfds are missing; the caller then does the work itself.
"""

from __future__ import annotations

import os
import select
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass

STOP_S = 2.0  # a stopped child's time to unwind before SIGKILL


def forkable() -> bool:
    """Whether a fork is safe here and its child can be watched."""
    return threading.active_count() == 1 and hasattr(os, "pidfd_open")


@dataclass(frozen=True)
class Child:
    pid: int
    fd: int  # its pidfd

    def join(self, timeout_s: float) -> bool:
        """Whether the work succeeded within `timeout_s`. A child that did not finish is stopped
        (SIGTERM, then SIGKILL after STOP_S); either way it is reaped and its pidfd closed."""
        try:
            if not select.select([self.fd], [], [], timeout_s)[0]:
                os.kill(self.pid, signal.SIGTERM)
                if not select.select([self.fd], [], [], STOP_S)[0]:
                    os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                return False
            _, status = os.waitpid(self.pid, 0)
            return os.waitstatus_to_exitcode(status) == 0
        finally:
            os.close(self.fd)


def start(work: Callable[[], object]) -> Child | None:
    """`work` running in a forked child; None where no fork can be made or watched."""
    if not forkable():
        return None
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:
        code = 1
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, _exit_on_term)
            work()
            code = 0
        except BaseException:  # noqa: S110 - the parent does the work instead, and reports what fails there
            pass
        finally:
            os._exit(code)
    try:
        return Child(pid, os.pidfd_open(pid))
    except OSError:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return None


def _exit_on_term(signum: int, frame: object) -> None:
    raise SystemExit(1)
