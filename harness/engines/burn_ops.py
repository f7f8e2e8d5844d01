"""The builtin burn's device work: one backend per kind of device (PyTorch, CuPy, NumPy).

Every device gets the same inputs (one common seed): cuBLAS products are bitwise reproducible on
one architecture and SM count with one stream, so every GPU of a model must produce the same
first product (its digest is compared across GPUs by parsers/burnlog), and a small tile of it is
checked against a float64 product of the same inputs computed on the host (never by the GPU under
test). Every later product is compared with the first on the device (`count`: the number of
differing elements, left on the device; `read`: all of a batch's counts in one transfer). A memory
pass fills most of the free memory with a pattern before the burn and verifies it after, so the
check touches the memory, not ~400 MiB.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SEED = 1000  # the same on every device: products are comparable across GPUs
TILE = 32  # side of the corner checked against the host's float64 product
# relative error of the corner tile that still passes, per dtype (inputs are rand() in [0, 1))
TOLERANCE = {"bf16": 3e-2, "fp16": 1e-2, "tf32": 1e-2, "fp32": 1e-4, "fp64": 1e-10}
PATTERN_CHUNK = 64 * 2**20  # int32 elements verified per step of the memory pass (256 MiB)


@dataclass(frozen=True)
class Ops:
    """What the burn loop does on one device: queue a product, wait for the device, compare two
    products (True when they differ), and describe a product (digest, corner tile error). `count`
    and `read`, where a backend has them, compare on the device: count(product, first) queues the
    number of differing elements, read(counts) brings a batch's counts back at once."""

    multiply: Callable[[], Any]
    sync: Callable[[], None]
    differs: Callable[[Any, Any], bool]
    digest: Callable[[Any], str]
    tile_error: Callable[[Any], float]  # max relative error of the corner against float64
    name: str = "cpu"
    pci_bus_id: str | None = None
    count: Callable[[Any, Any], Any] | None = None
    read: Callable[[list[Any]], list[int]] | None = None


class MemoryPass:
    """A pattern written over `nbytes` of device memory, verified later (counts differing words)."""

    def __init__(self, chunks: list[Any], fill: Callable[[Any, int], None],
                 count_bad: Callable[[Any, int], int]) -> None:
        self.chunks, self._fill, self._bad = chunks, fill, count_bad
        for k, c in enumerate(chunks):
            fill(c, k)

    @property
    def nbytes(self) -> int:
        return sum(int(c.nbytes) for c in self.chunks)

    def verify(self) -> int:
        bad = sum(self._bad(c, k) for k, c in enumerate(self.chunks))
        self.chunks = []  # free before the result is reported
        return bad


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _rel(got: Any, want: Any) -> float:
    import numpy as np  # start-up: optional (not a dependency), loaded only by the backends that use it

    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30)))


class NumpyBackend:
    """NumPy on the host: `host_devices` stand-ins for GPUs (tests, no GPU needed)."""

    name = "numpy"

    def __init__(self, host_devices: int = 1) -> None:
        import numpy  # start-up: optional backend, imported only when chosen

        self.np, self.count = numpy, host_devices

    def devices(self) -> list[int]:
        return list(range(self.count))

    def setup(self, device: int, size: int, dtype: str) -> Ops:
        np = self.np
        if dtype not in ("fp32", "fp64"):
            raise ValueError(f"dtype {dtype} needs a GPU backend (numpy does fp32 and fp64)")
        rng = np.random.default_rng(SEED)
        t = np.float32 if dtype == "fp32" else np.float64
        a, b = rng.random((size, size)).astype(t), rng.random((size, size)).astype(t)
        ref = a[:TILE].astype(np.float64) @ b[:, :TILE].astype(np.float64)
        return Ops(lambda: a @ b, lambda: None, lambda c, first: bool((c != first).any()),
                   lambda c: _sha(c.tobytes()), lambda c: _rel(c[:TILE, :TILE], ref),
                   count=lambda c, first: (c != first).sum(), read=lambda xs: [int(x) for x in xs])

    def memory(self, device: int, fraction: float) -> MemoryPass:
        np = self.np
        n = 4 * 2**20 // 4  # 4 MiB of int32 on the host: the logic, not a memory test

        def fill(c: Any, k: int) -> None:
            c[:] = np.arange(c.size, dtype=np.int32) ^ (k * 0x9E3779B1 & 0x7FFFFFFF)

        def bad(c: Any, k: int) -> int:
            return int((c != (np.arange(c.size, dtype=np.int32) ^ (k * 0x9E3779B1 & 0x7FFFFFFF))).sum())

        return MemoryPass([np.empty(n, dtype=np.int32)], fill, bad)


class TorchBackend(NumpyBackend):
    name = "torch"

    def __init__(self) -> None:
        import torch  # start-up: optional backend, imported only when chosen

        self.torch = torch

    def devices(self) -> list[int]:
        return list(range(self.torch.cuda.device_count()))

    def setup(self, device: int, size: int, dtype: str) -> Ops:
        torch = self.torch
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        t = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32,
             "fp64": torch.float64}[dtype]
        dev = torch.device("cuda", device)
        torch.cuda.set_device(dev)
        gen = torch.Generator(device="cpu").manual_seed(SEED)  # host RNG: the same bits everywhere
        a = torch.rand((size, size), generator=gen, dtype=torch.float32).to(t).to(dev)
        b = torch.rand((size, size), generator=gen, dtype=torch.float32).to(t).to(dev)
        ref = (a[:TILE].cpu().double() @ b[:, :TILE].cpu().double()).numpy()  # on the host
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        props = torch.cuda.get_device_properties(dev)
        bus = getattr(props, "pci_bus_id", None)
        domain = getattr(props, "pci_domain_id", 0)
        slot = getattr(props, "pci_device_id", 0)
        pci = f"{domain:04x}:{bus:02x}:{slot:02x}.0" if bus is not None else None
        return Ops(lambda: a @ b, lambda: torch.cuda.synchronize(dev),
                   lambda c, first: bool(torch.ne(c, first).any().item()),
                   lambda c: _sha(c.contiguous().view(bits).cpu().numpy().tobytes()),
                   lambda c: _rel(c[:TILE, :TILE].double().cpu().numpy(), ref), str(props.name), pci,
                   count=lambda c, first: torch.ne(c, first).sum(),
                   read=lambda xs: [int(x) for x in torch.stack(xs).tolist()])

    def memory(self, device: int, fraction: float) -> MemoryPass:
        torch = self.torch
        dev = torch.device("cuda", device)
        free, _ = torch.cuda.mem_get_info(dev)
        chunks = []
        for _ in range(int(free * fraction) // (PATTERN_CHUNK * 4)):
            try:
                chunks.append(torch.empty(PATTERN_CHUNK, dtype=torch.int32, device=dev))
            except RuntimeError:  # out of memory: test what we have
                break

        def expected(k: int) -> Any:
            return torch.arange(PATTERN_CHUNK, dtype=torch.int32, device=dev) ^ (k * 0x9E3779B1 & 0x7FFFFFFF)

        def fill(c: Any, k: int) -> None:
            c.copy_(expected(k))

        def bad(c: Any, k: int) -> int:
            return int(torch.ne(c, expected(k)).sum().item())

        return MemoryPass(chunks, fill, bad)


class CupyBackend(NumpyBackend):
    name = "cupy"

    def __init__(self) -> None:
        import cupy  # start-up: optional backend, imported only when chosen

        self.cp = cupy

    def devices(self) -> list[int]:
        return list(range(self.cp.cuda.runtime.getDeviceCount()))

    def setup(self, device: int, size: int, dtype: str) -> Ops:
        import numpy as np  # start-up: optional (cupy installs it), loaded only with the cupy backend

        cp = self.cp
        if dtype in ("bf16", "tf32"):
            raise ValueError(f"dtype {dtype} needs the torch backend")
        t = {"fp16": np.float16, "fp32": np.float32, "fp64": np.float64}[dtype]
        rng = np.random.default_rng(SEED)
        ha, hb = rng.random((size, size)).astype(t), rng.random((size, size)).astype(t)
        ref = ha[:TILE].astype(np.float64) @ hb[:, :TILE].astype(np.float64)
        cp.cuda.Device(device).use()
        a, b = cp.asarray(ha), cp.asarray(hb)
        pci = cp.cuda.Device(device).pci_bus_id
        name = cp.cuda.runtime.getDeviceProperties(device)["name"]
        return Ops(lambda: a @ b, cp.cuda.Device(device).synchronize,
                   lambda c, first: bool((c != first).any()),
                   lambda c: _sha(cp.asnumpy(c).tobytes()), lambda c: _rel(cp.asnumpy(c[:TILE, :TILE]), ref),
                   name.decode() if isinstance(name, bytes) else str(name), str(pci),
                   count=lambda c, first: (c != first).sum(),
                   read=lambda xs: [int(x) for x in cp.asnumpy(cp.stack(xs))])

    def memory(self, device: int, fraction: float) -> MemoryPass:
        cp = self.cp
        free, _ = cp.cuda.runtime.memGetInfo()
        chunks = []
        for _ in range(int(free * fraction) // (PATTERN_CHUNK * 4)):
            try:
                chunks.append(cp.empty(PATTERN_CHUNK, dtype=cp.int32))
            except cp.cuda.memory.OutOfMemoryError:
                break

        def expected(k: int) -> Any:
            return cp.arange(PATTERN_CHUNK, dtype=cp.int32) ^ (k * 0x9E3779B1 & 0x7FFFFFFF)

        def fill(c: Any, k: int) -> None:
            c[:] = expected(k)

        def bad(c: Any, k: int) -> int:
            return int((c != expected(k)).sum())

        return MemoryPass(chunks, fill, bad)
