"""What a run begins as its process starts, before the command line and the run's modules load
(cli.start calls begin() for `harness run`): the contention gate's first look, which the CLI's and
the run's loading then fill, and the run's helper process (run.helper), which reads the inventory
and loads the reports' renderers on the other core meanwhile. Each is handed out once; a run that
finds no look takes its own (nodeload.first_look), one with no helper does its work in-process.

The look's start is read before anything loads (capture: the /proc files a snapshot of this
process reads, as plain text), and parsed when the run takes it (nodeload.first_look).

The inventory is not read in a thread here: beside the imports it made a run's start-up slower
on this 2-core machine (0.305 -> 0.31-0.316 s of own time, bench_fio_overhead), its Python work
contending with theirs for the interpreter; the helper is a process of its own."""

from __future__ import annotations

import atexit
import gc
import os
import time

TYPE_CHECKING = False  # typing loads after the look began
if TYPE_CHECKING:
    from typing import Any

    from harness.run.helper import Helper
    from harness.run.nodeload import Snapshot

_captured: dict[str, Any] | None = None
_helper: Helper | None = None
_gc_off = False  # begin() turned the collector off


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _list(path: str) -> list[str] | None:
    try:
        return os.listdir(path)
    except OSError:
        return None


def capture(root: str = "/") -> dict[str, Any]:
    """The files nodeload.snapshot reads of this process (which has no child yet), read as they
    are now with nothing loaded: nodeload.first_look(captured=...) reads the snapshot from them."""
    proc, pid = os.path.join(root, "proc"), os.getpid()
    names = ["stat", "pressure/cpu", "pressure/io", "pressure/memory", "diskstats", "meminfo", f"{pid}/io"]
    tasks = _list(f"{proc}/{pid}/task") or []
    names += [f"{pid}/task/{tid}/{f}" for tid in tasks for f in ("stat", "children")]
    texts = {name: _read(f"{proc}/{name}") for name in names}
    block = _list(os.path.join(root, "sys", "block"))
    return {"root": root, "texts": texts, "tasks": {pid: tasks}, "block": block, "t": time.monotonic()}


def begin(helper: bool = True) -> None:
    """Read the first look's start now, then fork the helper (`helper`; before any thread). The
    cyclic garbage collector is off from here until the run's command starts the run (resume_gc):
    the imports and the command line make some 100,000 objects that live as long as the run, and
    its passes over them meanwhile reclaim nothing (~6 ms)."""
    global _captured, _helper, _gc_off
    _captured = capture()
    if gc.isenabled():
        gc.disable()
        _gc_off = True
    if helper and _helper is None:
        from harness.run import helper as run_helper  # start-up: only a run's process begins early

        _helper = run_helper.fork()
        if _helper is not None:
            atexit.register(_helper.close)


def look() -> Snapshot | None:
    """The first look's start begin() read (once; None when the gate is off), else None."""
    global _captured
    taken, _captured = _captured, None
    if taken is None:
        return None
    from harness.run import nodeload  # start-up: the look began before this loaded

    return nodeload.first_look(captured=taken)


def helper() -> Helper | None:
    """The helper begin() forked (once), else None."""
    global _helper
    taken, _helper = _helper, None
    return taken


def resume_gc() -> None:
    """The collector back on where begin() turned it off, what start-up made frozen first
    (gc.freeze): turned on over the ~100,000 objects made meanwhile, its first pass would walk
    them all (~14 ms) and reclaim next to nothing. The run's session keeps it off again while it
    prepares, then freezes what that made."""
    global _gc_off
    if _gc_off:
        _gc_off = False
        gc.freeze()
        gc.enable()
