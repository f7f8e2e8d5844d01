"""The builtin burn: repeated matrix multiplies on every device at once, each result checked.

Run as `python -m harness.engines.burn --seconds 60 --dtype bf16` (the gpu_burn check's
`builtin` engine does; parsers/burnlog reads its output). Backends: PyTorch or CuPy on GPUs
(`auto` picks the first importable; neither is a hard dependency), NumPy on the CPU (only when
asked for, so tests exercise the same logic without a GPU). Silent-data-corruption check: the
first product of each device is kept and every later product is compared with it element by
element; an iteration that differs counts as one error. Output: one JSON object per line
(start, one result per device, done; error lines when a device fails).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from harness.engines.io import choose_backend, emit

DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp64")
_Ops = tuple[Callable[[], Any], Callable[[Any, Any], bool]]  # multiply(), differs(product, first)
DEFAULT_SIZE = {"gpu": 8192, "cpu": 256}


@dataclass(frozen=True)
class DeviceResult:
    """What one device did: its multiplies, how many disagreed with the first, and the rate."""

    gpu: int
    iterations: int
    errors: int
    seconds: float
    tflops: float


def tflops(size: int, iterations: int, seconds: float) -> float:
    """Rate of `iterations` n x n x n multiplies (2 n^3 flops each) in `seconds`, in TFLOPS."""
    return 2.0 * size**3 * iterations / seconds / 1e12 if seconds > 0 else 0.0


def burn_loop(gpu: int, size: int, multiply: Callable[[], Any], differs: Callable[[Any, Any], bool],
              deadline: float, clock: Callable[[], float] = time.monotonic) -> DeviceResult:
    """Multiply until `deadline`; compare every product with the first. The engine's core, pure of I/O."""
    start = clock()
    first = multiply()
    iterations, errors = 1, 0
    while clock() < deadline:
        if differs(multiply(), first):
            errors += 1
        iterations += 1
    seconds = clock() - start
    return DeviceResult(gpu, iterations, errors, seconds, tflops(size, iterations, seconds))


class _Backend:
    """Allocation, multiply and comparison on one kind of device."""

    name = "numpy"

    def devices(self) -> list[int]:
        return [0]

    def setup(self, device: int, size: int, dtype: str) -> _Ops:
        import numpy as np  # start-up: optional backend, imported only when chosen

        if dtype not in ("fp32", "fp64"):
            raise ValueError(f"dtype {dtype} needs a GPU backend (numpy does fp32 and fp64)")
        rng = np.random.default_rng(1000 + device)
        t = np.float32 if dtype == "fp32" else np.float64
        a, b = rng.random((size, size)).astype(t), rng.random((size, size)).astype(t)
        return (lambda: a @ b), (lambda c, first: bool((c != first).any()))


class _Torch(_Backend):
    name = "torch"

    def __init__(self) -> None:
        import torch  # start-up: optional backend, imported only when chosen

        self.torch = torch

    def devices(self) -> list[int]:
        return list(range(self.torch.cuda.device_count()))

    def setup(self, device: int, size: int, dtype: str) -> _Ops:
        torch = self.torch
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        t = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32,
             "fp64": torch.float64}[dtype]
        dev = torch.device("cuda", device)
        gen = torch.Generator(device=dev).manual_seed(1000 + device)
        a = torch.rand((size, size), device=dev, dtype=t, generator=gen)
        b = torch.rand((size, size), device=dev, dtype=t, generator=gen)
        return (lambda: a @ b), (lambda c, first: bool(torch.ne(c, first).any().item()))


class _Cupy(_Backend):
    name = "cupy"

    def __init__(self) -> None:
        import cupy  # start-up: optional backend, imported only when chosen

        self.cp = cupy

    def devices(self) -> list[int]:
        return list(range(self.cp.cuda.runtime.getDeviceCount()))

    def setup(self, device: int, size: int, dtype: str) -> _Ops:
        cp = self.cp
        if dtype in ("bf16", "tf32"):
            raise ValueError(f"dtype {dtype} needs the torch backend")
        t = {"fp16": cp.float16, "fp32": cp.float32, "fp64": cp.float64}[dtype]
        with cp.cuda.Device(device):
            rng = cp.random.default_rng(1000 + device)
            a, b = rng.random((size, size)).astype(t), rng.random((size, size)).astype(t)

        def multiply() -> Any:
            with cp.cuda.Device(device):
                return a @ b

        def differs(c: Any, first: Any) -> bool:
            with cp.cuda.Device(device):
                return bool((c != first).any())

        return multiply, differs


def backend(name: str) -> _Backend:
    """The backend by name; `auto` is PyTorch, else CuPy (never the CPU). Raises ImportError."""
    return choose_backend(name, (_Torch, _Cupy), _Backend)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.engines.burn", description=__doc__)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--dtype", choices=DTYPES, default="bf16")
    ap.add_argument("--backend", choices=("auto", "torch", "cupy", "numpy"), default="auto")
    ap.add_argument("--size", type=int, default=None, help="matrix side (default 8192 on GPUs, 256 on CPU)")
    args = ap.parse_args(argv)
    try:
        be = backend(args.backend)
        devices = be.devices()
    except Exception as e:  # import or driver failure: say so on the protocol, exit non-zero
        emit({"event": "error", "gpu": None, "message": f"{type(e).__name__}: {e}"})
        return 2
    size = args.size or DEFAULT_SIZE["cpu" if be.name == "numpy" else "gpu"]
    emit({"event": "start", "backend": be.name, "dtype": args.dtype, "size": size, "devices": devices})
    if not devices:
        emit({"event": "error", "gpu": None, "message": f"{be.name} sees no device"})
        return 2
    deadline = time.monotonic() + args.seconds
    results: dict[int, DeviceResult | str] = {}

    def work(device: int) -> None:
        try:
            multiply, differs = be.setup(device, size, args.dtype)
            results[device] = burn_loop(device, size, multiply, differs, deadline)
        except Exception as e:  # one device failing must not hide the others
            results[device] = f"{type(e).__name__}: {e}"

    threads = [threading.Thread(target=work, args=(d,), daemon=True) for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = False
    for d in devices:
        r = results.get(d, "no result")
        if isinstance(r, DeviceResult):
            emit({"event": "result", **asdict(r)})
        else:
            failed = True
            emit({"event": "error", "gpu": d, "message": r})
    emit({"event": "done"})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
