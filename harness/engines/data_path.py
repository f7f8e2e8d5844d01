"""The data-path worker: write a dataset-like file set, or read one with N threads into memory.

Run as `python -m harness.engines.data_path generate ...` or `... read ...` (the data_path check
runs one process per step, so a timeout or Ctrl-C kills it with its process group).

- generate: files of log-uniform random sizes in [min, max] (multiples of 4 KiB) in
  subdirectories of 1000, until `total` bytes (or `count` files); each file is fdatasync'ed and
  its page cache dropped (posix_fadvise DONTNEED) so the reads that follow hit the device.
- read: the files in a shuffled order for `seconds` (going round again under O_DIRECT; one
  pass at most when buffered, as a second would hit the page cache), with `workers` threads.
  Each thread reads whole files with os.readv (the GIL is released) into its own
  preallocated buffer: page-aligned host memory, or with a GPU pinned host memory that is
  copied to the thread's GPU (PyTorch or CuPy, whichever is importable; workers spread over the
  GPUs round-robin) before the next read. O_DIRECT where the filesystem allows it (`--direct
  auto`), else buffered reads with each file's page cache dropped first (`--drop-cache`).

Output: one JSON object per line: start, result (or generated), error lines on failure.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import math
import mmap
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

ALIGN = 4096
POOL_BYTES = 8 * 1024 * 1024  # random bytes the generated files are cut from
PER_DIR = 1000
MAX_ERRORS_SHOWN = 3


def record_sizes(total: int, lo: int, hi: int, seed: int, count: int | None = None) -> list[int]:
    """File sizes, log-uniform in [lo, hi] and rounded down to 4 KiB, until `total` bytes or `count` files."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    out: list[int] = []
    done = 0
    while (len(out) < count) if count else (done < total):
        size = math.exp(rng.uniform(math.log(lo), math.log(hi))) if hi > lo else lo
        size = max(ALIGN, int(size) // ALIGN * ALIGN)
        out.append(size)
        done += size
    return out


def file_path(root: str, index: int) -> str:
    return os.path.join(root, f"{index // PER_DIR:04d}", f"sample-{index:07d}.bin")


def drop_cache(fd: int) -> bool:
    """Ask the kernel to drop the file's clean cached pages; False where it cannot."""
    advice = getattr(os, "POSIX_FADV_DONTNEED", None)
    if advice is None:
        return False
    try:
        os.posix_fadvise(fd, 0, 0, advice)
    except OSError:
        return False
    return True


def generate(root: str, sizes: Sequence[int], seed: int) -> dict[str, Any]:
    """Write the files; each one synced and dropped from the page cache."""
    pool = memoryview(random.Random(seed).randbytes(POOL_BYTES))  # noqa: S311 - file contents
    dropped = 0
    t0 = time.monotonic()
    for i, size in enumerate(sizes):
        path = file_path(root, i)
        if i % PER_DIR == 0:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            left, off = size, (i * 7 * ALIGN) % (POOL_BYTES // 2)
            while left:
                n = os.write(fd, pool[off:off + min(left, POOL_BYTES - off)])
                left -= n
                off = (off + n) % (POOL_BYTES // 2)
            os.fdatasync(fd)
            dropped += drop_cache(fd)
        finally:
            os.close(fd)
    return {"event": "generated", "files": len(sizes), "bytes": sum(sizes),
            "seconds": time.monotonic() - t0, "cache_dropped": dropped}


def scan(root: str, limit: int) -> list[tuple[str, int]]:
    """Regular non-empty files under root (sorted walk), at most `limit`."""
    out: list[tuple[str, int]] = []
    for here, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(here, name)
            try:
                st = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            if st.st_size > 0 and (st.st_mode & 0o170000) == 0o100000:
                out.append((path, st.st_size))
                if len(out) >= limit:
                    return out
    return out


# ---------------------------------------------------------------- where the bytes go

@dataclass
class Slot:
    """One worker's buffer (`view`, writable) and how to hand `n` bytes of it on (`copy`)."""

    view: memoryview
    copy: Callable[[int], None]
    keep: list[Any] = field(default_factory=list)  # owners of the memory behind view


class HostSink:
    """Page-aligned host memory (mmap); nothing is copied further."""

    name = "host"

    def devices(self) -> list[int]:
        return []

    def slot(self, worker: int, size: int) -> Slot:
        m = mmap.mmap(-1, size)
        return Slot(memoryview(m), lambda n: None, [m])


def _view(ptr: int, size: int) -> memoryview:
    return memoryview((ctypes.c_ubyte * size).from_address(ptr)).cast("B")


class TorchSink(HostSink):
    """Pinned host tensors, copied to the worker's GPU on its own stream."""

    name = "torch"

    def __init__(self) -> None:
        import torch  # start-up: optional backend, imported only when chosen

        self.torch = torch

    def devices(self) -> list[int]:
        cuda = self.torch.cuda
        return list(range(cuda.device_count())) if cuda.is_available() else []

    def slot(self, worker: int, size: int) -> Slot:
        torch = self.torch
        dev = self.devices()[worker % len(self.devices())]
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        gpu = torch.empty(size, dtype=torch.uint8, device=torch.device("cuda", dev))
        stream = torch.cuda.Stream(device=dev)

        def copy(n: int) -> None:
            with torch.cuda.stream(stream):
                gpu[:n].copy_(host[:n], non_blocking=True)
            stream.synchronize()

        return Slot(_view(host.data_ptr(), size), copy, [host, gpu, stream])


class CupySink(HostSink):
    """Pinned host memory (cudaHostAlloc), copied to the worker's GPU on its own stream."""

    name = "cupy"

    def __init__(self) -> None:
        import cupy  # start-up: optional backend, imported only when chosen

        self.cp = cupy

    def devices(self) -> list[int]:
        try:
            return list(range(self.cp.cuda.runtime.getDeviceCount()))
        except Exception:  # no driver or no device: the caller falls back or fails
            return []

    def slot(self, worker: int, size: int) -> Slot:
        cp = self.cp
        dev = self.devices()[worker % len(self.devices())]
        host = cp.cuda.alloc_pinned_memory(size)
        with cp.cuda.Device(dev):
            gpu = cp.cuda.alloc(size)
            stream = cp.cuda.Stream(non_blocking=True)

        def copy(n: int) -> None:
            with cp.cuda.Device(dev):
                gpu.copy_from_host_async(ctypes.c_void_p(host.ptr), n, stream)
                stream.synchronize()

        return Slot(_view(host.ptr, size), copy, [host, gpu, stream])


def sink(name: str) -> tuple[HostSink, str]:
    """The sink by name and a note; `auto` takes PyTorch, else CuPy, when it sees a GPU, else host."""
    if name == "host":
        return HostSink(), ""
    tried = []
    choices = {"auto": (TorchSink, CupySink), "torch": (TorchSink,), "cupy": (CupySink,)}[name]
    for cls in choices:
        try:
            s = cls()
        except ImportError as e:
            tried.append(f"{cls.name} not importable ({e})")
            continue
        if s.devices():
            return s, ""
        tried.append(f"{cls.name} sees no GPU")
    if name != "auto":
        raise RuntimeError("; ".join(tried))
    return HostSink(), "; ".join(tried)


# ---------------------------------------------------------------- reading

def open_flags(mode: str, probe: str, buffer: memoryview) -> tuple[int, str]:
    """O_RDONLY|O_DIRECT when `mode` allows and a test read of `probe` works; else O_RDONLY and why."""
    direct = getattr(os, "O_DIRECT", 0)
    if mode == "off":
        return os.O_RDONLY, "buffered (direct: false)"
    if not direct:
        why = "this platform has no O_DIRECT"
    else:
        try:
            fd = os.open(probe, os.O_RDONLY | direct)
            try:
                os.readv(fd, [buffer])
            finally:
                os.close(fd)
            return os.O_RDONLY | direct, "O_DIRECT"
        except OSError as e:
            why = f"O_DIRECT refused: {e.strerror or e}"
    if mode == "on":
        raise RuntimeError(f"{probe}: {why} (set direct: auto or false)")
    return os.O_RDONLY, f"buffered ({why})"


@dataclass
class Tally:
    bytes: int = 0
    samples: int = 0
    errors: list[str] = field(default_factory=list)


def read_pass(order: Sequence[tuple[str, int]], slots: Sequence[Slot], flags: int,
              seconds: float, repeat: bool = False) -> tuple[list[Tally], float, bool]:
    """Read the files in `order` with one thread per slot until done or `seconds` pass.

    With `repeat` the threads go round the files again until the time is up (for O_DIRECT,
    where a second pass still reads the device). Returns each worker's tally, the wall time
    from the start signal to the last thread's end, and whether every file was read once.
    """
    lock = threading.Lock()
    position = [0]
    go = threading.Event()
    tallies = [Tally() for _ in slots]
    deadline = [math.inf]

    def take() -> int:
        with lock:
            i = position[0]
            position[0] += 1
            return i

    def work(slot: Slot, tally: Tally) -> None:
        go.wait()
        while time.monotonic() < deadline[0]:
            i = take()
            if i >= len(order) and not repeat:
                return
            path, size = order[i % len(order)]
            try:
                fd = os.open(path, flags)
            except OSError as e:
                tally.errors.append(f"{path}: {e.strerror or e}")
                continue
            try:
                got = 0
                while True:
                    n = os.readv(fd, [slot.view])
                    if n <= 0:  # end of file (it shrank since the scan, or an exact fit)
                        tally.samples += 1
                        break
                    slot.copy(n)
                    got += n
                    tally.bytes += n
                    if got >= size:
                        tally.samples += 1
                        break
                    if time.monotonic() >= deadline[0]:
                        break  # a huge file: stop mid-file, bytes count, the sample does not
            except Exception as e:  # EIO, or a failed GPU copy: counted and shown
                tally.errors.append(f"{path}: {getattr(e, 'strerror', None) or e}")
            finally:
                os.close(fd)

    threads = [threading.Thread(target=work, args=pair, daemon=True)
               for pair in zip(slots, tallies, strict=True)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    deadline[0] = t0 + seconds
    go.set()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    complete = position[0] >= len(order) and sum(t.samples for t in tallies) >= len(order)
    return tallies, elapsed, complete


def read(args: argparse.Namespace) -> dict[str, Any]:
    """One sweep step: scan, drop the cache, allocate, read; the result line."""
    files = scan(args.dir, args.max_files)
    if not files:
        raise RuntimeError(f"{args.dir}: no non-empty regular files to read")
    be, note = sink(args.backend)
    devices = be.devices()
    slots = [be.slot(w, args.buffer) for w in range(args.workers)]
    flags, io = open_flags(args.direct, files[0][0], slots[0].view)
    dropped = 0
    if args.drop_cache:
        for path, _ in files:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                dropped += drop_cache(fd)
            finally:
                os.close(fd)
    _emit({"event": "start", "backend": be.name, "backend_note": note, "devices": devices, "io": io,
           "cache_dropped": dropped, "files": len(files), "bytes": sum(s for _, s in files),
           "workers": args.workers, "buffer": args.buffer})
    order = list(files)
    random.Random(args.seed).shuffle(order)  # noqa: S311 - a read order
    repeat = bool(flags & getattr(os, "O_DIRECT", 0))  # buffered: a second pass would hit the cache
    tallies, elapsed, complete = read_pass(order, slots, flags, args.seconds, repeat)
    errors = [e for t in tallies for e in t.errors]
    return {"event": "result", "workers": args.workers, "bytes": sum(t.bytes for t in tallies),
            "samples": sum(t.samples for t in tallies), "seconds": elapsed, "complete": complete,
            "errors": len(errors), "first_errors": errors[:MAX_ERRORS_SHOWN]}


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _size(text: str) -> int:
    value = int(text)
    if value < ALIGN or value % ALIGN:
        raise argparse.ArgumentTypeError(f"{text}: must be a positive multiple of {ALIGN}")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.engines.data_path", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--dir", required=True)
    g.add_argument("--total", type=int, default=0)
    g.add_argument("--count", type=int, default=None)
    g.add_argument("--min", type=_size, required=True)
    g.add_argument("--max", type=_size, required=True)
    g.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("read")
    r.add_argument("--dir", required=True)
    r.add_argument("--workers", type=int, required=True)
    r.add_argument("--seconds", type=float, required=True)
    r.add_argument("--direct", choices=("auto", "on", "off"), default="auto")
    r.add_argument("--drop-cache", action=argparse.BooleanOptionalAction, default=True)
    r.add_argument("--backend", choices=("auto", "torch", "cupy", "host"), default="auto")
    r.add_argument("--buffer", type=_size, default=4 * 1024 * 1024)
    r.add_argument("--max-files", type=int, default=1_000_000)
    r.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "generate":
            sizes = record_sizes(args.total, args.min, args.max, args.seed, args.count)
            _emit(generate(args.dir, sizes, args.seed))
        else:
            _emit(read(args))
    except Exception as e:  # say what failed on the protocol, exit non-zero
        why = "no space left on the target" if getattr(e, "errno", None) == errno.ENOSPC else ""
        _emit({"event": "error", "message": f"{type(e).__name__}: {e}" + (f" ({why})" if why else "")})
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
