"""Work done in a forked child beside this process (a run's helper, a large fleet's fleet.html),
and the bounded wait for it.

No fork is made beside another thread: a lock it holds would be held forever in the child. The
child never returns into its parent's code: it runs its work and exits 0, or 1 on any error.
Interrupted (SIGINT) or stopped (SIGTERM), it unwinds, so an atomic write removes its temporary
file. A wait is woken by the child's pidfd the moment it exits, and polls where there is none.

This module loads nothing beyond the interpreter's own start (a run forks before it loads).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

POLL_S = 0.005  # where there is no pidfd
KILL_S = 5.0  # for a killed child to be gone (one in the kernel's uninterruptible wait is left)


def forkable() -> bool:
    """Whether a fork is safe now: no thread but this one (threading never loaded: none)."""
    threads = sys.modules.get("threading")
    return threads is None or threads.active_count() == 1


class Child(NamedTuple):  # not a dataclass: dataclasses loads inspect, ~5 ms before a run's fork
    pid: int

    def wait(self, timeout_s: float) -> int | None:
        """Its exit code once it exited (reaped) within `timeout_s`, else None (left running).
        -1 where it was reaped already."""
        try:
            fd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            fd = -1
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:
                    return -1
                if pid:
                    return os.waitstatus_to_exitcode(status)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                if fd >= 0:
                    select.select([fd], [], [], left)
                else:
                    time.sleep(min(left, POLL_S))
        finally:
            if fd >= 0:
                os.close(fd)

    def end(self, timeout_s: float, term_s: float = 0.0) -> int | None:
        """Its exit code when it ended by itself within `timeout_s`; else it is stopped (SIGTERM
        and `term_s` to unwind where term_s > 0, then SIGKILL) and None. Reaped, unless it is stuck
        in the kernel (a hung driver) past KILL_S: the wait is bounded even then."""
        code = self.wait(timeout_s)
        if code is not None:
            return code
        if term_s > 0:
            self._signal(signal.SIGTERM)
            if self.wait(term_s) is not None:
                return None
        self._signal(signal.SIGKILL)
        self.wait(KILL_S)
        return None

    def _signal(self, sig: int) -> None:
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass


def start(work: Callable[[], object]) -> Child | None:
    """`work` running in a forked child; None where no fork is safe (forkable) or it failed."""
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
        except BaseException:  # noqa: S110 - its parent does the work itself, and reports what fails there
            pass
        finally:
            os._exit(code)
    return Child(pid)


def _exit_on_term(signum: int, frame: object) -> None:
    raise SystemExit(1)
