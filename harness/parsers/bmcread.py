"""What the BMC parsers share: PSU labels and the metrics of a BmcReading.

Pure. A PSU's label is `PSU<n>` wherever the BMC's names carry a number ("PSU1 Power In",
"PS 2 Presence", "Power Supply 1", "PSU.Slot.1", Redfish ServiceLabel "PSU 1"), so one PSU has
one label across its sensors and across ipmitool and Redfish.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, Optional

from harness.model import BmcReading, Metric
from harness.units import CELSIUS, COUNT, WATT

# "PSU1", "PS 1", "PS1", "Power Supply 1", "P/S 2", "PSU_3", "PWS-4"
_PSU_NUMBER = re.compile(r"(?:\bPSU|\bPS|\bPower\s*Supply|\bP/S|\bPWS)\s*[_#-]?\s*(\d{1,9})(?!\d)",
                         re.IGNORECASE)
_TRAILING_NUMBER = re.compile(r"(?<!\d)(\d{1,9})\s*$")  # bounded: int() refuses 4,301 digits


def psu_number(name: str) -> Optional[int]:
    """The PSU number a sensor or resource name carries, if any."""
    m = _PSU_NUMBER.search(name)
    return int(m.group(1)) if m else None


def psu_label(*names: str) -> Optional[str]:
    """`PSU<n>` from the first name that carries a PSU number, else from a trailing number."""
    for name in names:
        if name and (n := psu_number(name)) is not None:
            return f"PSU{n}"
    for name in names:
        if name and (m := _TRAILING_NUMBER.search(name)):
            return f"PSU{int(m.group(1))}"
    return None


def label_order(label: str) -> tuple[int, str]:
    """Sort key: PSU2 before PSU10."""
    m = _TRAILING_NUMBER.search(label)
    return (int(m.group(1)) if m else 1 << 30, label)


def watts(raw: Any) -> Optional[float]:
    """A finite number from a JSON value (bools and text are not numbers here)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    try:
        value = float(raw)
    except OverflowError:  # an integer beyond any float
        return None
    return value if math.isfinite(value) else None


def reading_metrics(reading: BmcReading, *, node_power: bool = True) -> list[Metric]:
    """psu.*, bmc.inlet_temp and bmc.fans_ok from a reading; bmc.power{stat=instantaneous}
    too when `node_power` (false where the reading's node power is only a sum of PSU inputs)."""
    metrics: list[Metric] = []
    if node_power and reading.node_power_w is not None:
        metrics.append(Metric("bmc.power", reading.node_power_w, WATT, {"stat": "instantaneous"}))
    for psu in reading.psus:
        labels = {"psu": psu.name}
        if psu.power_in_w is not None:
            metrics.append(Metric("psu.power_in", psu.power_in_w, WATT, labels))
        if psu.power_out_w is not None:
            metrics.append(Metric("psu.power_out", psu.power_out_w, WATT, labels))
        if psu.capacity_w is not None:
            metrics.append(Metric("psu.capacity", psu.capacity_w, WATT, labels))
        if psu.ok is not None:
            metrics.append(Metric("psu.ok", float(psu.ok), COUNT, labels))
    if reading.redundant is not None:
        metrics.append(Metric("psu.redundant", float(reading.redundant), COUNT))
    if reading.inlet_temp_c is not None:
        metrics.append(Metric("bmc.inlet_temp", reading.inlet_temp_c, CELSIUS))
    if reading.fans_ok is not None:
        metrics.append(Metric("bmc.fans_ok", float(reading.fans_ok), COUNT))
    return metrics


def all_or_none(values: Iterable[Optional[bool]]) -> Optional[bool]:
    """False if any is False, True if any is True and none False, None if all are None."""
    known = [v for v in values if v is not None]
    return None if not known else all(known)
