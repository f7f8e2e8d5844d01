"""Files made and read safely: atomic writes (a temporary file beside the target, fsync, rename
over it), files made O_EXCL|O_NOFOLLOW, bounded reads (read_regular: a node's file, following no
symlink; read_bounded: a run file, refused whole when too large), and whether a file may be
trusted (who owns it and every directory above it, who else may write them)."""

from __future__ import annotations

import errno
import json
import os
import pwd
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from harness.errors import RecordError, StorageError


def atomic_write_text(path: Path, text: str, *, durable: bool = True,
                      before: Callable[[Path], object] = lambda _p: None) -> None:
    """Replace `path` with `text` so readers see the old file or the new one, never half; `before`
    sees the finished temporary file first (it may raise to keep `path` as it was)."""
    data = text.encode("utf-8")
    _atomic_write(path, lambda f: f.write(data), durable, before)


def _umask() -> int:
    """The process umask, read without changing it (Linux /proc); 0o022 when unknown."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write beside `path` and rename over it; `durable` also fsyncs (survives power loss)."""
    _atomic_write(path, lambda f: f.write(data), durable)


def atomic_write_chunks(path: Path, chunks: Iterable[str], *, durable: bool = True) -> None:
    """atomic_write_text of text that comes in pieces (a large report), never held whole."""

    def fill(f: BinaryIO) -> None:
        for chunk in chunks:
            f.write(chunk.encode("utf-8"))

    _atomic_write(path, fill, durable)


def _atomic_write(path: Path, fill: Callable[[BinaryIO], object], durable: bool,
                  before: Callable[[Path], object] = lambda _p: None) -> None:
    fd, tmp = temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # like any new file (mkstemp makes 0600)
            fill(f)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        before(Path(tmp))
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise StorageError(f"{path}: cannot write: {why_not(e)}") from e
        raise


def atomic_write_with(path: Path, fill: Callable[[BinaryIO], object], *, durable: bool = True,
                      before: Callable[[Path], object] = lambda _p: None) -> None:
    """atomic_write_bytes of what `fill` writes to the open temporary file; `before` sees the
    finished temporary file before it replaces `path` (it may raise to keep `path` as it was)."""
    _atomic_write(path, fill, durable, before)


def temp_beside(path: Path) -> tuple[int, str]:
    """A new temporary file beside `path` (made O_EXCL|O_NOFOLLOW, 0600, a random name: a symlink
    planted for it is never followed), as (fd, name); StorageError when it cannot be made."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise StorageError(f"{path}: cannot write: {why_not(e)}") from e


def create_new(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `path`, which must not exist yet (O_EXCL|O_NOFOLLOW: never through a planted
    file or symlink); the mode is set on the open file. StorageError otherwise."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise StorageError(f"{path}: cannot create: {why_not(e)}") from e
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), mode)
        f.write(data)


def read_regular(path: Path, limit: int, *, tail: bool = False) -> bytes:
    """At most `limit` bytes of a regular file (its last ones with `tail`), opened O_NOFOLLOW and
    without blocking: a symlink (to a file of root's), a FIFO or a device raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if tail and st.st_size > limit:
            f.seek(st.st_size - limit)
        return f.read(limit)


def _owner(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def untrusted(path: Path) -> str:
    """Why `path` is not to be trusted, '' when it is: the file (or directory), after symlinks,
    and every directory above it must be owned by root or this user and writable by no one else;
    an ancestor writable by others is accepted only with the sticky bit (as /tmp: no one else
    may replace what this user or root made in it). Every symlink on the way there must be root's
    or this user's too: another user's link (her `reports` -> a directory of root's, in a shared
    directory) would choose where root reads or writes, and could be turned elsewhere after the
    check. Use the file at its resolved path (resolve)."""
    me = os.geteuid()
    why = _foreign_link(path, me)
    if why:
        return why
    real = Path(os.path.realpath(path))
    for i, p in enumerate((real, *real.parents)):
        try:
            st = os.lstat(p)
        except OSError as e:
            return f"{p}: cannot inspect: {why_not(e)}"
        if st.st_uid not in (0, me):
            return f"{p} is owned by {_owner(st.st_uid)}, not by root or {_owner(me)}"
        if st.st_mode & 0o022 and not (i and stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX):
            return f"{p} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return ""


MAX_LINKS = 40  # symlinks followed on one path at most (as the kernel's ELOOP limit)


def _foreign_link(path: Path, me: int) -> str:
    """Why a symlink met on the way to `path` is not to be followed ('' when none is another
    user's): each component is looked at as the kernel walks it, link targets included."""
    cur = Path("/")
    todo = list(Path(os.path.abspath(path)).parts[1:])
    hops = 0
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            cur = cur.parent
            continue
        nxt = cur / part
        try:
            st = os.lstat(nxt)
        except OSError:
            return ""  # what is missing is the caller's to find (realpath below)
        if not stat.S_ISLNK(st.st_mode):
            cur = nxt
            continue
        if st.st_uid not in (0, me):
            return f"{nxt} is a symlink owned by {_owner(st.st_uid)}, not by root or {_owner(me)}"
        hops += 1
        if hops > MAX_LINKS:
            return f"{path}: more than {MAX_LINKS} symlinks on the way"
        try:
            target = Path(os.readlink(nxt))
        except OSError as e:
            return f"{nxt}: cannot inspect: {why_not(e)}"
        if target.is_absolute():
            cur = Path("/")
        todo = [*target.parts[1 if target.is_absolute() else 0:], *todo]
    return ""


def resolve(path: Path) -> Path:
    """`path` as given when no symlink or '..' leads elsewhere, else where it leads."""
    real = Path(os.path.realpath(path))
    return path if Path(os.path.abspath(path)) == real else real


def why_not(e: OSError) -> str:
    """An OSError's reason in lower case, e.g. 'no space left on device'."""
    if e.errno == errno.ENOSPC:
        return "no space left on device"
    text = e.strerror or str(e)
    return text[:1].lower() + text[1:]


_KERNEL_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))


def output_dir_problem(path: Path) -> str | None:
    """Why a run could not create its directory under `path` (nothing is created), or None: the
    nearest part that exists must be a directory this process can write, outside /proc, /sys and
    /dev (which refuse new directories whatever their modes say)."""
    full = Path(os.path.abspath(path))
    probe = full
    while not probe.exists():
        if probe.is_symlink():
            return f"{probe} is a dangling symbolic link"
        probe = probe.parent
    real = probe.resolve()
    if any(real == t or t in real.parents for t in _KERNEL_TREES):
        return f"{real} is in a kernel file system: name a directory on a disk"
    if not probe.is_dir():
        return f"{probe} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe}: permission denied (no write access)"
    return None


def atomic_write_json(path: Path, obj: Any, *, durable: bool = True) -> None:
    text = json.dumps(obj, indent=1, sort_keys=False, allow_nan=False) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def inside(root: Path, rel: str) -> Path | None:
    """root/rel resolved, or None when it leads outside root (a path recorded in results.json is
    data: a report must not read files elsewhere through it)."""
    base = root.resolve()
    path = (base / rel).resolve()
    return path if path.is_relative_to(base) else None


T = TypeVar("T")


def load_recorded(run_dir: Path | None, info: Any, load: Callable[[Path], T]) -> T | None:
    """`load` of the file a check's details record (info["file"], relative to the run directory
    and inside it); None when nothing is recorded, it lies outside, or it is missing. A file that
    is there but broken is an error naming it (RecordError from `load`, or this one: exit 2)."""
    if run_dir is None or not isinstance(info, Mapping) or not info.get("file"):
        return None
    path = inside(run_dir, str(info["file"]))
    if path is None:
        return None
    try:
        return load(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise RecordError(path, "", f"cannot read: {why_not(e)}") from e


class TooLarge(OSError):
    """read_bounded met a file over its limit, or something that is not a regular file."""


def read_bounded(path: Path, limit: int, *, follow: bool = True) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, never more held in memory: TooLarge
    (an OSError saying why) for a larger file, a FIFO, a device or a directory. Opened without
    blocking (a FIFO with no writer would wait forever) and checked once open; unless `follow`,
    a symlink is not followed (OSError ELOOP). Other OSErrors (missing, unreadable) pass through."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a socket")
            raise TooLarge(errno.EINVAL, f"is {what}, not a regular file", str(path))
        if st.st_size > limit:
            raise TooLarge(errno.EFBIG, too_large(st.st_size, limit), str(path))
        want = st.st_size + 1  # a buffer of the file's size, not of the limit (64 MiB a read)
        data = f.read(want)
        if len(data) == want:  # it grew since, or its size says nothing (/proc): read on to the limit
            data += f.read(limit + 1 - want)
    if len(data) > limit:  # it grew while read
        raise TooLarge(errno.EFBIG, too_large(len(data), limit), str(path))
    return data


def too_large(size: int, limit: int) -> str:
    return f"larger than {limit // (1024 * 1024)} MiB ({size} bytes): not read"
