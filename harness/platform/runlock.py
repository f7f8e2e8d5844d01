"""One load at a time per node: an flock(2) on a lock file whose content names the holder.

Two runs that load the node at once would measure each other, so a run with any
load-generating check takes the lock exclusively and a second one refuses, naming the first
one's PID, start time and run directory. Runs that only read (config audit, inventory,
health reads: a Slurm prolog) take it shared, so any number of them run side by side, but
never beside a load run. The kernel drops the lock when its holder dies, however it dies, so
a crashed run never leaves the node locked; the next exclusive run reads the dead holder's
run directory from the file and cleans up what it left running (ledger.py).

The lock steers what a root run kills and deletes, so it is trusted only when nobody else
can have written it: it lives in a directory of the invoking user's that no one else may
write (/run/harness, made 0700, for root), and it is opened without following symlinks and
refused unless it is a regular file of ours, with one link, writable by no one else.
The file is $HARNESS_LOCK_FILE, else /run/harness/harness.lock (root) or
$XDG_RUNTIME_DIR/harness/harness.lock.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.fsutil import why_not

DEFAULT = Path("/run/harness/harness.lock")


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
    if os.geteuid() == 0:
        return DEFAULT
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime else Path(f"/tmp/harness-{os.geteuid()}")
    return base / "harness" / "harness.lock"


def _own_dir(path: Path, create: bool) -> None:
    """`path` is a real directory of ours that nobody else may write (made 0700 if missing)."""
    if create:
        try:
            path.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            pass
        except OSError as e:
            raise RunLocked(f"cannot make the run-lock directory {path}: {why_not(e)} "
                            "(set HARNESS_LOCK_FILE to a file in a directory of yours)") from e
    st = os.lstat(path)
    problem = trust_problem(st, dir_ok=True)
    if problem:
        raise RunLocked(f"refusing the run-lock directory {path}: {problem}; "
                        "only a directory of yours that no one else may write is trusted")


def trust_problem(st: os.stat_result, dir_ok: bool = False) -> str:
    """Why a file (or directory) with this lstat() is not to be trusted, or ''."""
    me = os.geteuid()
    if dir_ok and stat.S_ISDIR(st.st_mode):
        if st.st_uid not in (me, 0):
            return f"owned by uid {st.st_uid}, not by uid {me} or root"
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return f"writable by others (mode {stat.S_IMODE(st.st_mode):o})"
        return ""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file" + (" (a directory)" if stat.S_ISDIR(st.st_mode) else "")
    if st.st_uid != me:
        return f"owned by uid {st.st_uid}, not by uid {me}"
    if st.st_mode & 0o022:
        return f"writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    if st.st_nlink != 1:
        return f"it has {st.st_nlink} hard links"
    return ""


class RunLock:
    """The node's run lock. `acquire()` returns the previous holder when it died holding it
    (exclusive mode only: a shared holder never cleans up after anyone)."""

    def __init__(self, path: Path | None = None, *, shared: bool = False) -> None:
        self.path = path or lock_path()
        self.shared = shared
        self.fd: int | None = None
        self.started = ""

    def _open(self) -> int:
        _own_dir(self.path.parent, create=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o600)
        except OSError as e:
            if e.errno == errno.ELOOP:
                why = "it is a symbolic link"
            elif e.errno in (errno.EACCES, errno.EPERM):
                why = "not writable by this user (someone else's file?)"
            else:
                why = why_not(e)
            raise RunLocked(f"refusing the run lock {self.path}: {why}; remove it, or set "
                            "HARNESS_LOCK_FILE to a file in a directory of yours") from e
        problem = trust_problem(os.fstat(fd))
        if problem:
            os.close(fd)
            raise RunLocked(f"refusing the run lock {self.path}: {problem}; remove it, or set "
                            "HARNESS_LOCK_FILE to a file in a directory of yours")
        return fd

    def acquire(self, started: str) -> Holder | None:
        fd = self._open()
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = Holder.parse(_read(fd))
            os.close(fd)
            raise RunLocked(self._busy(holder)) from None
        self.fd = fd
        self.started = started
        if self.shared:  # the note names the exclusive holder; readers leave it alone
            return None
        previous = Holder.parse(_read(fd))
        self._write("")
        return previous

    def _busy(self, h: Holder | None) -> str:
        if h is None:
            who = ("another harness run (its details are not readable yet)" if self.shared
                   else "read-only harness runs (a prolog?) or a run whose details are not written yet")
        else:
            who = (f"harness PID {h.pid}, started {h.started or '?'}"
                   + (f", run dir {h.run_dir}" if h.run_dir else ""))
        return (f"another run is in progress on this node: {who} (lock {self.path}); "
                "two runs at once would measure each other")

    def set_run_dir(self, run_dir: Path) -> None:
        self._write(str(run_dir))

    def _write(self, run_dir: str) -> None:
        if self.fd is None or self.shared:
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
        if not self.shared:
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
