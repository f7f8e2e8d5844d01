"""ipmitool's sensor tables as rows, and what they say about PSUs, node power, inlet and fans.

Pure. Formats read, plain and `-c` CSV, each seen in real output:
  `sdr elist` / `sdr type "Power Supply"`: name | 3Dh | ok | 10.1 | 225 Watts, Presence detected
  `sdr list`:                             name | 225 Watts | ok   (discrete: name | 0x03 | ok)
  `sensor list`:                          name | 480.000 | Watts | ok | na | ... (10 columns)
  `-c sdr elist` of a threshold sensor:   Inlet Temp,23,degrees C,ok
The discrete state text may itself hold commas ("Presence detected, Power Supply AC lost"), so a
CSV row's reading is everything after the fourth comma. `sensor list` and `sdr list` show a
discrete sensor's state as bits ("0x0180": offsets 0-7, then 8-14; "0x03"); ipmitool does not
say which sensor type they belong to, so they are read by the sensor's name (see `_bit_words`).

A PSU is "not ok" on any sign of trouble among its sensors (failure, AC lost or out of range,
predictive failure, config error, absent or removed, no reading, critical), "ok" on a sign of
presence or health and none of trouble, unknown otherwise. A PSU status sensor with no state
asserted at all has no presence bit: absent (ipmitool prints an empty reading for it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from harness.model import BmcReading, PsuReading
from harness.parsers.base import integer
from harness.parsers.bmcread import all_or_none, label_order, psu_number

STATUS_WORDS = frozenset({"ok", "ns", "nc", "cr", "nr", "na", "lnr", "lcr", "lnc", "unc", "ucr", "unr"})
BAD_STATUS = frozenset({"cr", "nr", "lnr", "lcr", "ucr", "unr"})
_SENSOR_ID = re.compile(r"^[0-9A-Fa-f]{1,2}h$")
_READING = re.compile(r"^(-?\d+(?:\.\d+)?)\s+([^,]+?)\s*(?:,\s*(.*))?$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_HEX_STATE = re.compile(r"^0x([0-9A-Fa-f]{2})([0-9A-Fa-f]{2})$")
_HEX_BYTE = re.compile(r"^0x[0-9A-Fa-f]{1,2}$")

BAD_WORDS = re.compile(
    r"fail|lost|out[- ]of[- ]range|absent|removed|config(?:uration)? error|critical|"
    r"non-recoverable|not present|no reading|disabled|predictive|insufficient", re.IGNORECASE)
GOOD_WORDS = re.compile(
    r"presence detected|device present|device inserted|transition to ok|transition to running|"
    r"fully redundant", re.IGNORECASE)
REDUNDANCY_WORDS = re.compile(r"redundan", re.IGNORECASE)
METER_NAME = re.compile(
    r"pwr\s*consumption|power\s*meter|pwrmeter|total[\s_-]*(?:power|pwr)|"
    r"sys(?:tem)?[\s_-]*(?:power|pwr)|node[\s_-]*(?:power|pwr)|chassis[\s_-]*(?:power|pwr)",
    re.IGNORECASE)
INLET_NAME = re.compile(r"inlet|ambient|intake", re.IGNORECASE)
FAN_NAME = re.compile(r"fan", re.IGNORECASE)
_PRESENCE_SENSOR = re.compile(r"status|presen|detect", re.IGNORECASE)
_OUT = re.compile(r"\bout\b|output|pout", re.IGNORECASE)
_IN = re.compile(r"\bin\b|input|pin\b", re.IGNORECASE)
# Sensor-type 08h (Power Supply) offsets, for `sensor list` bits (IPMI 2.0 table 42-3).
_PSU_OFFSETS = ("Presence detected", "Failure detected", "Predictive failure",
                "Power Supply AC lost", "AC lost or out-of-range", "AC out-of-range, but present",
                "Config Error", "Power Supply Inactive")
_REDUNDANCY_OFFSETS = ("Fully Redundant", "Redundancy Lost", "Redundancy Degraded",
                       "Non-Redundant: Sufficient from Redundant",
                       "Non-Redundant: Sufficient from Insufficient",
                       "Non-Redundant: Insufficient Resources",
                       "Redundancy Degraded from Fully Redundant",
                       "Redundancy Degraded from Non-Redundant")


@dataclass(frozen=True)
class SensorRow:
    """One sensor as ipmitool printed it."""

    name: str
    status: str  # ok/ns/cr/... ("" for a `sensor list` discrete row)
    entity: str = ""  # "10.1" (entity id . instance) where printed
    value: Optional[float] = None
    unit: str = ""  # "Watts", "degrees C", "RPM", "percent", "discrete", ...
    words: tuple[str, ...] = ()  # a discrete sensor's state text, split at commas
    bits: Optional[int] = None  # `sensor list`: asserted offsets of a discrete sensor
    raw_state: str = ""  # "0x0180" as printed by `sensor list`

    @property
    def no_reading(self) -> bool:
        return self.status in ("ns", "na") and self.value is None

    def text(self) -> str:
        parts = [f"{self.value:g} {self.unit}"] if self.value is not None else []
        parts += list(self.words) or ([self.raw_state] if self.raw_state else [])
        if not parts:
            parts = [f"no reading ({self.status})" if self.no_reading else "no state asserted"]
        if self.status in BAD_STATUS:
            parts.append(f"status {self.status}")
        return f"{self.name}: {', '.join(parts)}"


def sensor_rows(text: str) -> list[SensorRow]:
    """Every sensor row ipmitool printed; lines that are not rows (errors, blanks) are skipped."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        sep = "|" if "|" in line else ","
        row = _row([f.strip() for f in line.split(sep)], sep)
        if row is not None:
            rows.append(row)
    return rows


def _row(fields: list[str], sep: str) -> Optional[SensorRow]:
    if len(fields) >= 5 and _SENSOR_ID.match(fields[1]) and fields[2] in STATUS_WORDS:
        value, unit, words = _reading(sep.join(fields[4:]).strip())
        return SensorRow(fields[0], fields[2], fields[3], value, unit, words)
    if len(fields) >= 10 and (fields[3] in STATUS_WORDS or _HEX_STATE.match(fields[3])):
        return _sensor_list_row(fields)
    if len(fields) == 4 and fields[3] in STATUS_WORDS:  # `-c sdr elist` threshold sensor
        number = finite(fields[1])
        return SensorRow(fields[0], fields[3], "", number, fields[2] if number is not None else "",
                         () if number is not None else _split(fields[1]))
    if len(fields) == 3 and fields[2] in STATUS_WORDS:  # `sdr list`
        if _HEX_BYTE.match(fields[1]):  # a discrete sensor's state byte, "0x03"
            bits = int(fields[1], 16)
            return SensorRow(fields[0], fields[2], "", None, "discrete", _bit_words(fields[0], bits),
                             bits, fields[1])
        value, unit, words = _reading(fields[1])
        return SensorRow(fields[0], fields[2], "", value, unit, words)
    return None


def _sensor_list_row(fields: list[str]) -> SensorRow:
    name, raw_value, unit, status = fields[:4]
    hex_state = _HEX_STATE.match(status)
    if unit == "discrete" or hex_state:
        bits = None
        if hex_state:
            bits = int(hex_state.group(1), 16) | ((int(hex_state.group(2), 16) & 0x7F) << 8)
        return SensorRow(name, "", "", None, "discrete", _bit_words(name, bits) if bits is not None
                         else (), bits, status if hex_state else "")
    value = finite(raw_value)
    return SensorRow(name, status, "", value, unit if value is not None else "")


def _bit_words(name: str, bits: int) -> tuple[str, ...]:
    """Words for `sensor list` bits, read by the sensor's name: redundancy sensors by the
    redundancy offsets, "...Presence" sensors as generic presence (bit 0 absent, bit 1 present,
    HPE's "PS 2 Presence"), PSU sensors by the Power Supply offsets; other sensors' bit 0 is
    their normal state ("Transition to OK") and any other bit a departure from it."""
    asserted = [i for i in range(15) if bits >> i & 1]
    if REDUNDANCY_WORDS.search(name):
        return tuple(_REDUNDANCY_OFFSETS[i] if i < 8 else f"state {i}" for i in asserted)
    if re.search(r"presen", name, re.IGNORECASE):
        return tuple({0: "Device Absent", 1: "Device Present"}.get(i, f"state {i}") for i in asserted)
    if re.search(r"status|detect|ac\b|pwr", name, re.IGNORECASE):
        return tuple(_PSU_OFFSETS[i] if i < 8 else f"state {i}" for i in asserted)
    return tuple("Transition to OK" if i == 0 else f"state {i} asserted (failure)" for i in asserted)


def _reading(text: str) -> tuple[Optional[float], str, tuple[str, ...]]:
    """(value, unit, words) of an `sdr elist` reading: "225 Watts, Presence detected"."""
    m = _READING.match(text)
    if m and (value := finite(m.group(1))) is not None:
        return value, m.group(2), _split(m.group(3) or "")
    return None, "", _split(text)


def finite(text: str) -> Optional[float]:
    """A plain decimal number that is finite ("1" * 400 is not), else None."""
    if not _NUMBER.match(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _split(text: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in text.split(",") if w.strip())


def polarity(row: SensorRow) -> int:
    """-1 a sign of trouble, +1 a sign of presence or health, 0 neither."""
    words = " , ".join(row.words)
    if row.no_reading or row.status in BAD_STATUS or BAD_WORDS.search(words):
        return -1
    if GOOD_WORDS.search(words):
        return 1
    if row.unit in ("", "discrete") and not row.words and _PRESENCE_SENSOR.search(row.name):
        return -1  # a status/presence sensor with nothing asserted: no presence bit
    return 0


@dataclass
class _Psu:
    name: str
    power_in: Optional[float] = None
    power_out: Optional[float] = None
    good: list[str] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)

    def reading(self) -> PsuReading:
        if self.bad:
            ok: Optional[bool] = False
        elif self.good or (self.power_in or 0) > 0 or (self.power_out or 0) > 0:
            ok = True
        else:
            ok = None
        return PsuReading(self.name, ok, self.power_in, self.power_out, None,
                          "; ".join(self.bad or self.good))


@dataclass
class SdrAnalysis:
    """What a sensor table says, before it becomes a BmcReading."""

    psus: dict[str, _Psu] = field(default_factory=dict)
    redundancy: list[Optional[bool]] = field(default_factory=list)
    fans: list[Optional[bool]] = field(default_factory=list)
    meter_w: Optional[float] = None
    meter_name: str = ""
    inlet_c: Optional[float] = None

    def reading(self, t: float, source: str) -> BmcReading:
        psus = tuple(p.reading() for _, p in sorted(self.psus.items(), key=lambda kv: label_order(kv[0])))
        node, how = self.meter_w, f"node power: sensor '{self.meter_name}'"
        if node is None:
            inputs = [p.power_in_w for p in psus if p.ok is not False]
            total = sum(v for v in inputs if v is not None)
            if inputs and all(v is not None for v in inputs) and total > 0:
                node, how = total, "node power: sum of PSU input"
        src = f"{source} ({how})" if node is not None else source
        return BmcReading(t, node, psus, all_or_none(self.redundancy), src, self.inlet_c,
                          all_or_none(self.fans))


def analyse(rows: Sequence[SensorRow]) -> SdrAnalysis:
    """Group the rows into PSUs, redundancy, node meter, inlet temperature and fans."""
    out = SdrAnalysis()
    for row in rows:
        psu = _psu_of(row)
        if row.unit.lower().startswith("degrees"):
            if out.inlet_c is None and row.value is not None and psu is None \
                    and INLET_NAME.search(row.name):
                out.inlet_c = row.value
        elif _is_redundancy(row):
            fan = FAN_NAME.search(row.name) or row.entity.split(".")[0] in ("29", "30")
            (out.fans if fan else out.redundancy).append(redundancy_verdict(row))
        elif psu is not None:
            _add_to_psu(out.psus.setdefault(psu, _Psu(psu)), row)
        elif FAN_NAME.search(row.name):
            if not row.no_reading:
                out.fans.append(polarity(row) >= 0)
        elif row.unit == "Watts" and METER_NAME.search(row.name) and out.meter_w is None \
                and row.value is not None and row.value > 0 and not row.no_reading:
            out.meter_w, out.meter_name = row.value, row.name
    return out


def redundancy_verdict(row: SensorRow) -> Optional[bool]:
    """True only for "Fully Redundant"; lost, degraded or non-redundant are False."""
    words = " , ".join(row.words)
    if re.search(r"fully redundant", words, re.IGNORECASE):
        return not BAD_WORDS.search(words)
    return False if REDUNDANCY_WORDS.search(words) else None


def _is_redundancy(row: SensorRow) -> bool:
    return bool(REDUNDANCY_WORDS.search(" ".join(row.words))
                or (row.bits is not None and REDUNDANCY_WORDS.search(row.name)))


def _psu_of(row: SensorRow) -> Optional[str]:
    n = psu_number(row.name)
    if n is not None:
        return f"PSU{n}"
    entity_id, _, instance = row.entity.partition(".")
    n = integer(instance, 9)
    if entity_id == "10" and n is not None and row.unit in ("", "discrete", "Watts"):
        return f"PSU{n}"
    return None


def _add_to_psu(psu: _Psu, row: SensorRow) -> None:
    if row.unit == "Watts" and row.value is not None:
        if _IN.search(row.name) and not _OUT.search(row.name):
            psu.power_in = row.value if psu.power_in is None else psu.power_in
        else:  # "PS 1 Output", and HPE's unqualified "Power Supply 1" (iLO reports output)
            psu.power_out = row.value if psu.power_out is None else psu.power_out
    verdict = polarity(row)
    if verdict < 0:
        psu.bad.append(row.text())
    elif verdict > 0:
        psu.good.append(row.text())
