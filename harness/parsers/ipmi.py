"""Parse ipmitool's power output into metrics and a BmcReading.

Pure: text in, ParseResult or BmcReading out. Two parse kinds:

* `ipmi-dcmi-power`: `ipmitool dcmi power reading` -> bmc.power{stat=instantaneous|minimum|
  maximum|average}. ipmitool prints the timestamp without a newline, so "IPMI timestamp: ...
  UTC    Sampling period: 00000300 Seconds." is one line (HP iLO 4 sample; ipmitool 1.8.19 here).
  A deactivated power reading, 0 W, or a BMC without DCMI ("DCMI request failed because: Invalid
  command (c1)", as ipmi_sim answers), is invalid: those numbers are not measurements. The same
  rule holds everywhere node power is read: 0 W for a running node is no reading.
* `ipmi-sdr`: the sensor tables (ipmi_sdr module) -> psu.power_in/power_out/ok{psu},
  psu.redundant, bmc.power from a node power meter sensor, bmc.inlet_temp, bmc.fans_ok.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from harness.model import BmcReading, Metric
from harness.parsers import ipmi_sdr
from harness.parsers.base import ParseResult, invalid
from harness.parsers.bmcread import reading_metrics
from harness.units import WATT

KIND_DCMI = "ipmi-dcmi-power"
KIND_SDR = "ipmi-sdr"
NOT_DCMI = "not `ipmitool dcmi power reading` output (no 'Instantaneous power reading' line)"

_DCMI_LINES = {
    "instantaneous": r"Instantaneous power reading",
    "minimum": r"Minimum during sampling period",
    "maximum": r"Maximum during sampling period",
    "average": r"Average power reading over sample period",
}
_DCMI_FAILED = re.compile(r"DCMI request failed because:\s*(.+)", re.IGNORECASE)
_TIMESTAMP = re.compile(r"IPMI timestamp:\s*(.*?)\s*(?:Sampling period:|$)", re.MULTILINE)
_PERIOD = re.compile(r"\bSampling period:\s*(\d+)\s*(Seconds|Milliseconds)?")  # not "sampling period"
_STATE = re.compile(r"Power reading state is:\s*(\w+)", re.IGNORECASE)


@dataclass(frozen=True)
class DcmiPower:
    """One `dcmi power reading`: watts over the BMC's own sampling period."""

    instantaneous_w: float
    minimum_w: Optional[float] = None
    maximum_w: Optional[float] = None
    average_w: Optional[float] = None
    sampling_period_s: Optional[float] = None
    timestamp: str = ""  # the BMC's clock, as printed
    state: str = ""  # "activated" / "deactivated" / "" when not printed

    @property
    def stats(self) -> dict[str, float]:
        values = {"instantaneous": self.instantaneous_w, "minimum": self.minimum_w,
                  "maximum": self.maximum_w, "average": self.average_w}
        return {k: v for k, v in values.items() if v is not None}


def dcmi_power(text: str) -> tuple[Optional[DcmiPower], tuple[str, ...]]:
    """The reading and the problems that make it unusable (unsupported, deactivated, garbage)."""
    failed = _DCMI_FAILED.search(text)
    if failed:
        return None, (f"the BMC gave no DCMI power reading: {failed.group(1).strip()}"
                      " (DCMI power reading not supported)",)
    found: dict[str, float] = {}
    for key, label in _DCMI_LINES.items():
        m = re.search(label + r":\s*(-?\d+(?:\.\d+)?)\s*Watts", text, re.IGNORECASE)
        if m and (value := ipmi_sdr.finite(m.group(1))) is not None:
            found[key] = value
    if "instantaneous" not in found:
        return None, (NOT_DCMI,)
    period = _PERIOD.search(text)
    period_s = None
    if period:
        period_s = ipmi_sdr.finite(period.group(1))
        if period_s is not None and period.group(2) == "Milliseconds":
            period_s /= 1000.0
    stamp = _TIMESTAMP.search(text)
    state = _STATE.search(text)
    reading = DcmiPower(found["instantaneous"], found.get("minimum"), found.get("maximum"),
                        found.get("average"), period_s, stamp.group(1).strip() if stamp else "",
                        state.group(1).lower() if state else "")
    if reading.state and reading.state != "activated":
        return reading, (f"DCMI power reading state is {reading.state}: the BMC is not measuring"
                         " node power, so its figures are not measurements",)
    if reading.instantaneous_w <= 0:
        return reading, (f"DCMI power reading of {reading.instantaneous_w:g} W for a running node:"
                         " not a measurement",)
    return reading, ()


def parse_dcmi(text: str) -> ParseResult:
    """bmc.power{stat} from `ipmitool dcmi power reading`."""
    reading, problems = dcmi_power(text)
    if reading is None or problems:
        return invalid(KIND_DCMI, *problems)
    metrics = tuple(Metric("bmc.power", v, WATT, {"stat": k}) for k, v in reading.stats.items())
    details = {"sampling_period_s": reading.sampling_period_s, "timestamp": reading.timestamp,
               "state": reading.state}
    return ParseResult(KIND_DCMI, True, (), metrics, details)


def parse_sdr(text: str) -> ParseResult:
    """psu.*, bmc.power (meter sensor), bmc.inlet_temp and bmc.fans_ok from a sensor table."""
    rows = ipmi_sdr.sensor_rows(text)
    if not rows:
        return invalid(KIND_SDR, _no_rows(text))
    analysis = ipmi_sdr.analyse(rows)
    reading = analysis.reading(0.0, "ipmitool sdr")
    metrics = reading_metrics(reading, node_power=analysis.meter_w is not None)
    details = {"rows": len(rows), "psus": [p.name for p in reading.psus],
               "meter_sensor": analysis.meter_name}
    return ParseResult(KIND_SDR, True, (), tuple(metrics), details)


def sdr_reading(text: str, t: float, source: str = "ipmitool sdr") -> BmcReading:
    """A BmcReading from a sensor table alone (node power from a meter sensor or PSU inputs)."""
    return ipmi_sdr.analyse(ipmi_sdr.sensor_rows(text)).reading(t, source)


def ipmi_reading(dcmi_text: Optional[str], sdr_text: Optional[str], t: float,
                 source: str = "ipmitool") -> BmcReading:
    """One reading from `dcmi power reading` and a sensor table, either of which may be None.

    Node power: DCMI's instantaneous reading where it is valid, else a node power meter sensor,
    else the sum of the PSUs' input power (the source says which).
    """
    dcmi = dcmi_power(dcmi_text) if dcmi_text is not None else (None, ())
    analysis = ipmi_sdr.analyse(ipmi_sdr.sensor_rows(sdr_text)) if sdr_text is not None else None
    base = analysis.reading(t, source) if analysis else BmcReading(t, None, source=source)
    if dcmi[0] is not None and not dcmi[1]:
        return BmcReading(t, dcmi[0].instantaneous_w, base.psus, base.redundant,
                          f"{source} (node power: dcmi)", base.inlet_temp_c, base.fans_ok)
    return base


def _no_rows(text: str) -> str:
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    hint = f": {first[:120]}" if first else " (empty output)"
    return ("no ipmitool sensor rows (expected `sdr elist`, `sdr type`, `sdr list` or"
            f" `sensor list` output){hint}")
