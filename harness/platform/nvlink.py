"""NVLink reads of an open NVML session (platform/nvml): links up, error counters, and the GPU's
fabric registration on NVSwitch systems. Each read goes through the session's `get` (an NVML
function by name; None where not supported, the session's _Lost where the GPU is gone), inside
the session's bounded call for that GPU; nothing here loads NVML itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Get = Callable[..., Any]  # NvmlSession._get: an NVML function's name and its arguments -> its value


@dataclass(frozen=True)
class FabricInfo:
    """nvmlDeviceGetGpuFabricInfoV: the GPU's NVLink fabric registration (NVSwitch systems)."""

    state: int  # NVML_GPU_FABRIC_STATE_*: 1 not started, 2 in progress, 3 completed
    status: int  # an NVML return code: meaningful once the state is completed (0 = success)
    health_mask: int  # NVML_GPU_FABRIC_HEALTH_MASK_* fields (harness.checks.gpu_fabric decodes them)


def links(nv: Any, get: Get, h: Any) -> tuple[int | None, int | None]:
    """(links up, links present); (None, None) on a GPU without NVLink."""
    up = total = 0
    for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))):
        state = get("nvmlDeviceGetNvLinkState", h, link)
        if state is None:
            continue
        total += 1
        up += 1 if state == getattr(nv, "NVML_FEATURE_ENABLED", 1) else 0
    return (up, total) if total else (None, None)


def errors(nv: Any, get: Get, h: Any, n_links: int) -> tuple[int | None, int | None, int | None]:
    """(replay, recovery, CRC flit + data) error counts summed over the first `n_links` links."""
    if not n_links:
        return None, None, None

    def total(*counters: int) -> int | None:
        return _sum([_i(get("nvmlDeviceGetNvLinkErrorCounter", h, link, c))
                     for link in range(n_links) for c in counters])

    return (total(getattr(nv, "NVML_NVLINK_ERROR_DL_REPLAY", 0)),
            total(getattr(nv, "NVML_NVLINK_ERROR_DL_RECOVERY", 1)),
            total(getattr(nv, "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2),
                  getattr(nv, "NVML_NVLINK_ERROR_DL_CRC_DATA", 3)))


def fabric(nv: Any, get: Get, h: Any) -> FabricInfo | None:
    """The fabric state, status and health mask; None where the GPU has no fabric (state 0)."""
    make = getattr(nv, "c_nvmlGpuFabricInfoV_t", None)
    if make is None or getattr(nv, "nvmlDeviceGetGpuFabricInfoV", None) is None:
        return None
    import ctypes  # start-up: only a GPU health read needs it

    info = make()
    if get("nvmlDeviceGetGpuFabricInfoV", h, ctypes.byref(info)) is None or not info.state:
        return None
    return FabricInfo(int(info.state), int(info.status), int(info.healthMask))


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _i(v: Any) -> int | None:
    return None if v is None else int(v)
