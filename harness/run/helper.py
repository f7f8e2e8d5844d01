"""A helper process a run forks as its process starts: on the machine's other core it reads the
node's inventory and loads the reports' renderers while the run loads its modules, suite and
profile, then renders the run's reports when the run ends.

run.early forks it for `harness run`, before the command line loads and before any thread exists;
the session takes it once. A run without one (a test calling the session, a fork that failed)
does all of it in-process, and so does a run whose helper failed, died or did not answer in time:
every answer is awaited at most its timeout, then the helper is stopped and the run does that part
itself, so the inventory and the reports are the same either way. A renderer that fails in the
helper is rendered again in-process, where the run's harness.log gets its traceback.

The two talk over two anonymous pipes in length-prefixed pickle frames: the helper is a fork of
this very process, and no other process holds the pipes. The helper writes nothing else but the
compiled-template cache in the output directory, as the run would (report.tplcache); it prints
nothing, and ends when the run closes its pipe (or at the run's exit: close()).
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.platform import forked

if TYPE_CHECKING:
    from harness.model import RunRecord
    from harness.run.finish import Reports

INVENTORY_TIMEOUT_S = 120.0  # NVML's start alone can take seconds on a GPU node without persistence
RENDER_TIMEOUT_S = 300.0
SEND_TIMEOUT_S = 30.0
EXIT_WAIT_S = 0.5  # at close, for a helper still busy; then it is killed
NICE = 10  # the helper's work waits for the run's where the two share a CPU
MAX_FRAME = 1 << 30
_HEADER = 8


class Gone(Exception):
    """The helper died, hung past a timeout or sent something else than asked."""


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise Gone("no answer in time")
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise Gone("its pipe closed")
        buf += chunk
    return bytes(buf)


def recv(fd: int, deadline: float | None) -> Any:
    """One frame's object (Gone at EOF, past `deadline`, or for a frame too large)."""
    n = int.from_bytes(_read_exact(fd, _HEADER, deadline), "big")
    if n > MAX_FRAME:
        raise Gone(f"a frame of {n} bytes")
    data = _read_exact(fd, n, deadline)
    try:
        return pickle.loads(data)  # noqa: S301 (written by a fork of this process: see above)
    except Exception as e:
        raise Gone(f"an unreadable frame: {type(e).__name__}") from e


def send(fd: int, obj: Any, deadline: float | None) -> None:
    """Write one frame (Gone when the reader is gone, or past `deadline` on a non-blocking fd)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(len(data).to_bytes(_HEADER, "big") + data)
    while view:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise Gone("it does not read")
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            continue
        except OSError as e:  # EPIPE: the helper is gone
            raise Gone(str(e)) from e
        view = view[n:]


class Helper:
    """The parent's side: the helper's inventory, and its rendering of the reports (Reports)."""

    def __init__(self, child: forked.Child | None, rx: int, tx: int) -> None:
        self.child, self._rx, self._tx = child, rx, tx
        self.failed = ""  # why the helper was given up, when it was
        self._inventory: dict[str, Any] | None = None

    @property
    def alive(self) -> bool:
        return not self.failed

    def inventory(self, read_here: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The node's inventory as the helper read it (sysinfo.collect), else `read_here()`."""
        if self.alive and self._inventory is None:
            try:
                kind, value = _answer(recv(self._rx, time.monotonic() + INVENTORY_TIMEOUT_S))
                if kind != "inventory" or not isinstance(value, dict):
                    raise Gone(f"its inventory failed: {value}")
                self._inventory = value
            except Gone as e:
                self._give_up(f"inventory: {e}")
        return self._inventory if self._inventory is not None else read_here()

    def prepare(self, output: Path) -> None:
        """Have the renderers' compiled template of a run directory in `output` loaded."""
        if self.alive:
            try:
                send(self._tx, ("prepare", output), time.monotonic() + SEND_TIMEOUT_S)
                return
            except Gone as e:
                self._give_up(f"prepare: {e}")
        self._here().prepare(output)

    def render(self, record: RunRecord, run_dir: Path) -> tuple[RunRecord, dict[str, str]]:
        """Every report rendered by the helper; in-process when it cannot, or a renderer failed
        there (the render in-process records the failure as the run's error, its traceback in
        harness.log)."""
        if self.alive:
            try:
                send(self._tx, ("render", record, run_dir), time.monotonic() + SEND_TIMEOUT_S)
                kind, value = _answer(recv(self._rx, time.monotonic() + RENDER_TIMEOUT_S))
                if kind == "rendered" and isinstance(value, dict) and \
                        all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
                    return record, value
                if kind != "failed":
                    raise Gone(f"a render answer of another shape: {kind}")
                # a renderer failed there: rendered here, the failure recorded and logged
            except Gone as e:
                self._give_up(f"render: {e}")
        return self._here().render(record, run_dir)

    @staticmethod
    def _here() -> Reports:
        from harness.run.finish import InProcess  # start-up: the fork happens before the run loads

        return InProcess()

    def _give_up(self, why: str) -> None:
        self.failed = why
        self.close()

    def release(self) -> None:
        """Nothing more will be asked of it: its pipes are closed now, so it exits (at EOF) while
        the run writes its outputs; close() then reaps it. A later render is done in-process."""
        self._close_pipes()
        if not self.failed:
            self.failed = "released"

    def _close_pipes(self) -> None:
        for fd in (self._rx, self._tx):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._rx = self._tx = -1

    def close(self) -> None:
        """End the helper: close the pipes (it exits at EOF), kill it if it is still busy after
        EXIT_WAIT_S, and reap it. Safe to call more than once."""
        self._close_pipes()
        if self.child is not None:
            self.child.end(EXIT_WAIT_S)
            self.child = None
        if not self.failed:
            self.failed = "closed"


def _answer(frame: Any) -> tuple[str, Any]:
    """A helper's answer, (kind, value); Gone for anything else."""
    if not (isinstance(frame, tuple) and len(frame) == 2 and isinstance(frame[0], str)):
        raise Gone(f"an answer of another shape: {type(frame).__name__}")
    return frame[0], frame[1]


def _collect_here() -> dict[str, Any]:
    from harness.platform import sysinfo  # start-up: a run whose helper read it never loads it

    return sysinfo.collect()


@contextmanager
def inventory_of(helper: Helper | None) -> Iterator[Callable[[], dict[str, Any]]]:
    """What reads a run's inventory: its helper's (read while the run loaded), else this process,
    its lsblk begun now so that its wait overlaps loading the suite and profile."""
    if helper is not None:
        yield lambda: helper.inventory(_collect_here)
        return
    from harness.platform import sysinfo  # start-up: a run whose helper read it never loads it

    disks = sysinfo.Disks()
    try:
        yield lambda: sysinfo.collect(disks=disks)
    finally:
        disks.close()


def fork() -> Helper | None:
    """Fork the helper; None where the system cannot, or another thread is alive (the run then
    does the helper's work itself: platform.forked)."""
    if not forked.forkable():
        return None
    try:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
    except OSError:
        return None

    def work() -> None:  # in the helper
        os.close(to_child_w)
        os.close(from_child_r)
        serve(to_child_r, from_child_w)

    child = forked.start(work)
    os.close(to_child_r)
    os.close(from_child_w)
    if child is None:
        os.close(to_child_w)
        os.close(from_child_r)
        return None
    os.set_blocking(to_child_w, False)  # a helper that stops reading cannot block the run
    return Helper(child, from_child_r, to_child_w)


def serve(rx: int, tx: int) -> None:
    """The helper's work: the inventory first, then the renderers, then each request until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C is the run's to handle
    os.umask(os.umask(0o022) | 0o022)  # as the run's own (session._launch): nothing group- or world-writable
    gc.enable()  # run.early turned it off for the run's start; this process goes on for the run's length
    try:
        os.nice(NICE)
    except OSError:
        pass
    from harness.platform import sysinfo  # start-up: the helper loads what it does, the run does not

    try:
        answer: tuple[str, Any] = ("inventory", sysinfo.collect())
    except Exception as e:  # the run reads it again itself, and meets the error there
        answer = ("failed", f"{type(e).__name__}: {e}")
    send(tx, answer, None)
    # start-up: the renderers load here, beside the run's start
    import jinja2  # noqa: F401

    from harness.report import outputs  # start-up: as jinja2

    while True:
        try:
            request = recv(rx, None)
        except Gone:
            return
        if request[0] == "prepare":
            outputs.prepare(request[1])
        elif request[0] == "render":
            record, run_dir = request[1], request[2]
            try:
                texts = {name: fn(record, run_dir) for name, fn in outputs.RENDERERS.items()}
                reply: tuple[str, Any] = ("rendered", texts)
            except Exception as e:  # the run renders again itself, which records the failure
                reply = ("failed", f"{type(e).__name__}: {e}")
            send(tx, reply, None)
