"""The only module that touches NVML (through nvidia-ml-py's `pynvml`).

Without a driver, `gpu_inventory()` says NVML is not loadable and why; it never raises for that.
"""

from __future__ import annotations

from typing import Any


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def gpu_inventory() -> dict[str, Any]:
    """{"available": bool, "reason": str, "driver": str, "cuda_driver": str, "gpus": [...]}."""
    try:
        import pynvml
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
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
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
    import pynvml

    try:
        return _text(fn(handle))
    except pynvml.NVMLError:
        return None
