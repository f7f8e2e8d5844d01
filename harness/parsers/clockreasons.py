"""NVML clock-event ("throttle") reasons: bit values, names, and decoding. Pure.

Bit values are nvml.h's `nvmlClocksEventReason*` (formerly `nvmlClocksThrottleReason*`).
Names are the `reason` label of `gpu.throttle_pct` and `gpu.clocks_event`. Only THROTTLING
reasons mean the GPU ran slower than it could; idle, application-clock and display settings
and sync boost are reported but are not a fault.
"""

from __future__ import annotations

BITS: dict[str, int] = {
    "idle": 0x1,                  # GpuIdle
    "applications_clocks": 0x2,   # ApplicationsClocksSetting
    "power_cap": 0x4,             # SwPowerCap
    "hw_slowdown": 0x8,           # HwSlowdown (thermal or power brake, or an external signal)
    "sync_boost": 0x10,           # SyncBoost
    "sw_thermal": 0x20,           # SwThermalSlowdown
    "hw_thermal": 0x40,           # HwThermalSlowdown
    "hw_power_brake": 0x80,       # HwPowerBrakeSlowdown
    "display_clocks": 0x100,      # DisplayClockSetting
    "board_limit": 0x200,         # BoardLimit (nvidia-ml-py nvmlClocksThrottleReasonBoardLimit)
    "reliability": 0x400,         # Reliability (nvidia-ml-py nvmlClocksThrottleReasonReliability)
}
THROTTLING: tuple[str, ...] = ("power_cap", "hw_slowdown", "hw_thermal", "hw_power_brake", "sw_thermal",
                               "board_limit", "reliability")
# Derived groups reported next to the single reasons.
GROUPS: dict[str, int] = {
    "thermal": BITS["sw_thermal"] | BITS["hw_thermal"],
    "any": sum(BITS[r] for r in THROTTLING),
}

# nvidia-smi -q text labels (both "Clocks Event Reasons" and the older "Clocks Throttle Reasons").
TEXT_LABELS: dict[str, str] = {
    "Idle": "idle",
    "Applications Clocks Setting": "applications_clocks",
    "SW Power Cap": "power_cap",
    "HW Slowdown": "hw_slowdown",
    "HW Thermal Slowdown": "hw_thermal",
    "HW Power Brake Slowdown": "hw_power_brake",
    "Sync Boost": "sync_boost",
    "SW Thermal Slowdown": "sw_thermal",
    "Display Clock Setting": "display_clocks",
}
# nvidia-smi -q -x element suffixes after "clocks_throttle_reason_" / "clocks_event_reason_",
# and --query-gpu field suffixes after "clocks_throttle_reasons." / "clocks_event_reasons.".
TAG_SUFFIXES: dict[str, str] = {
    "gpu_idle": "idle",
    "applications_clocks_setting": "applications_clocks",
    "sw_power_cap": "power_cap",
    "hw_slowdown": "hw_slowdown",
    "hw_thermal_slowdown": "hw_thermal",
    "hw_power_brake_slowdown": "hw_power_brake",
    "sync_boost": "sync_boost",
    "sw_thermal_slowdown": "sw_thermal",
    "display_clocks_setting": "display_clocks",
}


def decode(mask: int) -> tuple[str, ...]:
    """The reason names whose bits are set in an NVML clocks-event-reasons bitmask."""
    return tuple(name for name, bit in BITS.items() if mask & bit)


def encode(reasons: dict[str, bool]) -> int:
    """The bitmask of the active reasons (names as in BITS; unknown names ignored)."""
    return sum(BITS[r] for r, on in reasons.items() if on and r in BITS)


def parse_mask(text: str) -> int | None:
    """'0x0000000000000004' or '4' as an int; None for 'N/A', '[Not Supported]' or garbage."""
    t = text.strip()
    try:
        return int(t, 16) if t.lower().startswith("0x") else int(t)
    except ValueError:
        return None
