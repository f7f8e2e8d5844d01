"""A stand-in for nvidia-ml-py (`pynvml`) with per-GPU state, for tests only.

It answers the calls harness/platform/nvml.py makes, raising an NVMLError carrying `.value`
as the real binding does: 3 (Not Supported) for a field a GPU lacks, 15 (GPU is lost) once a
GPU has "fallen off the bus", or any code set as a GPU's `fault` (16 Reset Required, 999
Unknown); `open_error` makes nvmlDeviceGetHandleByIndex fail for that GPU. Each GPU counts its
telemetry reads (temperature reads), so a throttle pattern or a loss can be tied to the sample number.

Fault scenarios unfold over those reads: `lost_after` (falls off the bus), `hang_after` (every call
on that GPU blocks, as NVML on a hung driver does, until `release()`), and counters given as a
function of the read number (ECC, PCIe replays, NVLink error counters, the recovery action, the
clock-event reasons for HW slowdown bursts or a power-brake assertion).
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

NOT_SUPPORTED = 3
GPU_IS_LOST = 15
RESET_REQUIRED = 16
NO_PERMISSION = 4
FI_MEMORY_TEMP, FI_POWER_INSTANT = 82, 186
POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
IDLE = 0x1
HW_POWER_BRAKE = 0x80
FI_RECOVERY_ACTION = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
NVLINK_REPLAY, NVLINK_RECOVERY, NVLINK_CRC_FLIT, NVLINK_CRC_DATA = 0, 1, 2, 3  # NVML_NVLINK_ERROR_DL_*
_RELEASE = threading.Event()  # set by release(): hung calls return (a test's cleanup)


def release() -> None:
    """Let every call blocked on a hung GPU return (raising GPU_IS_LOST), for a test's cleanup."""
    _RELEASE.set()


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__({NOT_SUPPORTED: "Not Supported", GPU_IS_LOST: "GPU is lost",
                          NO_PERMISSION: "Insufficient Permissions",
                          RESET_REQUIRED: "GPU requires restart"}.get(value, "Unknown"))
        self.value = value


@dataclass
class FakeGpu:
    """One GPU's state. None means NVML answers Not Supported for that field."""

    name: str = "NVIDIA H200"
    temp: float | Callable[[int], float] = 62.0
    mem_temp: float | None = 55.0
    power_w: float | Callable[[int], float] = 650.0  # nvmlDeviceGetPowerUsage (the 1-s average)
    power_instant_w: float | Callable[[int], float] | None = None  # FI_DEV_POWER_INSTANT; None: absent
    energy: bool = True  # has the total-energy counter
    sm_clock: float | Callable[[int], float] = 1980.0
    mem_clock: float = 3201.0
    util: float | Callable[[int], float] = 100.0
    reasons: int | Callable[[int], int] = 0
    pcie: tuple[int, int, int, int] = (5, 5, 16, 16)  # gen, gen max, width, width max
    replays: int | Callable[[int], int] = 0
    ecc: dict[tuple[int, int], int | Callable[[int], int]] = field(default_factory=dict)  # (type, counter)
    ecc_mode: bool | None = True
    persistence: bool = True
    retired: tuple[int, int] = (0, 0)  # sbe, dbe
    retired_pending: bool = False
    remap: tuple[int, int, int, int] | None = (0, 0, 0, 0)  # corr, unc, pending, failure
    nvlinks: int = 18
    nvlinks_down: int = 0
    fabric: tuple[int, int, int] | None = None  # (state, status, health mask); None: no fabric
    lost_after: int | None = None  # reads after which the GPU is gone
    hang_after: int | None = None  # reads after which every call on it blocks (-1: from the start)
    nvlink_errors: dict[int, int | Callable[[int], int]] = field(default_factory=dict)  # counter -> on link 0
    recovery_action: int | Callable[[int], int] | None = None  # None: the field is not supported
    fault: int | None = None  # every read raises NVMLError(fault), e.g. RESET_REQUIRED
    open_error: int | None = None  # nvmlDeviceGetHandleByIndex raises NVMLError(open_error)
    power_limit_w: float | None = 700.0  # enforced
    default_limit_w: float | None = 700.0
    thresholds: dict[int, float] = field(default_factory=lambda: {0: 92.0, 1: 87.0, 2: 95.0})  # C
    sm_clock_max: float = 1980.0
    mem_used: float | Callable[[int], float] = 1 << 30  # bytes
    pcie_rx_kbps: float | Callable[[int], float] = 0.0  # KB/s, as nvmlDeviceGetPcieThroughput
    pcie_tx_kbps: float | Callable[[int], float] = 0.0
    # (pid, GPU memory bytes) of other compute processes, or a schedule over the read number
    processes: list[tuple[int, int]] | Callable[[int], list[tuple[int, int]]] = field(default_factory=list)
    reads: int = 0
    t0: float = field(default_factory=time.monotonic)

    def at(self, v: float | int | Callable[[int], float] | Callable[[int], int]) -> float:
        return float(v(self.reads) if callable(v) else v)


def module(gpus: list[FakeGpu], fail_init: str | None = None, driver: str = "550.90.12",
           temperature_v: bool = False, hang_init: bool = False) -> types.ModuleType:
    """A fake `pynvml` module over these GPUs (handles are GPU indices). `temperature_v`: the binding
    has nvmlDeviceGetTemperatureV and no longer nvmlDeviceGetTemperature (nvidia-ml-py 13+)."""
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    consts = dict(NVML_TEMPERATURE_GPU=0, NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2,
                  NVML_MEMORY_ERROR_TYPE_CORRECTED=0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1,
                  NVML_VOLATILE_ECC=0, NVML_AGGREGATE_ECC=1,
                  NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS=0,
                  NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR=1, NVML_FEATURE_ENABLED=1,
                  NVML_NVLINK_MAX_LINKS=18, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN=0,
                  NVML_TEMPERATURE_THRESHOLD_SLOWDOWN=1, NVML_TEMPERATURE_THRESHOLD_MEM_MAX=2,
                  NVML_PCIE_UTIL_TX_BYTES=0, NVML_PCIE_UTIL_RX_BYTES=1,
                  NVML_NVLINK_ERROR_DL_REPLAY=0, NVML_NVLINK_ERROR_DL_RECOVERY=1,
                  NVML_NVLINK_ERROR_DL_CRC_FLIT=2, NVML_NVLINK_ERROR_DL_CRC_DATA=3)
    for k, v in consts.items():
        setattr(m, k, v)

    def gpu(h: int) -> FakeGpu:
        g = gpus[h]
        if g.hang_after is not None and g.reads > g.hang_after:
            _RELEASE.wait()  # a hung driver: the call does not come back
            raise NVMLError(GPU_IS_LOST)
        if g.lost_after is not None and g.reads > g.lost_after:
            raise NVMLError(GPU_IS_LOST)
        if g.fault is not None:
            raise NVMLError(g.fault)
        return g

    def handle(i: int) -> int:
        if gpus[i].open_error is not None:
            raise NVMLError(gpus[i].open_error)  # type: ignore[arg-type]
        return i

    def init() -> None:
        if hang_init:  # the driver does not answer at all
            _RELEASE.wait()
        if fail_init:
            raise NVMLError(999)

    def temperature(h: int, _sensor: int) -> int:
        g = gpu(h)
        g.reads += 1
        return int(g.at(g.temp))

    def field_values(h: int, ids: list[int]) -> list[types.SimpleNamespace]:
        g = gpu(h)
        out = []
        for fid in ids:
            instant = None if g.power_instant_w is None else g.at(g.power_instant_w) * 1000
            action = None if g.recovery_action is None else g.at(g.recovery_action)
            v = {FI_MEMORY_TEMP: g.mem_temp, FI_POWER_INSTANT: instant, FI_RECOVERY_ACTION: action}.get(fid)
            out.append(types.SimpleNamespace(nvmlReturn=NOT_SUPPORTED if v is None else 0, fieldId=fid,
                                             value=types.SimpleNamespace(uiVal=int(v or 0))))
        return out

    def energy(h: int) -> int:
        g = gpu(h)
        if not g.energy:
            raise NVMLError(NOT_SUPPORTED)
        return int(1_000_000 + g.at(g.power_w) * (time.monotonic() - g.t0) * 1000)

    def clock(h: int, which: int) -> int:
        g = gpu(h)
        return int(g.at(g.sm_clock) if which == 1 else g.mem_clock)

    def ecc_errors(h: int, kind: int, counter: int) -> int:
        g = gpu(h)
        if g.ecc_mode is None:
            raise NVMLError(NOT_SUPPORTED)
        return int(g.at(g.ecc.get((kind, counter), 0)))

    def nvlink_state(h: int, link: int) -> int:
        g = gpu(h)
        if link >= g.nvlinks:
            raise NVMLError(NOT_SUPPORTED)
        return 0 if link < g.nvlinks_down else 1

    def nvlink_error(h: int, link: int, counter: int) -> int:
        g = gpu(h)
        if link >= g.nvlinks:
            raise NVMLError(NOT_SUPPORTED)
        return int(g.at(g.nvlink_errors.get(counter, 0))) if link == 0 else 0

    class FabricInfoV(ctypes.Structure):  # the binding's c_nvmlGpuFabricInfo_v2_t fields we read
        _fields_ = [("version", ctypes.c_uint), ("status", ctypes.c_uint), ("state", ctypes.c_uint),
                    ("healthMask", ctypes.c_uint32)]

    def fabric_info(h: int, ref: object) -> int:
        g = gpu(h)
        if g.fabric is None:
            raise NVMLError(NOT_SUPPORTED)
        info = getattr(ref, "_obj", ref)
        info.state, info.status, info.healthMask = g.fabric  # type: ignore[attr-defined]
        return 0

    def retired(h: int, cause: int) -> list[int]:
        g = gpu(h)
        return [0x1000 * (i + 1) for i in range(g.retired[cause])]

    def remapped(h: int) -> tuple[int, int, int, int]:
        g = gpu(h)
        if g.remap is None:
            raise NVMLError(NOT_SUPPORTED)
        return g.remap

    def ecc_mode(h: int) -> list[int]:
        g = gpu(h)
        if g.ecc_mode is None:
            raise NVMLError(NOT_SUPPORTED)
        return [int(g.ecc_mode), int(g.ecc_mode)]

    def milliwatts(v: float | None) -> int:
        if v is None:
            raise NVMLError(NOT_SUPPORTED)
        return int(v * 1000)

    def threshold(h: int, which: int) -> int:
        g = gpu(h)
        if which not in g.thresholds:
            raise NVMLError(NOT_SUPPORTED)
        return int(g.thresholds[which])

    fns: dict[str, Callable[..., object]] = {
        "nvmlInit": init, "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: driver, "nvmlSystemGetCudaDriverVersion_v2": lambda: 12040,
        "nvmlDeviceGetCount": lambda: len(gpus), "nvmlDeviceGetHandleByIndex": handle,
        "nvmlDeviceGetName": lambda h: gpu(h).name, "nvmlDeviceGetUUID": lambda h: f"GPU-{h:08x}-fake",
        "nvmlDeviceGetSerial": lambda h: f"17537240318{h:02d}",
        "nvmlDeviceGetVbiosVersion": lambda h: "96.00.A5",
        "nvmlDeviceGetPciInfo": lambda h: types.SimpleNamespace(busId=f"00000000:{0x18 + 0x10 * h:02X}:00.0"),
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(
            total=150754820096, used=int(gpu(h).at(gpu(h).mem_used))),
        "nvmlDeviceGetMaxClockInfo": lambda h, which: int(
            gpu(h).sm_clock_max if which == 1 else gpu(h).mem_clock),
        "nvmlDeviceGetPcieThroughput": lambda h, counter: int(
            gpu(h).at(gpu(h).pcie_rx_kbps if counter == 1 else gpu(h).pcie_tx_kbps)),
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [
            types.SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in
            (gpu(h).processes(gpu(h).reads) if callable(gpu(h).processes) else gpu(h).processes)],
        "nvmlDeviceGetTemperature": temperature, "nvmlDeviceGetFieldValues": field_values,
        "nvmlDeviceGetPowerUsage": lambda h: int(gpu(h).at(gpu(h).power_w) * 1000),
        "nvmlDeviceGetTotalEnergyConsumption": energy, "nvmlDeviceGetClockInfo": clock,
        "nvmlDeviceGetUtilizationRates": lambda h: types.SimpleNamespace(gpu=int(gpu(h).at(gpu(h).util)),
                                                                          memory=40),
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: int(gpu(h).at(gpu(h).reasons)),
        "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: gpu(h).pcie[0],
        "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: gpu(h).pcie[1],
        "nvmlDeviceGetCurrPcieLinkWidth": lambda h: gpu(h).pcie[2],
        "nvmlDeviceGetMaxPcieLinkWidth": lambda h: gpu(h).pcie[3],
        "nvmlDeviceGetPcieReplayCounter": lambda h: int(gpu(h).at(gpu(h).replays)),
        "nvmlDeviceGetNvLinkErrorCounter": nvlink_error,
        "nvmlDeviceGetTotalEccErrors": ecc_errors, "nvmlDeviceGetEccMode": ecc_mode,
        "nvmlDeviceGetPersistenceMode": lambda h: int(gpu(h).persistence),
        "nvmlDeviceGetRetiredPages": retired,
        "nvmlDeviceGetRetiredPagesPendingStatus": lambda h: int(gpu(h).retired_pending),
        "nvmlDeviceGetRemappedRows": remapped, "nvmlDeviceGetNvLinkState": nvlink_state,
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: milliwatts(gpu(h).power_limit_w),
        "nvmlDeviceGetPowerManagementDefaultLimit": lambda h: milliwatts(gpu(h).default_limit_w),
        "nvmlDeviceGetTemperatureThreshold": threshold,
        "nvmlDeviceGetGpuFabricInfoV": fabric_info, "c_nvmlGpuFabricInfoV_t": FabricInfoV,
    }
    if temperature_v:
        fns["nvmlDeviceGetTemperatureV"] = fns.pop("nvmlDeviceGetTemperature")
    for name, fn in fns.items():
        setattr(m, name, fn)
    return m


def install(monkeypatch: pytest.MonkeyPatch, gpus: list[FakeGpu], **kw: object) -> types.ModuleType:
    """Put the fake in sys.modules['pynvml'] for this test."""
    m = module(gpus, **kw)  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, "pynvml", m)
    return m
