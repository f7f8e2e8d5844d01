"""A scripted BmcSource for tests only: SYNTHETIC readings of a DGX H100-like node (6 PSUs).

`ScriptedBmc(node_w=..., lose_psu_at=..., ...)` answers read() number n (0-based) from its
script: node power (a number, or a function of n), a PSU that reports AC lost from read n
on, a redundancy sensor that drops, a BMC that stops answering. Nothing here is captured
output; the real BMC parsers are tested on real ipmitool/Redfish output elsewhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional, Union

from harness.errors import ToolError
from harness.model import BmcReading, PsuReading

Watts = Union[float, Callable[[int], float]]


@dataclass
class ScriptedBmc:
    """Readings by call number; `reads` counts the calls."""

    node_w: Optional[Watts] = 9000.0
    psus: int = 6
    rating_w: float = 3300.0
    lose_psu_at: Optional[int] = None  # from this read on PSU 3 reports AC lost
    lost_psu: str = "PSU3"
    down_at_start: tuple[str, ...] = ()  # PSUs absent from the first read on
    redundancy_lost_at: Optional[int] = None
    redundancy_sensor: bool = True
    inlet_c: Optional[float] = 24.0
    fans_ok: Optional[bool] = True
    fail_from: Optional[int] = None  # reads from this one raise ToolError (BMC unreachable)
    secret: str = "hunter2-not-for-results"  # a password a real source would hold
    reads: int = 0
    history: list[float] = field(default_factory=list)

    def read(self) -> BmcReading:
        n = self.reads
        self.reads += 1
        self.history.append(time.time())
        if self.fail_from is not None and n >= self.fail_from:
            raise ToolError("ipmitool -I lanplus -H bmc.example: Unable to establish IPMI v2 / RMCP+ session")
        watts = self.node_w(n) if callable(self.node_w) else self.node_w
        lost = self.lose_psu_at is not None and n >= self.lose_psu_at
        live = [f"PSU{i}" for i in range(1, self.psus + 1)
                if f"PSU{i}" not in self.down_at_start and not (lost and f"PSU{i}" == self.lost_psu)]
        share = None if watts is None else watts / max(1, len(live))
        psus = []
        for i in range(1, self.psus + 1):
            name = f"PSU{i}"
            ok = name in live
            status = "Presence detected" if ok else (
                "Presence detected, Power Supply AC lost" if name == self.lost_psu and lost else "Absent")
            psus.append(PsuReading(name, ok, share if ok else 0.0, None if share is None or not ok
                                   else share * 0.94, self.rating_w, status))
        redundant: Optional[bool] = None
        if self.redundancy_sensor:
            redundant = not (lost or self.down_at_start or
                             (self.redundancy_lost_at is not None and n >= self.redundancy_lost_at))
        return BmcReading(time.time(), watts, tuple(psus), redundant, "fake BMC (tests)", self.inlet_c,
                          self.fans_ok)

    def describe(self) -> str:
        return "fake BMC (tests)"

    def close(self) -> None:
        self.closed = True
