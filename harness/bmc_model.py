"""What a BMC reading is, independent of where it came from (ipmitool or Redfish).

Parsers of BMC output return these; the power_headroom check consumes them. Power is in W.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol


@dataclass(frozen=True)
class PsuReading:
    """One power supply as the BMC reports it at one moment."""

    name: str  # the BMC's own name for it: "PSU1", "PS2 Status", "PSU.Slot.1"
    ok: Optional[bool]  # True present and healthy; False absent, failed or AC lost; None unknown
    power_in_w: Optional[float] = None
    power_out_w: Optional[float] = None
    capacity_w: Optional[float] = None  # the PSU's rating, where the BMC tells it
    status: str = ""  # the BMC's status words, for the report ("Presence detected, AC lost")


@dataclass(frozen=True)
class BmcReading:
    """Node power and PSU state at one moment. `t` is seconds since the epoch."""

    t: float
    node_power_w: Optional[float]  # instantaneous input power of the whole node
    psus: tuple[PsuReading, ...] = ()
    redundant: Optional[bool] = None  # from a redundancy sensor; None where the BMC has none
    source: str = ""  # "ipmitool dcmi", "ipmitool sdr", "redfish https://bmc/...": for the report
    inlet_temp_c: Optional[float] = None
    fans_ok: Optional[bool] = None


class BmcSource(Protocol):
    """Anything that can read the BMC now. Raises a HarnessError subclass when it cannot."""

    def read(self) -> BmcReading: ...

    def describe(self) -> str: ...

    def close(self) -> None:
        """Let go of what the source holds open (a Redfish session and its connection)."""
