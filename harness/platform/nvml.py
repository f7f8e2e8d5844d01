"""The only module that loads NVML (through nvidia-ml-py's `pynvml`); its NVLink reads are platform/nvlink.

Without a driver, `gpu_inventory()` says NVML is not loadable and why; it never raises for that.
`NvmlSession` keeps NVML open for repeated reads: `sample()` (telemetry, one frozen
GpuSample per GPU), `health()` (modes, ECC, retired pages, row remapping, PCIe, NVLink) and
`limits()` (power limits, temperature thresholds) and `observe()` (what `harness observe` needs:
utilisation, clocks against their maximum, memory, PCIe throughput, per-process GPU memory).

A GPU NVML counts but cannot open (GPU_IS_LOST after an Xid 79, NO_PERMISSION, ...) is itself the
finding: it stays in the inventory with `error` set, and its samples and health carry the error,
while every other GPU is read as usual. RESET_REQUIRED and UNKNOWN are faults of the GPU, like
GPU_IS_LOST, never "not supported". Power is NVML's instantaneous field where the driver offers it
(NVML_FI_DEV_POWER_INSTANT; nvmlDeviceGetPowerUsage averages over 1 s on Ampere and newer), and
each sample says which it was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from harness.errors import HarnessError
from harness.platform import nvlink
from harness.platform.bounded import Worker
from harness.platform.nvlink import FabricInfo

T = TypeVar("T")
CALL_TIMEOUT_S = 10.0  # one GPU's reading that takes longer: the driver is hung on that GPU


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def gpu_inventory() -> dict[str, Any]:
    """{"available": bool, "reason": str, "driver": str, "cuda_driver": str, "gpus": [...]}. A GPU that
    cannot be opened or read (lost, needs a reset, hung) stays in the list with `error` set."""
    try:
        nv = NvmlSession()
    except NvmlUnavailable as e:
        return {"available": False, "reason": str(e), "gpus": []}
    try:
        return {"available": True, "reason": "", **nv.inventory()}
    finally:
        nv.close()


# ---------------------------------------------------------------- telemetry and health

GPU_IS_LOST = 15  # NVML_ERROR_GPU_IS_LOST: the GPU fell off the bus
RESET_REQUIRED = 16  # NVML_ERROR_RESET_REQUIRED: the GPU needs a reset before it can be used
UNKNOWN = 999  # NVML_ERROR_UNKNOWN: NVML could not tell what went wrong with the GPU
FAULTS = {GPU_IS_LOST: "GPU is lost", RESET_REQUIRED: "GPU needs a reset", UNKNOWN: "unknown NVML error"}
_FI_DEV_POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT (mW, not averaged)
_FI_DEV_MEMORY_TEMP = 82  # NVML_FI_DEV_MEMORY_TEMP (HBM temperature, C)
_FI_DEV_GET_GPU_RECOVERY_ACTION = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (r550+)


class NvmlUnavailable(HarnessError):
    """NVML could not be loaded or initialised; carries the reason."""


class _Lost(Exception):
    """The GPU stopped answering (GPU_IS_LOST, RESET_REQUIRED, UNKNOWN) during one read."""


@dataclass(frozen=True)
class GpuSample:
    """One telemetry reading of one GPU. A field NVML does not support on this GPU is None."""

    gpu: int
    temp: float | None = None  # C
    mem_temp: float | None = None  # C (HBM)
    power: float | None = None  # W: instantaneous where NVML has it, else the 1-s average
    power_instant: bool | None = None  # True: `power` is NVML_FI_DEV_POWER_INSTANT; False: the 1-s average
    power_avg: float | None = None  # W, nvmlDeviceGetPowerUsage (averaged over 1 s on Ampere and newer)
    energy_mj: int | None = None  # total energy counter since driver load, mJ
    sm_clock: float | None = None  # MHz
    mem_clock: float | None = None  # MHz
    util: float | None = None  # %
    mem_util: float | None = None  # %
    reasons: int | None = None  # clock-event reasons bitmask (harness.parsers.clockreasons)
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    pcie_replays: int | None = None
    ecc_corrected: int | None = None  # volatile total
    ecc_uncorrected: int | None = None  # volatile total
    error: str | None = None  # set when the GPU did not answer at all


@dataclass(frozen=True)
class GpuHealth:
    """The health facts of one GPU that change rarely: modes, error counters, link, NVLink."""

    gpu: int
    name: str | None = None
    pci_bus_id: str | None = None
    uuid: str | None = None
    persistence: bool | None = None
    ecc_mode: bool | None = None
    ecc_volatile_corrected: int | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    retired_sbe: int | None = None
    retired_dbe: int | None = None
    retired_pending: bool | None = None
    remap_corrected: int | None = None
    remap_uncorrected: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    nvlink_up: int | None = None
    nvlink_total: int | None = None
    pcie_replays: int | None = None  # the PCIe replay counter
    nvlink_replay: int | None = None  # NVLink error counters summed over the links (DL replay, recovery,
    nvlink_recovery: int | None = None  # CRC flit + CRC data); None on a GPU without NVLink
    nvlink_crc: int | None = None
    recovery_action: int | None = None  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: 0 none, RECOVERY_ACTIONS
    error: str | None = None
    fabric: FabricInfo | None = None  # None: no NVLink fabric (no NVSwitch), or NVML does not say


RECOVERY_ACTIONS = {1: "GPU reset required", 2: "node reboot required", 3: "drain peer-to-peer traffic",
                    4: "drain and reset (running at reduced capacity)", 5: "GPU reset (bus) required",
                    6: "recover the IMEX domain"}


@dataclass(frozen=True)
class GpuLimits:
    """A GPU's power limits (W) and its own temperature thresholds (C); None where NVML has none."""

    gpu: int
    power_limit_w: float | None = None  # enforced power limit
    default_limit_w: float | None = None  # the board's default power-management limit
    slowdown_c: float | None = None  # GPU temperature at which the hardware slows down
    shutdown_c: float | None = None
    mem_max_c: float | None = None  # HBM temperature limit
    error: str | None = None


@dataclass(frozen=True)
class GpuObservation:
    """What `harness observe` reads of one GPU per tick; None where NVML does not say."""

    gpu: int
    util: float | None = None  # % of the last sample period with a kernel running
    sm_clock: float | None = None  # MHz
    sm_clock_max: float | None = None  # MHz
    reasons: int | None = None  # clock-event reasons bitmask
    temp: float | None = None  # C
    mem_used: int | None = None  # bytes
    mem_total: int | None = None  # bytes
    pcie_rx: float | None = None  # GB/s into the GPU
    pcie_tx: float | None = None  # GB/s out of the GPU
    processes: tuple[tuple[int, int], ...] = ()  # (pid, GPU memory bytes) of compute processes
    error: str | None = None


class NvmlSession:
    """An open NVML: init once, read many times (the sampler's 10 Hz needs that), shut down once.

    Every call is bounded (CALL_TIMEOUT_S, `_Worker`): NVML that does not answer at all is
    NvmlUnavailable; a GPU whose reading does not return is marked hung (`hung`), its readings
    carry that error from then on and it is not asked again, and the other GPUs are read as usual."""

    def __init__(self, timeout_s: float | None = None) -> None:
        try:
            import pynvml  # start-up: NVML loads only when a GPU is asked about
        except ImportError as e:
            raise NvmlUnavailable(f"nvidia-ml-py not installed ({e})") from e
        self._nv: Any = pynvml
        self.timeout_s = CALL_TIMEOUT_S if timeout_s is None else timeout_s
        self._worker = Worker()
        self.hung: dict[int, str] = {}  # index -> why: the GPU's reading did not return
        try:
            self._bounded(pynvml.nvmlInit, "nvmlInit")
        except pynvml.NVMLError as e:
            raise NvmlUnavailable(f"NVML not loadable: {_text(e)}") from e
        try:
            count = int(self._bounded(pynvml.nvmlDeviceGetCount, "nvmlDeviceGetCount"))
        except (pynvml.NVMLError, NvmlUnavailable) as e:
            self.close()
            raise NvmlUnavailable(f"NVML query failed: {_text(e)}") from e
        self.handles: list[Any] = []
        self.open_errors: dict[int, str] = {}  # index -> why NVML could not open that GPU
        for i in range(count):
            try:
                self.handles.append(self._worker.call(partial(pynvml.nvmlDeviceGetHandleByIndex, i),
                                                      self.timeout_s))
            except pynvml.NVMLError as e:
                self.handles.append(None)
                self.open_errors[i] = f"NVML cannot open GPU {i}: {_text(e)}"
            except TimeoutError:
                self.handles.append(None)
                self.hung[i] = self._hung_text(i)
                self.open_errors[i] = self.hung[i]

    def _bounded(self, fn: Callable[[], T], what: str) -> T:
        try:
            return self._worker.call(fn, self.timeout_s)
        except TimeoutError as e:
            raise NvmlUnavailable(f"NVML did not answer {what} within {self.timeout_s:g} s: the driver "
                                  "is hung") from e

    def _hung_text(self, i: int) -> str:
        return f"GPU is hung: NVML did not answer a reading of GPU {i} within {self.timeout_s:g} s"

    def _each(self, read: Callable[[int, Any], T], lost: Callable[[int, str], T]) -> tuple[T, ...]:
        """read(i, handle) for every GPU, each bounded; lost(i, why) for a GPU that is hung."""
        out: list[T] = []
        for i, h in enumerate(self.handles):
            if i in self.hung:
                out.append(lost(i, self.hung[i]))
                continue
            try:
                out.append(self._worker.call(partial(read, i, h), self.timeout_s))
            except TimeoutError:
                self.hung[i] = self._hung_text(i)
                out.append(lost(i, self.hung[i]))
        return tuple(out)

    def close(self) -> None:
        try:
            self._worker.call(self._nv.nvmlShutdown, self.timeout_s)
        except (self._nv.NVMLError, TimeoutError):
            pass

    def __enter__(self) -> NvmlSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, fn: str, *args: Any) -> Any:
        """fn(*args), None when not supported (or absent from this binding); _Lost when the GPU is gone."""
        f = getattr(self._nv, fn, None)
        if f is None:
            return None
        try:
            return f(*args)
        except self._nv.NVMLError as e:
            if getattr(e, "value", None) in FAULTS:
                raise _Lost(f"{FAULTS[e.value]}: {_text(e)}") from e
            return None

    def inventory(self) -> dict[str, Any]:
        """Driver versions and every GPU's identity; a GPU that cannot be opened or read (lost, needs a
        reset, hung) keeps its index, what was read of it, and `error`."""
        nv = self._nv
        info: dict[str, Any] = {"driver": _text(self._bounded(nv.nvmlSystemGetDriverVersion, "the driver "
                                                              "version"))}
        try:
            v = int(self._bounded(nv.nvmlSystemGetCudaDriverVersion_v2, "the CUDA version"))
            info["cuda_driver"] = f"{v // 1000}.{(v % 1000) // 10}"
        except (nv.NVMLError, NvmlUnavailable):
            info["cuda_driver"] = None
        blank = {"name": None, "uuid": None, "serial": None, "vbios": None, "pci_bus_id": None,
                 "memory_bytes": None, "driver": info["driver"]}

        def lost(i: int, why: str) -> dict[str, Any]:
            return {"index": i, **blank, "error": why}

        def identity(i: int, h: Any) -> dict[str, Any]:
            if i in self.open_errors:
                return lost(i, self.open_errors[i])
            g = {"index": i, **blank}
            try:  # each fact as it is read: a GPU lost half-way keeps what it told
                for key, fn in (("pci_bus_id", "nvmlDeviceGetPciInfo"), ("name", "nvmlDeviceGetName"),
                                ("uuid", "nvmlDeviceGetUUID"), ("serial", "nvmlDeviceGetSerial"),
                                ("vbios", "nvmlDeviceGetVbiosVersion"),
                                ("memory_bytes", "nvmlDeviceGetMemoryInfo")):
                    v = self._get(fn, h)
                    if v is not None:
                        g[key] = (_text(v.busId) if key == "pci_bus_id" else int(v.total)
                                  if key == "memory_bytes" else _text(v))
            except _Lost as e:
                g["error"] = f"NVML cannot read GPU {i}: {e}"
            return g

        info["gpus"] = list(self._each(identity, lost))
        return info

    def sample(self) -> tuple[GpuSample, ...]:
        """One reading of every GPU; a GPU that fell off the bus yields a sample with `error` set."""
        return self._each(self._sample, lambda i, why: GpuSample(gpu=i, error=why))

    def _sample(self, i: int, h: Any) -> GpuSample:
        nv, g = self._nv, self._get
        if i in self.open_errors:
            return GpuSample(gpu=i, error=self.open_errors[i])
        try:
            util = g("nvmlDeviceGetUtilizationRates", h)
            reasons = g("nvmlDeviceGetCurrentClocksEventReasons", h)
            if reasons is None:
                reasons = g("nvmlDeviceGetCurrentClocksThrottleReasons", h)
            avg = g("nvmlDeviceGetPowerUsage", h)
            avg_w = None if avg is None else avg / 1000.0
            instant = self._field(h, _FI_DEV_POWER_INSTANT)
            return GpuSample(
                gpu=i, temp=self._temp(h), mem_temp=self._mem_temp(h),
                power=instant / 1000.0 if instant is not None else avg_w,
                power_instant=None if instant is None and avg is None else instant is not None,
                power_avg=avg_w,
                energy_mj=_i(g("nvmlDeviceGetTotalEnergyConsumption", h)),
                sm_clock=_f(g("nvmlDeviceGetClockInfo", h, nv.NVML_CLOCK_SM)),
                mem_clock=_f(g("nvmlDeviceGetClockInfo", h, nv.NVML_CLOCK_MEM)),
                util=None if util is None else float(util.gpu),
                mem_util=None if util is None else float(util.memory),
                reasons=_i(reasons),
                pcie_gen=_i(g("nvmlDeviceGetCurrPcieLinkGeneration", h)),
                pcie_gen_max=_i(g("nvmlDeviceGetMaxPcieLinkGeneration", h)),
                pcie_width=_i(g("nvmlDeviceGetCurrPcieLinkWidth", h)),
                pcie_width_max=_i(g("nvmlDeviceGetMaxPcieLinkWidth", h)),
                pcie_replays=_i(g("nvmlDeviceGetPcieReplayCounter", h)),
                ecc_corrected=_i(g("nvmlDeviceGetTotalEccErrors", h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                   nv.NVML_VOLATILE_ECC)),
                ecc_uncorrected=_i(g("nvmlDeviceGetTotalEccErrors", h,
                                     nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)),
            )
        except _Lost as e:
            return GpuSample(gpu=i, error=str(e))

    def _temp(self, h: Any) -> float | None:
        """GPU temperature, C: nvmlDeviceGetTemperatureV where the binding has it (nvidia-ml-py 13
        deprecates nvmlDeviceGetTemperature), else the old call."""
        sensor = self._nv.NVML_TEMPERATURE_GPU
        if getattr(self._nv, "nvmlDeviceGetTemperatureV", None) is not None:
            v = self._get("nvmlDeviceGetTemperatureV", h, sensor)
            if v is not None:
                return float(getattr(v, "temperature", v))
        return _f(self._get("nvmlDeviceGetTemperature", h, sensor))

    def _field(self, h: Any, field_id: int) -> float | None:
        """One NVML field value (unsigned), None when the driver does not offer it; _Lost on a fault."""
        values = self._get("nvmlDeviceGetFieldValues", h, [field_id])
        if not values:
            return None
        ret = getattr(values[0], "nvmlReturn", 1)
        if ret in FAULTS:
            raise _Lost(FAULTS[ret])
        if ret != 0:
            return None
        v = values[0].value
        return float(getattr(v, "uiVal", 0) or getattr(v, "ullVal", 0) or 0)

    def observe(self) -> tuple[GpuObservation, ...]:
        """The stall doctor's reading of every GPU (a lost GPU yields one with `error` set)."""
        return self._each(self._observe, lambda i, why: GpuObservation(gpu=i, error=why))

    def _observe(self, i: int, h: Any) -> GpuObservation:
        nv, g = self._nv, self._get
        if i in self.open_errors:
            return GpuObservation(gpu=i, error=self.open_errors[i])
        try:
            util = g("nvmlDeviceGetUtilizationRates", h)
            reasons = g("nvmlDeviceGetCurrentClocksEventReasons", h)
            if reasons is None:
                reasons = g("nvmlDeviceGetCurrentClocksThrottleReasons", h)
            mem = g("nvmlDeviceGetMemoryInfo", h)
            procs = g("nvmlDeviceGetComputeRunningProcesses", h) or ()
            rx = g("nvmlDeviceGetPcieThroughput", h, getattr(nv, "NVML_PCIE_UTIL_RX_BYTES", 1))
            tx = g("nvmlDeviceGetPcieThroughput", h, getattr(nv, "NVML_PCIE_UTIL_TX_BYTES", 0))
            return GpuObservation(
                gpu=i, util=None if util is None else float(util.gpu),
                sm_clock=_f(g("nvmlDeviceGetClockInfo", h, nv.NVML_CLOCK_SM)),
                sm_clock_max=_f(g("nvmlDeviceGetMaxClockInfo", h, nv.NVML_CLOCK_SM)),
                reasons=_i(reasons), temp=self._temp(h),
                mem_used=None if mem is None else int(mem.used),
                mem_total=None if mem is None else int(mem.total),
                pcie_rx=None if rx is None else rx * 1e3 / 1e9,  # NVML gives KB/s
                pcie_tx=None if tx is None else tx * 1e3 / 1e9,
                processes=tuple((int(p.pid), int(p.usedGpuMemory or 0)) for p in procs),
            )
        except _Lost as e:
            return GpuObservation(gpu=i, error=f"GPU is lost: {e}")

    def _mem_temp(self, h: Any) -> float | None:
        v = self._field(h, _FI_DEV_MEMORY_TEMP)
        return v if v else None

    def limits(self) -> tuple[GpuLimits, ...]:
        """Power limits and temperature thresholds of every GPU."""
        return self._each(self._limits, lambda i, why: GpuLimits(gpu=i, error=why))

    def _limits(self, i: int, h: Any) -> GpuLimits:
        nv, g = self._nv, self._get
        if i in self.open_errors:
            return GpuLimits(gpu=i, error=self.open_errors[i])

        def watts(fn: str) -> float | None:
            mw = g(fn, h)
            return None if mw is None else mw / 1000.0

        def threshold(name: str, default: int) -> float | None:
            return _f(g("nvmlDeviceGetTemperatureThreshold", h, getattr(nv, name, default)))

        try:
            return GpuLimits(gpu=i, power_limit_w=watts("nvmlDeviceGetEnforcedPowerLimit"),
                             default_limit_w=watts("nvmlDeviceGetPowerManagementDefaultLimit"),
                             slowdown_c=threshold("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1),
                             shutdown_c=threshold("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0),
                             mem_max_c=threshold("NVML_TEMPERATURE_THRESHOLD_MEM_MAX", 2))
        except _Lost as e:
            return GpuLimits(gpu=i, error=str(e))

    def health(self) -> tuple[GpuHealth, ...]:
        """The health facts of every GPU."""
        return self._each(self._health, lambda i, why: GpuHealth(gpu=i, error=why))

    def _health(self, i: int, h: Any) -> GpuHealth:
        nv, g = self._nv, self._get
        if i in self.open_errors:
            return GpuHealth(gpu=i, error=self.open_errors[i])
        try:
            ecc = g("nvmlDeviceGetEccMode", h)
            remap = g("nvmlDeviceGetRemappedRows", h)
            sbe = g("nvmlDeviceGetRetiredPages", h,
                    nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
            dbe = g("nvmlDeviceGetRetiredPages", h, nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
            pending = g("nvmlDeviceGetRetiredPagesPendingStatus", h)
            persistence = g("nvmlDeviceGetPersistenceMode", h)
            pci = g("nvmlDeviceGetPciInfo", h)
            up, total = nvlink.links(nv, g, h)
            replay, recovery, crc = nvlink.errors(nv, g, h, total or 0)
            action = self._field(h, _FI_DEV_GET_GPU_RECOVERY_ACTION)

            def ecc_count(kind: int, counter: int) -> int | None:
                return _i(g("nvmlDeviceGetTotalEccErrors", h, kind, counter))

            return GpuHealth(
                gpu=i, name=_t(g("nvmlDeviceGetName", h)), uuid=_t(g("nvmlDeviceGetUUID", h)),
                pci_bus_id=None if pci is None else _text(pci.busId),
                persistence=None if persistence is None else bool(persistence),
                ecc_mode=None if not ecc else bool(ecc[0]),
                ecc_volatile_corrected=ecc_count(nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_VOLATILE_ECC),
                ecc_volatile_uncorrected=ecc_count(nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                   nv.NVML_VOLATILE_ECC),
                ecc_aggregate_corrected=ecc_count(nv.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                  nv.NVML_AGGREGATE_ECC),
                ecc_aggregate_uncorrected=ecc_count(nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                    nv.NVML_AGGREGATE_ECC),
                retired_sbe=None if sbe is None else len(sbe),
                retired_dbe=None if dbe is None else len(dbe),
                retired_pending=None if pending is None else bool(pending),
                remap_corrected=None if remap is None else int(remap[0]),
                remap_uncorrected=None if remap is None else int(remap[1]),
                remap_pending=None if remap is None else bool(remap[2]),
                remap_failure=None if remap is None else bool(remap[3]),
                pcie_gen=_i(g("nvmlDeviceGetCurrPcieLinkGeneration", h)),
                pcie_gen_max=_i(g("nvmlDeviceGetMaxPcieLinkGeneration", h)),
                pcie_width=_i(g("nvmlDeviceGetCurrPcieLinkWidth", h)),
                pcie_width_max=_i(g("nvmlDeviceGetMaxPcieLinkWidth", h)),
                nvlink_up=up, nvlink_total=total, fabric=nvlink.fabric(nv, g, h),
                pcie_replays=_i(g("nvmlDeviceGetPcieReplayCounter", h)),
                nvlink_replay=replay, nvlink_recovery=recovery, nvlink_crc=crc,
                recovery_action=None if action is None else int(action),
            )
        except _Lost as e:
            return GpuHealth(gpu=i, error=str(e))

def _f(v: Any) -> float | None:
    return None if v is None else float(v)


def _i(v: Any) -> int | None:
    return None if v is None else int(v)


def _t(v: Any) -> str | None:
    return None if v is None else _text(v)
