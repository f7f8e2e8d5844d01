"""Calls that may never return (a hung driver), made into waits with a bound. Used by platform/nvml:
NVML blocks in the kernel on a GPU that hangs, and no signal interrupts it."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Worker:
    """Runs calls in a daemon thread so that every wait is bounded: a call into a hung driver (the
    thread sits in uninterruptible sleep) is abandoned with its thread after `timeout_s`, and the
    next call gets a fresh thread."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event]] | None = None
        self._lock = threading.Lock()  # one call at a time: a call queued behind a hung one is not timed

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event]]) -> None:
        while True:
            fn, box, done = jobs.get()
            try:
                box["value"] = fn()
            except Exception as e:  # handed to the caller, which re-raises it
                box["error"] = e
            done.set()

    def call(self, fn: Callable[[], T], timeout_s: float) -> T:
        """fn() in the worker thread; TimeoutError when it has not returned within `timeout_s`."""
        if not self._lock.acquire(timeout=timeout_s):
            raise TimeoutError(f"busy with another call for {timeout_s:g} s")
        try:
            return self._call(fn, timeout_s)
        finally:
            self._lock.release()

    def _call(self, fn: Callable[[], T], timeout_s: float) -> T:
        if self._jobs is None:
            self._jobs = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(self._jobs,), name="harness-nvml", daemon=True).start()
        box: dict[str, Any] = {}
        done = threading.Event()
        self._jobs.put((fn, box, done))
        if not done.wait(timeout_s):
            self._jobs = None  # that thread is stuck in the driver: leave it, the next call starts another
            raise TimeoutError(f"no answer within {timeout_s:g} s")
        if "error" in box:
            raise box["error"]
        return box["value"]  # type: ignore[no-any-return]
