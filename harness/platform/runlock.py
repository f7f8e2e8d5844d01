"""One harness run per node: an flock(2) on a lock file whose content names the holder.

Two runs at once would measure each other, so a second `harness run` refuses, naming the
first one's PID, start time and run directory. The kernel drops the lock when its holder
dies, however it dies, so a crashed run never leaves the node locked; the next run reads the
dead holder's run directory from the file and cleans up what it left running (ledger.py).
The file is $HARNESS_LOCK_FILE, else /run/lock/harness.lock.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.fsutil import why_not

DEFAULT = Path("/run/lock/harness.lock")


class RunLocked(HarnessError):
    """Another harness run holds the node's run lock."""


@dataclass(frozen=True)
class Holder:
    """What a lock file says about the run that holds (or last held) it."""

    pid: int | None
    started: str
    run_dir: str

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        try:
            d = json.loads(text)
            return cls(int(d["pid"]) if d.get("pid") is not None else None, str(d.get("started", "")),
                       str(d.get("run_dir", "")))
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def lock_path() -> Path:
    env = os.environ.get("HARNESS_LOCK_FILE")
    if env:
        return Path(env)
    return DEFAULT if DEFAULT.parent.is_dir() else Path("/run/harness.lock")


class RunLock:
    """The node's run lock. `acquire()` returns the previous holder when it died holding it."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or lock_path()
        self.fd: int | None = None
        self.started = ""
        self.writable = True

    def acquire(self, started: str) -> Holder | None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except PermissionError:  # a lock file made by another user: lock it, leave its text
            self.writable = False
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except OSError as e:
                raise RunLocked(f"cannot open the run lock {self.path}: {why_not(e)} "
                                "(set HARNESS_LOCK_FILE to a writable path)") from e
        except OSError as e:
            raise RunLocked(f"cannot open the run lock {self.path}: {why_not(e)} "
                            "(set HARNESS_LOCK_FILE to a writable path)") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = Holder.parse(_read(fd))
            os.close(fd)
            raise RunLocked(self._busy(holder)) from None
        self.fd = fd
        self.started = started
        previous = Holder.parse(_read(fd))
        self._write("")
        return previous

    def _busy(self, h: Holder | None) -> str:
        if h is None:
            who = "another harness run (its details are not readable yet)"
        else:
            who = (f"harness PID {h.pid}, started {h.started or '?'}"
                   + (f", run dir {h.run_dir}" if h.run_dir else ""))
        return (f"another run is in progress on this node: {who} (lock {self.path}); "
                "two runs at once would measure each other")

    def set_run_dir(self, run_dir: Path) -> None:
        self._write(str(run_dir))

    def _write(self, run_dir: str) -> None:
        if self.fd is None or not self.writable:
            return
        text = json.dumps({"pid": os.getpid(), "started": self.started, "run_dir": run_dir}) + "\n"
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, text.encode(), 0)
        except OSError:
            pass  # the lock itself holds; only the note about the holder is missing

    def release(self) -> None:
        if self.fd is None:
            return
        if self.writable:
            try:
                os.ftruncate(self.fd, 0)  # a clean exit leaves nothing for the next run to clean
            except OSError:
                pass
        os.close(self.fd)  # closing drops the flock
        self.fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8", errors="replace")
    except OSError:
        return ""
