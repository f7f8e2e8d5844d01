"""The builtin burn: repeated matrix multiplies on every device, one process per device, checked.

Run as `python -m harness.engines.burn --seconds 60 --dtype bf16` (the gpu_burn check's
`builtin` engine does; parsers/burnlog reads its output). Backends (harness.engines.burn_ops):
PyTorch or CuPy on GPUs (`auto` picks the first importable; neither is a hard dependency), NumPy
on the host (only when asked for, so tests exercise the same logic without a GPU).

The parent starts one child process per device (`--device N`) and forwards each child's result
as it comes: a device that hangs is killed after the deadline plus a grace period and reported,
and the other devices' results are kept. In a child, only the products are timed: `batch`
products are queued back to back between two synchronisations, and every one of them is compared
with the first product outside the timed window, on the device, its mismatch counts read back
once per batch (`verified` says how many were: all of them).
TFLOPS counts the timed products only; `tflops_wall` is the rate over the whole loop, checks
included. Every device uses the same inputs, so the first product's digest must agree across
GPUs of one model, and its corner is checked against float64 computed on the host. A memory pass fills
`--mem-fraction` of the free memory before the burn and verifies it after.
Output: one JSON object per line (start, one result or error per device, done).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness.engines.burn_ops import TOLERANCE, CupyBackend, NumpyBackend, Ops, TorchBackend
from harness.engines.io import choose_backend, emit

DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp64")
DEFAULT_SIZE = {"gpu": 8192, "cpu": 256}
DEFAULT_BATCH = {"gpu": 10, "cpu": 1}
GRACE_S = 30.0  # after the deadline, how long a child may take to report before it is killed


@dataclass(frozen=True)
class DeviceResult:
    """What one device did: products timed, products verified and how many differed, the rates."""

    gpu: int
    iterations: int  # products timed
    verified: int  # products compared with the first (outside the timed windows)
    errors: int  # of those, how many differed
    seconds: float  # time inside the timed windows
    wall_seconds: float
    tflops: float  # timed products only
    tflops_wall: float  # the whole loop, verification included
    digest: str = ""  # of the first product: equal on every GPU of one model
    tile_error: float = 0.0  # max relative error of the first product's corner against float64
    tile_ok: bool = True
    mem_bytes: int = 0
    mem_errors: int = 0
    name: str = ""
    pci_bus_id: str | None = None


def tflops(size: int, iterations: int, seconds: float) -> float:
    """Rate of `iterations` n x n x n multiplies (2 n^3 flops each) in `seconds`, in TFLOPS."""
    return 2.0 * size**3 * iterations / seconds / 1e12 if seconds > 0 else 0.0


def burn_loop(gpu: int, size: int, ops: Ops, deadline: float, batch: int = 1, dtype: str = "fp64",
              clock: Callable[[], float] = time.monotonic) -> DeviceResult:
    """Multiply until `deadline`: time batches of products only, then compare every product of the
    batch with the first outside the timed window. The engine's core, pure of I/O."""
    start = clock()
    first = ops.multiply()
    ops.sync()
    digest, tile = ops.digest(first), ops.tile_error(first)
    iterations = verified = errors = 0
    timed = 0.0
    while clock() < deadline:
        t0 = clock()
        products = [ops.multiply() for _ in range(batch)]
        ops.sync()
        timed += clock() - t0
        iterations += batch
        errors += mismatched(ops, products, first)
        verified += len(products)
    wall = clock() - start
    return DeviceResult(gpu, iterations, verified, errors, timed, wall, tflops(size, iterations, timed),
                        tflops(size, iterations, wall), digest, tile, tile <= TOLERANCE.get(dtype, 1e-2),
                        name=ops.name, pci_bus_id=ops.pci_bus_id)


def mismatched(ops: Ops, products: Sequence[Any], first: Any) -> int:
    """How many of a batch's products differ from the first: counted on the device and read back
    at once where the backend can (Ops.count/read), else compared one by one."""
    if ops.count is not None and ops.read is not None:
        return sum(1 for n in ops.read([ops.count(c, first) for c in products]) if n)
    return sum(1 for c in products if ops.differs(c, first))


def backend(name: str, host_devices: int = 1) -> NumpyBackend:
    """The backend by name; `auto` is PyTorch, else CuPy (never the host). Raises ImportError."""
    return choose_backend(name, (TorchBackend, CupyBackend), lambda: NumpyBackend(host_devices))


def run_device(be: NumpyBackend, device: int, size: int, dtype: str, seconds: float, batch: int,
               mem_fraction: float) -> DeviceResult:
    """One device's whole burn: memory pattern in, products timed and verified, pattern checked."""
    ops = be.setup(device, size, dtype)
    mem = be.memory(device, mem_fraction) if mem_fraction > 0 else None
    deadline = time.monotonic() + seconds
    r = burn_loop(device, size, ops, deadline, batch, dtype)
    if mem is None:
        return r
    nbytes = mem.nbytes
    return DeviceResult(**{**asdict(r), "mem_bytes": nbytes, "mem_errors": mem.verify()})


def run_children(argvs: Mapping[int, Sequence[str]], wait_s: float,
                 out: Callable[[dict[str, Any]], None] = emit) -> None:
    """Start one child per device, forward each child's result/error lines as they come; a child
    without a result after `wait_s` is killed and reported, the others' results are kept."""
    lock = threading.Lock()
    reported: set[int] = set()
    # stderr to files: a full pipe would block a chatty child; each is closed once its child ended
    errs = {d: tempfile.TemporaryFile(mode="w+") for d in argvs}  # noqa: SIM115
    procs = {d: subprocess.Popen(list(a), stdout=subprocess.PIPE, stderr=errs[d], text=True)
             for d, a in argvs.items()}

    def pump(d: int, p: subprocess.Popen[str]) -> None:
        assert p.stdout is not None
        for line in p.stdout:
            obj = _event(line)
            if obj is not None and obj.get("event") in ("result", "error"):
                with lock:
                    obj["gpu"] = d
                    reported.add(d)
                    out(obj)

    readers = [threading.Thread(target=pump, args=(d, p), daemon=True) for d, p in procs.items()]
    for t in readers:
        t.start()
    end = time.monotonic() + wait_s
    for d, p in procs.items():
        try:
            p.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            with lock:
                if d not in reported:
                    reported.add(d)
                    out({"event": "error", "gpu": d,
                         "message": f"hung: no result {wait_s:g} s after the start; its process was "
                                    "killed (the other GPUs' results are kept)"})
    for t in readers:
        t.join(timeout=5)
    for d, p in procs.items():
        with lock:
            errs[d].seek(0)
            err = errs[d].read().strip().splitlines()
            errs[d].close()
            if d not in reported:
                out({"event": "error", "gpu": d, "message": f"exit {p.returncode} without a result"
                     + (f": {err[-1][:300]}" if err else "")})


def _event(line: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.engines.burn", description=__doc__)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--dtype", choices=DTYPES, default="bf16")
    ap.add_argument("--backend", choices=("auto", "torch", "cupy", "numpy"), default="auto")
    ap.add_argument("--size", type=int, default=None, help="matrix side (default 8192 on GPUs, 256 on CPU)")
    ap.add_argument("--batch", type=int, default=None,
                    help="products timed per verification (default 10; 1 on the CPU)")
    ap.add_argument("--mem-fraction", type=float, default=0.8,
                    help="share of free device memory the memory pass fills (0: none)")
    ap.add_argument("--host-devices", type=int, default=None,
                    help="numpy backend: stand-ins for GPUs (default: one per device CUDA_VISIBLE_DEVICES "
                         "names, as the gpu_burn check sets it, else 1)")
    ap.add_argument("--device", type=int, default=None, help="child mode: burn this device only")
    ap.add_argument("--grace", type=float, default=GRACE_S, help="seconds a child may overrun the burn")
    args = ap.parse_args(argv)
    if args.host_devices is None:
        visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        args.host_devices = len(visible) or 1
    try:
        be = backend(args.backend, args.host_devices)
        devices = be.devices() if args.device is None else [args.device]
    except Exception as e:  # import or driver failure: say so on the protocol, exit non-zero
        emit({"event": "error", "gpu": None, "message": f"{type(e).__name__}: {e}"})
        return 2
    kind = "cpu" if be.name == "numpy" else "gpu"
    size, batch = args.size or DEFAULT_SIZE[kind], max(1, args.batch or DEFAULT_BATCH[kind])
    if args.device is not None:  # child: one device, one result line
        try:
            r = run_device(be, args.device, size, args.dtype, args.seconds, batch, args.mem_fraction)
        except Exception as e:  # the device failed: say so, the parent keeps the others
            emit({"event": "error", "gpu": args.device, "message": f"{type(e).__name__}: {e}"})
            return 1
        emit({"event": "result", **asdict(r)})
        return 0
    emit({"event": "start", "backend": be.name, "dtype": args.dtype, "size": size, "batch": batch,
          "devices": devices, "seconds": args.seconds})
    if not devices:
        emit({"event": "error", "gpu": None, "message": f"{be.name} sees no device"})
        return 2
    child = [sys.executable, "-m", "harness.engines.burn", "--seconds", str(args.seconds),
             "--dtype", args.dtype, "--backend", be.name, "--size", str(size), "--batch", str(batch),
             "--mem-fraction", str(args.mem_fraction), "--host-devices", str(args.host_devices)]
    failed: list[bool] = []

    def out(obj: dict[str, Any]) -> None:
        failed.append(obj.get("event") == "error")
        emit(obj)

    run_children({d: [*child, "--device", str(d)] for d in devices}, args.seconds + args.grace, out)
    emit({"event": "done"})
    return 1 if any(failed) else 0


if __name__ == "__main__":
    sys.exit(main())
