"""The only module that touches NVML (through nvidia-ml-py's `pynvml`).

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

from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessError


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def gpu_inventory() -> dict[str, Any]:
    """{"available": bool, "reason": str, "driver": str, "cuda_driver": str, "gpus": [...]}."""
    try:
        import pynvml  # start-up: NVML loads only when a GPU is asked about
    except ImportError as e:
        return {"available": False, "reason": f"nvidia-ml-py not installed ({e})", "gpus": []}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return {"available": False, "reason": f"NVML not loadable: {_text(e)}", "gpus": []}
    try:
        info: dict[str, Any] = {"available": True, "reason": "", "gpus": []}
        info["driver"] = _text(pynvml.nvmlSystemGetDriverVersion())
        try:
            v = int(pynvml.nvmlSystemGetCudaDriverVersion_v2())
            info["cuda_driver"] = f"{v // 1000}.{(v % 1000) // 10}"
        except pynvml.NVMLError:
            info["cuda_driver"] = None
        for i in range(pynvml.nvmlDeviceGetCount()):
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
            except pynvml.NVMLError as e:  # counted but not openable: that GPU is the finding
                info["gpus"].append({"index": i, "name": None, "uuid": None, "serial": None, "vbios": None,
                                     "pci_bus_id": None, "memory_bytes": None, "driver": info["driver"],
                                     "error": f"NVML cannot open GPU {i}: {_text(e)}"})
                continue
            info["gpus"].append({
                "index": i,
                "name": _text(pynvml.nvmlDeviceGetName(h)),
                "uuid": _text(pynvml.nvmlDeviceGetUUID(h)),
                "serial": _optional(pynvml.nvmlDeviceGetSerial, h),
                "vbios": _optional(pynvml.nvmlDeviceGetVbiosVersion, h),
                "pci_bus_id": _text(pynvml.nvmlDeviceGetPciInfo(h).busId),
                "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                "driver": info["driver"],
            })
        return info
    except pynvml.NVMLError as e:
        return {"available": False, "reason": f"NVML query failed: {_text(e)}", "gpus": []}
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _optional(fn: Any, handle: Any) -> str | None:
    import pynvml  # start-up: NVML loads only when a GPU is asked about

    try:
        return _text(fn(handle))
    except pynvml.NVMLError:
        return None


# ---------------------------------------------------------------- telemetry and health

GPU_IS_LOST = 15  # NVML_ERROR_GPU_IS_LOST: the GPU fell off the bus
RESET_REQUIRED = 16  # NVML_ERROR_RESET_REQUIRED: the GPU needs a reset before it can be used
UNKNOWN = 999  # NVML_ERROR_UNKNOWN: NVML could not tell what went wrong with the GPU
FAULTS = {GPU_IS_LOST: "GPU is lost", RESET_REQUIRED: "GPU needs a reset", UNKNOWN: "unknown NVML error"}
_FI_DEV_POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT (mW, not averaged)
_FI_DEV_MEMORY_TEMP = 82  # NVML_FI_DEV_MEMORY_TEMP (HBM temperature, C)


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
    error: str | None = None
    fabric: FabricInfo | None = None  # None: no NVLink fabric (no NVSwitch), or NVML does not say


@dataclass(frozen=True)
class FabricInfo:
    """nvmlDeviceGetGpuFabricInfoV: the GPU's NVLink fabric registration (NVSwitch systems)."""

    state: int  # NVML_GPU_FABRIC_STATE_*: 1 not started, 2 in progress, 3 completed
    status: int  # an NVML return code: meaningful once the state is completed (0 = success)
    health_mask: int  # NVML_GPU_FABRIC_HEALTH_MASK_* fields (harness.checks.gpu_fabric decodes them)


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
    """An open NVML: init once, read many times (the sampler's 10 Hz needs that), shut down once."""

    def __init__(self) -> None:
        try:
            import pynvml  # start-up: NVML loads only when a GPU is asked about
        except ImportError as e:
            raise NvmlUnavailable(f"nvidia-ml-py not installed ({e})") from e
        self._nv: Any = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            raise NvmlUnavailable(f"NVML not loadable: {_text(e)}") from e
        try:
            count = int(pynvml.nvmlDeviceGetCount())
        except pynvml.NVMLError as e:
            self.close()
            raise NvmlUnavailable(f"NVML query failed: {_text(e)}") from e
        self.handles: list[Any] = []
        self.open_errors: dict[int, str] = {}  # index -> why NVML could not open that GPU
        for i in range(count):
            try:
                self.handles.append(pynvml.nvmlDeviceGetHandleByIndex(i))
            except pynvml.NVMLError as e:
                self.handles.append(None)
                self.open_errors[i] = f"NVML cannot open GPU {i}: {_text(e)}"

    def close(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except self._nv.NVMLError:
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

    def sample(self) -> tuple[GpuSample, ...]:
        """One reading of every GPU; a GPU that fell off the bus yields a sample with `error` set."""
        return tuple(self._sample(i, h) for i, h in enumerate(self.handles))

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
        return tuple(self._observe(i, h) for i, h in enumerate(self.handles))

    def _observe(self, i: int, h: Any) -> GpuObservation:
        nv, g = self._nv, self._get
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
        return tuple(self._limits(i, h) for i, h in enumerate(self.handles))

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
        return tuple(self._health(i, h) for i, h in enumerate(self.handles))

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
            up, total = self._nvlinks(h)

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
                nvlink_up=up, nvlink_total=total, fabric=self._fabric(h),
            )
        except _Lost as e:
            return GpuHealth(gpu=i, error=str(e))

    def _fabric(self, h: Any) -> FabricInfo | None:
        """The fabric state, status and health mask; None where the GPU has no fabric (state 0)."""
        make = getattr(self._nv, "c_nvmlGpuFabricInfoV_t", None)
        if make is None or getattr(self._nv, "nvmlDeviceGetGpuFabricInfoV", None) is None:
            return None
        import ctypes  # start-up: only a GPU health read needs it

        info = make()
        if self._get("nvmlDeviceGetGpuFabricInfoV", h, ctypes.byref(info)) is None or not info.state:
            return None
        return FabricInfo(int(info.state), int(info.status), int(info.healthMask))

    def _nvlinks(self, h: Any) -> tuple[int | None, int | None]:
        """(links up, links present); (None, None) on a GPU without NVLink."""
        up = total = 0
        for link in range(int(getattr(self._nv, "NVML_NVLINK_MAX_LINKS", 18))):
            state = self._get("nvmlDeviceGetNvLinkState", h, link)
            if state is None:
                continue
            total += 1
            up += 1 if state == getattr(self._nv, "NVML_FEATURE_ENABLED", 1) else 0
        return (up, total) if total else (None, None)


def _f(v: Any) -> float | None:
    return None if v is None else float(v)


def _i(v: Any) -> int | None:
    return None if v is None else int(v)


def _t(v: Any) -> str | None:
    return None if v is None else _text(v)
