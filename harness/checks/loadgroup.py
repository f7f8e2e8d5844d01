"""Several load tools at once (stress-ng, a GPU burn, fio), each through `ctx.run_tool` in a thread.

`run_tool` blocks, keeps the raw output and records the run; here each tool gets a thread, and
the group learns every tool's process group from platform/proc's watch hook, so `stop()` can
end them all (TERM, then proc's own KILL after its grace period). `close()` stops and joins
every thread: a check that uses the group in a `with` block leaves no process behind on any
exit path. `InterruptWatch` chains the runner's SIGINT/SIGTERM handlers so a check notices a
Ctrl-C that came while no tool was running (and starts nothing after it).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from types import FrameType, TracebackType
from typing import Any, Optional, Union

from harness.checks.base import CheckContext
from harness.errors import ToolError
from harness.platform import proc

Outcome = Union[proc.ProcResult, Exception]


class InterruptWatch:
    """Sets `event` on SIGINT/SIGTERM and passes the signal on to the handler that was there."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.event = threading.Event()
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        self.event.set()
        old = self._old.get(signum)
        if callable(old):
            old(signum, frame)
        elif old == signal.SIG_DFL:  # what would have happened without us
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def __enter__(self) -> InterruptWatch:
        if threading.current_thread() is threading.main_thread():
            self._old = {int(s): signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old = {}


class LoadGroup:
    """Tools started together, watched together, stopped together."""

    def __init__(self, ctx: CheckContext, interrupted: Optional[threading.Event] = None) -> None:
        self.ctx = ctx
        self.interrupted = interrupted or threading.Event()
        self.outcomes: dict[str, Outcome] = {}
        self.stopped_early = False
        self._threads: dict[str, threading.Thread] = {}
        self._argv: dict[tuple[str, ...], str] = {}
        self._pids: dict[str, int] = {}
        self._stopping = False
        self._lock = threading.Lock()
        self._done = threading.Event()
        proc.watch(self._on_proc)

    def _on_proc(self, pid: int, argv: tuple[str, ...], started: bool) -> None:
        with self._lock:
            name = self._argv.get(tuple(argv))
            if name is None:
                return
            if not started:
                self._pids.pop(name, None)
                return
            self._pids[name] = pid
            late = self._stopping
        if late:  # started after stop(): end it at once
            _term(pid)

    def start(self, name: str, argv: Sequence[str], timeout_s: Optional[float],
              env: Optional[Mapping[str, str]] = None) -> None:
        """Run `argv` in the background as `name` (also its raw file stem)."""
        if self.interrupted.is_set() or self._stopping:
            raise ToolError(f"{name}: not started: the check is being stopped", argv=tuple(argv))
        key = tuple(str(a) for a in argv)
        with self._lock:
            self._argv[key] = name

        def work() -> None:
            try:
                self.outcomes[name] = self.ctx.run_tool(key, name=name, timeout_s=timeout_s, env=env,
                                                        check_rc=False)
            except Exception as e:  # kept for the check to judge; the thread must not die loudly
                self.outcomes[name] = e
            finally:
                if not self.running():
                    self._done.set()

        t = threading.Thread(target=work, name=f"harness-load-{name}", daemon=True)
        self._threads[name] = t
        self._done.clear()
        t.start()

    def running(self) -> bool:
        return any(t.is_alive() and n not in self.outcomes for n, t in self._threads.items())

    def failed(self) -> Optional[str]:
        """The first tool that ended with an error or a non-zero exit, if any."""
        for name, o in list(self.outcomes.items()):
            if isinstance(o, Exception) or o.rc != 0:
                return name
        return None

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` s for every tool to end, or for an interrupt; True when all ended."""
        deadline = time.monotonic() + timeout
        while self.running() and not self.interrupted.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._done.wait(min(left, 0.1))
        return not self.running()

    def stop(self) -> None:
        """TERM every tool's process group; proc.run then KILLs what is left and reaps it."""
        with self._lock:
            self._stopping = True
            pids = list(self._pids.values())
        if self.running():
            self.stopped_early = True
        for pid in pids:
            _term(pid)

    def close(self) -> None:
        """Stop what still runs and join every thread (each ends once its tool is reaped)."""
        try:
            self.stop()
            for t in self._threads.values():
                t.join()
        finally:
            proc.unwatch(self._on_proc)

    def __enter__(self) -> LoadGroup:
        return self

    def __exit__(self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()


def _term(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
