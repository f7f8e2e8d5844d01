"""The builtin copy test: pinned host <-> GPU and GPU <-> GPU copy bandwidth, for nodes without nvbandwidth.

Run as `python -m harness.engines.copy --size 536870912 --iterations 16 --trials 3` (the gpu_bandwidth
check's `builtin` engine does; parsers/copylog reads its output). Backends: PyTorch or CuPy on
GPUs (`auto` picks the first importable; neither is a hard dependency), NumPy on host memory
(only when asked for, so tests run the same sizes, timing and arithmetic without a GPU).

Each copy is an asynchronous memcpy on a copy engine: from page-locked host memory to a GPU
and back, and between GPUs issued on the source GPU's stream; one GPU or one pair at a time.
After a warm-up copy, `iterations` back-to-back copies are timed between two synchronisations:
GB/s = bytes * iterations / seconds / 1e9; that is one trial, and the median of `trials` trials
is reported (as nvbandwidth's -i). As nvbandwidth does, each test runs on the CPUs local to the
GPU doing the copy (sysfs local_cpulist of its PCI device), so host buffers are allocated and
driven from that GPU's socket (a fresh page-locked buffer per test, never one cached from an
earlier GPU); the result names the CPUs used. The tests carry the names of their nvbandwidth
equivalents (host_to_device_memcpy_ce, device_to_host_memcpy_ce, device_to_device_memcpy_write_ce)
so a profile's references apply. Output: one JSON object per line (start, one result per GPU
or pair and test, error lines when a copy fails, done).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Optional

from harness.engines.io import choose_backend, emit

TESTS = {"h2d": "host_to_device_memcpy_ce", "d2h": "device_to_host_memcpy_ce",
         "p2p": "device_to_device_memcpy_write_ce"}
DEFAULT_SIZE = {"gpu": 512 * 2**20, "cpu": 8 * 2**20}  # nvbandwidth's default buffer: 512 MiB
DEFAULT_ITERATIONS = 16
DEFAULT_TRIALS = 3  # nvbandwidth's default -i
SYSFS = "/sys"
_Copy = tuple[Callable[[], Any], Callable[[], Any]]  # copy(), sync()


@dataclass(frozen=True)
class CopyResult:
    """One timed copy test: which way, how many bytes how often, how long, how fast."""

    test: str
    src: str  # "cpu" or "gpu<N>"
    dst: str
    bytes: int
    iterations: int
    seconds: float  # of the median trial
    gbps: float  # median of the trials
    trials: int = 1
    trial_gbps: tuple[float, ...] = ()
    cpus: str | None = None  # the CPU list the copy ran on (the GPU's local CPUs), None: not pinned


def gbps(nbytes: int, iterations: int, seconds: float) -> float:
    """Bandwidth of `iterations` copies of `nbytes` in `seconds`, in GB/s (10^9 B/s)."""
    return nbytes * iterations / seconds / 1e9 if seconds > 0 else 0.0


def time_copies(copy: Callable[[], Any], sync: Callable[[], Any], iterations: int,
                clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds for `iterations` copies queued back to back, after one synchronised warm-up copy."""
    copy()
    sync()
    t0 = clock()
    for _ in range(iterations):
        copy()
    sync()
    return clock() - t0


def plan(devices: list[int], p2p: bool) -> list[tuple[str, str, str]]:
    """(test, src, dst) for every GPU both ways, then every ordered GPU pair."""
    out = [(TESTS["h2d"], "cpu", f"gpu{d}") for d in devices]
    out += [(TESTS["d2h"], f"gpu{d}", "cpu") for d in devices]
    if p2p:
        out += [(TESTS["p2p"], f"gpu{a}", f"gpu{b}") for a in devices for b in devices if a != b]
    return out


def parse_cpulist(text: str) -> set[int]:
    """sysfs's '0-15,32-47' as a set of CPU numbers (empty for text that is not a list)."""
    out: set[int] = set()
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def local_cpus(pci_bus_id: str | None, sysfs: str = SYSFS) -> set[int] | None:
    """The CPUs local to a PCI device that this process may use; None when unknown."""
    if not pci_bus_id:
        return None
    parts = pci_bus_id.strip().lower().split(":")
    if len(parts) != 3:
        return None
    dev = f"{parts[0][-4:].rjust(4, '0')}:{parts[1]}:{parts[2] if '.' in parts[2] else parts[2] + '.0'}"
    try:
        with open(os.path.join(sysfs, "bus/pci/devices", dev, "local_cpulist"), encoding="ascii") as f:
            cpus = parse_cpulist(f.read())
    except OSError:
        return None
    usable = cpus & os.sched_getaffinity(0)
    return usable or None


@contextmanager
def pinned(cpus: set[int] | None) -> Iterator[None]:
    """Run the block on `cpus` (nothing changes for None), then restore the previous affinity."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def cpulist(cpus: set[int] | None) -> str | None:
    """{0, 1, 2, 5} as '0-2,5'."""
    if not cpus:
        return None
    runs: list[list[int]] = []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)


def measure(backend: _Backend, test: str, src: str, dst: str, nbytes: int, iterations: int,
            trials: int = 1, sysfs: str = SYSFS) -> CopyResult:
    """Set up the buffers of one test on `backend`, on the CPUs local to the GPU doing the copy
    (the destination of a host-to-GPU copy, else the source), and time `trials` trials. The core."""
    gpu = int((dst if test == TESTS["h2d"] else src)[3:])
    cpus = local_cpus(backend.pci_bus_id(gpu), sysfs)
    with pinned(cpus):
        if test == TESTS["h2d"]:
            copy, sync = backend.h2d(gpu, nbytes)
        elif test == TESTS["d2h"]:
            copy, sync = backend.d2h(gpu, nbytes)
        else:
            copy, sync = backend.p2p(gpu, int(dst[3:]), nbytes)
        times = [time_copies(copy, sync, iterations) for _ in range(max(1, trials))]
        backend.release()
    rates = [gbps(nbytes, iterations, s) for s in times]
    med = statistics.median(rates)
    seconds = statistics.median(times)
    return CopyResult(test, src, dst, nbytes, iterations, seconds, med, len(rates), tuple(rates),
                      cpulist(cpus))


class _Backend:
    """NumPy on host memory: each 'GPU' is a host buffer (tests, no GPU needed)."""

    name = "numpy"

    def __init__(self, host_devices: int = 2) -> None:
        import numpy  # start-up: optional backend, imported only when chosen

        self.np = numpy
        self.count = host_devices

    def devices(self) -> list[int]:
        return list(range(self.count))

    def pci_bus_id(self, device: int) -> str | None:
        """The GPU's PCI address ('0000:18:00.0'); None for a host stand-in."""
        return None

    def _pair(self, nbytes: int) -> tuple[Any, Any]:
        a = self.np.full(nbytes, 7, dtype=self.np.uint8)
        return a, self.np.empty_like(a)

    def h2d(self, device: int, nbytes: int) -> _Copy:
        host, dev = self._pair(nbytes)
        return (lambda: self.np.copyto(dev, host)), (lambda: None)

    def d2h(self, device: int, nbytes: int) -> _Copy:
        dev, host = self._pair(nbytes)
        return (lambda: self.np.copyto(host, dev)), (lambda: None)

    def p2p(self, src: int, dst: int, nbytes: int) -> _Copy:
        a, b = self._pair(nbytes)
        return (lambda: self.np.copyto(b, a)), (lambda: None)

    def release(self) -> None:
        """Free what the last test allocated."""


class _Torch(_Backend):
    name = "torch"

    def __init__(self) -> None:
        import torch  # start-up: optional backend, imported only when chosen

        self.torch = torch
        self._registered: list[Any] = []  # host buffers pinned with cudaHostRegister

    def devices(self) -> list[int]:
        return list(range(self.torch.cuda.device_count()))

    def pci_bus_id(self, device: int) -> str | None:
        p = self.torch.cuda.get_device_properties(device)
        bus = getattr(p, "pci_bus_id", None)
        if bus is None:
            return None
        return f"{getattr(p, 'pci_domain_id', 0):04x}:{bus:02x}:{getattr(p, 'pci_device_id', 0):02x}.0"

    def _host(self, nbytes: int) -> Any:
        """A page-locked buffer of its own for this test, first touched by this thread (running on
        the GPU's local CPUs), so its pages sit on that GPU's NUMA node. Not from PyTorch's pinned
        cache: empty_cache() never frees host memory (pytorch#134332), so GPU 0's buffer would be
        reused for every later GPU. Registered with cudaHostRegister, unregistered in release()."""
        import numpy  # start-up: optional, loaded only with the torch backend

        register = getattr(self.torch.cuda.cudart(), "cudaHostRegister", None)
        if register is None:  # a build without the binding: the cached pinned allocator
            return self.torch.full((nbytes,), 7, dtype=self.torch.uint8, pin_memory=True)
        buf = self.torch.from_numpy(numpy.full(nbytes, 7, dtype=numpy.uint8))  # first touch: here
        register(buf.data_ptr(), nbytes, 0)
        self._registered.append(buf)
        return buf

    def _dev(self, device: int, nbytes: int) -> Any:
        return self.torch.full((nbytes,), 7, dtype=self.torch.uint8, device=f"cuda:{device}")

    def h2d(self, device: int, nbytes: int) -> _Copy:
        host, dev = self._host(nbytes), self._dev(device, nbytes)
        return (lambda: dev.copy_(host, non_blocking=True)), (lambda: self.torch.cuda.synchronize(device))

    def d2h(self, device: int, nbytes: int) -> _Copy:
        host, dev = self._host(nbytes), self._dev(device, nbytes)
        return (lambda: host.copy_(dev, non_blocking=True)), (lambda: self.torch.cuda.synchronize(device))

    def p2p(self, src: int, dst: int, nbytes: int) -> _Copy:
        a, b = self._dev(src, nbytes), self._dev(dst, nbytes)

        def sync() -> None:
            self.torch.cuda.synchronize(src)
            self.torch.cuda.synchronize(dst)

        # PyTorch issues a cross-device copy on the source device's current stream
        return (lambda: b.copy_(a, non_blocking=True)), sync

    def release(self) -> None:
        cudart = self.torch.cuda.cudart()
        for buf in self._registered:
            cudart.cudaHostUnregister(buf.data_ptr())
        self._registered = []
        self.torch.cuda.empty_cache()


class _Cupy(_Backend):
    name = "cupy"

    def __init__(self) -> None:
        import cupy  # start-up: optional backend, imported only when chosen
        import cupyx

        self.cp, self.cpx = cupy, cupyx

    def devices(self) -> list[int]:
        return list(range(self.cp.cuda.runtime.getDeviceCount()))

    def pci_bus_id(self, device: int) -> str | None:
        return str(self.cp.cuda.Device(device).pci_bus_id)

    def _on(self, device: int, nbytes: int) -> tuple[Any, Any]:
        with self.cp.cuda.Device(device):
            return self.cp.full(nbytes, 7, dtype=self.cp.uint8), self.cp.cuda.Stream(non_blocking=True)

    def h2d(self, device: int, nbytes: int) -> _Copy:
        host = self.cpx.empty_pinned((nbytes,), dtype="uint8")
        dev, stream = self._on(device, nbytes)
        return (lambda: dev.data.copy_from_host_async(host.ctypes.data, nbytes, stream)), stream.synchronize

    def d2h(self, device: int, nbytes: int) -> _Copy:
        host = self.cpx.empty_pinned((nbytes,), dtype="uint8")
        dev, stream = self._on(device, nbytes)
        return (lambda: dev.data.copy_to_host_async(host.ctypes.data, nbytes, stream)), stream.synchronize

    def p2p(self, src: int, dst: int, nbytes: int) -> _Copy:
        a, stream = self._on(src, nbytes)  # issued on the source GPU's stream
        b, _ = self._on(dst, nbytes)

        def copy() -> None:
            with self.cp.cuda.Device(src):
                b.data.copy_from_device_async(a.data, nbytes, stream)

        return copy, stream.synchronize

    def release(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()
        self.cp.get_default_pinned_memory_pool().free_all_blocks()


def backend(name: str, host_devices: int = 2) -> _Backend:
    """The backend by name; `auto` is PyTorch, else CuPy (never the host). Raises ImportError."""
    return choose_backend(name, (_Torch, _Cupy), lambda: _Backend(host_devices))


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.engines.copy", description=__doc__)
    ap.add_argument("--size", type=int, default=None, help="bytes per copy (default 512 MiB on GPUs)")
    ap.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS, help="copies timed per trial")
    ap.add_argument("--trials", type=int, default=DEFAULT_TRIALS,
                    help="trials per test; the median is reported")
    ap.add_argument("--backend", choices=("auto", "torch", "cupy", "numpy"), default="auto")
    ap.add_argument("--no-p2p", action="store_true", help="host copies only")
    ap.add_argument("--host-devices", type=int, default=2,
                    help="numpy backend: host buffers standing in for GPUs")
    args = ap.parse_args(argv)
    try:
        be = backend(args.backend, args.host_devices)
        devices = be.devices()
    except Exception as e:  # import or driver failure: say so on the protocol, exit non-zero
        emit({"event": "error", "message": f"{type(e).__name__}: {e}"})
        return 2
    size = args.size or DEFAULT_SIZE["cpu" if be.name == "numpy" else "gpu"]
    tests = plan(devices, not args.no_p2p)
    emit({"event": "start", "backend": be.name, "size": size, "iterations": args.iterations,
           "trials": args.trials, "devices": devices, "pci_bus_ids": [be.pci_bus_id(d) for d in devices],
           "plan": [list(t) for t in tests]})
    if not devices:
        emit({"event": "error", "message": f"{be.name} sees no device"})
        return 2
    failed = False
    for test, src, dst in tests:
        try:
            r = measure(be, test, src, dst, size, args.iterations, args.trials)
            emit({"event": "result", **asdict(r)})
        except Exception as e:  # one copy failing must not hide the others
            failed = True
            emit({"event": "error", "test": test, "src": src, "dst": dst,
                   "message": f"{type(e).__name__}: {e}"})
    emit({"event": "done"})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
