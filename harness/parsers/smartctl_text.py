"""Read smartctl's plain-text output (`smartctl -a` / `-x` / `-A`, smartmontools 5.x to 7.x).

Pure: text in, a TextReport of the fields smartctl.py turns into metrics (so the JSON and text
paths share one metric builder). smartctl prints numbers in the writer's locale: `25,392`,
`12 629` (space, no-break or narrow no-break space), `5’716’382`, German `69.752.883 [35,7 TB]`.
Every field read here is an integer count, so any one separator between groups of three digits is
a thousands separator, except the locale's decimal mark, which the bracketed sizes (`[35,7 TB]`,
`[1.80 TB]`) tell. A data-unit count must agree with its bracketed size, else it was misread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from harness.parsers.base import INT_DIGITS, finite

DATA_UNIT_BYTES = 512_000
# NVMe SMART/Health log labels (whitespace collapsed, lower case) -> smartctl JSON key
NVME_KEYS = {
    "critical warning": "critical_warning",
    "temperature": "temperature",
    "available spare": "available_spare",
    "available spare threshold": "available_spare_threshold",
    "percentage used": "percentage_used",
    "data units read": "data_units_read",
    "data units written": "data_units_written",
    "power on hours": "power_on_hours",
    "unsafe shutdowns": "unsafe_shutdowns",
    "media and data integrity errors": "media_errors",
    "error information log entries": "num_err_log_entries",
    "warning comp. temperature time": "warning_temp_time",  # minutes, as in the JSON
    "critical comp. temperature time": "critical_comp_time",
}
# ATA attribute 9 comes in other units on some drives (smartctl's drive database names them)
POWER_ON_DIVISOR = {"power_on_minutes": 60.0, "power_on_half_minutes": 120.0,
                    "power_on_seconds": 3600.0}
SEPARATORS = ",.'’ \u00a0\u202f\u2009"
SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
# lines that mean smartctl did not read the drive (JSON: exit status bits 0-2)
FATAL = re.compile(
    r"^(?:=+> UNRECOGNIZED OPTION: .*|Smartctl open device: .* failed.*|.*: Unable to detect device type"
    r"|A mandatory SMART command failed.*|Read (?:NVMe )?SMART.* failed.*|Smartctl: Device Read Identity"
    r" Failed.*|.*: Unknown device type .*)$", re.MULTILINE)
NO_JSON = re.compile(r"^=+> UNRECOGNIZED OPTION: (?:j|json\S*)\s*$", re.MULTILINE)
_LOOKS = re.compile(r"^(?:smartctl \d+\.\d+ |=== START OF |SMART overall-health|Critical Warning:"
                    r"|ID# ATTRIBUTE_NAME|Smartctl open device:|=+> UNRECOGNIZED OPTION)", re.MULTILINE)
_KV = re.compile(r"^([A-Za-z][^:\t]*?):[ \t]+(\S.*?)\s*$")
_ATTR = re.compile(
    r"^\s*(?P<id>\d{1,3})\s+(?P<name>\S+)\s+(?P<flag>0x[0-9a-fA-F]{4}|[P-][O-][S-][R-][C-][K-]\+?)\s+"
    r"(?P<value>\d{3}|---)\s+(?P<worst>\d{3}|---)\s+(?P<thresh>\d{3}|---)\s+"
    r"(?:(?:Pre-fail|Old_age)\s+(?:Always|Offline)\s+)?(?P<failed>\S+)\s+(?P<raw>\S.*?)\s*$")
_BRACKET = re.compile(r"\[\s*(\d+)(?:([.,])(\d+))?\s*([KMGTPE]?)B\s*\]")
_HEALTH = re.compile(r"^SMART overall-health self-assessment test result:\s*(\S+)", re.MULTILINE)
_SAS_HEALTH = re.compile(r"^SMART Health Status:\s*(.+?)\s*$", re.MULTILINE)
_SATA = re.compile(r"^SATA Version is:.*?([\d.,]+) Gb/s \(current: ([\d.,]+) Gb/s\)", re.MULTILINE)


@dataclass(frozen=True)
class TextReport:
    """What a smartctl text output says; numbers already read in the output's locale."""

    fatal: tuple[str, ...] = ()  # smartctl's own lines saying the drive was not read
    doubts: tuple[str, ...] = ()  # numbers that could not be read safely
    decimal_mark: Optional[str] = None
    identity: dict[str, str] = field(default_factory=dict)  # model, serial, firmware
    passed: Optional[bool] = None
    nvme: dict[str, float] = field(default_factory=dict)  # smartctl JSON key -> value
    ata_raw: dict[int, float] = field(default_factory=dict)  # attribute id -> first raw number
    failing: tuple[str, ...] = ()  # ATA attributes smartctl marks failing now or in the past
    temperature: Optional[float] = None
    power_on_hours: Optional[float] = None
    sata_gbps: Optional[tuple[float, float]] = None  # (max, current)

    scsi: bool = False  # SCSI/SAS log pages (`Transport protocol:`, `Current Drive Temperature:`)

    @property
    def protocol(self) -> Optional[str]:
        if self.nvme:
            return "NVMe"
        if self.ata_raw or self.sata_gbps:
            return "ATA"
        return "SCSI" if self.scsi else None


def looks_like_text(text: str) -> bool:
    """True when the text is smartctl's plain-text output (of any version)."""
    return _LOOKS.search(text) is not None


def lacks_json(text: str) -> bool:
    """True when smartctl refused -j/--json: smartmontools before 7.0 has only text."""
    return NO_JSON.search(text) is not None


def read(text: str) -> TextReport:
    """Every field the metrics need, from one smartctl text output."""
    text = text.replace("\r\n", "\n")
    mark = decimal_mark(text)
    pairs = _pairs(text)
    doubts: list[str] = []
    nvme = _nvme(pairs, mark, doubts) if "critical warning" in pairs else {}
    rows = [m.groupdict() for m in map(_ATTR.match, text.splitlines()) if m]
    ata = {int(r["id"]): v for r in rows if (v := _first_int(r["raw"])) is not None}
    failing = tuple(f"{r['id']} {r['name']}: {r['failed']}" for r in rows if r["failed"] != "-")
    identity = {k: pairs[key] for k, key in (("model", "device model"), ("model", "model number"),
                                             ("serial", "serial number"),
                                             ("firmware", "firmware version")) if key in pairs}
    scsi = "transport protocol" in pairs or "current drive temperature" in pairs
    if scsi and "model" not in identity and "product" in pairs:  # SCSI: Vendor + Product
        vendor, product = pairs.get("vendor", "").strip(), pairs["product"].strip()
        identity["model"] = f"{vendor} {product}".strip()
    return TextReport(
        fatal=tuple(m.group(0).strip() for m in FATAL.finditer(text)), doubts=tuple(doubts),
        decimal_mark=mark, identity=identity, passed=_passed(text), nvme=nvme, ata_raw=ata,
        failing=failing, temperature=_temperature(rows, pairs), power_on_hours=_power_on(rows),
        sata_gbps=_sata(text), scsi=scsi)


def decimal_mark(text: str) -> Optional[str]:
    """The locale's decimal mark as the bracketed sizes show it (`[1.80 TB]`, `[35,7 TB]`)."""
    marks = {m.group(2) for m in _BRACKET.finditer(text) if m.group(2)}
    return marks.pop() if len(marks) == 1 else None


def integer(raw: str, mark: Optional[str] = None) -> Optional[float]:
    """An integer written with any one thousands separator that is not the decimal mark `mark`;
    None past INT_DIGITS digits (or 16 hex digits): no counter is that long."""
    s = raw.strip()
    if re.fullmatch(r"0x[0-9a-fA-F]{1,16}", s):
        return float(int(s, 16))
    digits = s if re.fullmatch(r"\d+", s) else None
    m = re.fullmatch(r"\d{1,3}(\D)\d{3}(?:\1\d{3})*", s)
    if m and m.group(1) in SEPARATORS and m.group(1) != mark:
        digits = re.sub(r"\D", "", s)
    return float(digits) if digits is not None and len(digits) <= INT_DIGITS else None


def _pairs(text: str) -> dict[str, str]:
    """`Label:   value` lines, first occurrence of each label (whitespace collapsed, lower case)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _KV.match(line)
        if m:
            out.setdefault(" ".join(m.group(1).split()).lower(), m.group(2))
    return out


def _nvme(pairs: dict[str, str], mark: Optional[str], doubts: list[str]) -> dict[str, float]:
    """The NVMe health log's fields as numbers; an unreadable one is left out and named in doubts."""
    out: dict[str, float] = {}
    for label, key in NVME_KEYS.items():
        if label not in pairs:
            continue
        raw = pairs[label]
        bracket = _BRACKET.search(raw)
        value = re.sub(r"\s*(?:\[.*\]|Celsius|%)\s*$", "", raw)
        num = integer(value, mark)
        if num is None:  # never handed on: a lenient reader would take "1.069" for 1.069
            doubts.append(f"{key}: not a number ({raw[:40]!r})")
            continue
        if bracket and key.startswith("data_units_"):
            size = _bracket_bytes(bracket)
            if size is not None and not _agrees(num * DATA_UNIT_BYTES, size):
                doubts.append(f"{label}: {value} units do not match {bracket.group(0)}: "
                              "number misread in this locale?")
                continue
        out[key] = num
    return out


def _bracket_bytes(m: re.Match[str]) -> Optional[float]:
    whole, frac, unit = m.group(1), m.group(3) or "0", m.group(4)
    return float(f"{whole}.{frac}") * SI[unit]


def _agrees(value: float, shown: float) -> bool:
    """smartctl shows three significant digits, cut off: 836.7 GB reads `[836 GB]`."""
    if shown == 0:
        return value < 1e3
    return -0.01 <= (value - shown) / shown <= 0.02


def _first_int(raw: str) -> Optional[float]:
    """The raw value's leading number: `3956`, `23 (Min/Max 23/23)`, `12345h+07m+10.123s`."""
    m = re.match(rf"\d{{1,{INT_DIGITS}}}(?!\d)", raw)
    return float(m.group(0)) if m else None


def _passed(text: str) -> Optional[bool]:
    ata = _HEALTH.search(text)
    if ata:
        word = ata.group(1).upper()
        return True if word == "PASSED" else False if word.startswith("FAILED") else None
    sas = _SAS_HEALTH.search(text)
    return None if sas is None else sas.group(1).upper() == "OK"


def _temperature(rows: list[dict[str, str]], pairs: dict[str, str]) -> Optional[float]:
    """ATA: attribute 194, else 190, else SCT status `Current Temperature:`; SCSI/SAS (also behind
    a MegaRAID controller, `-d megaraid,N`): `Current Drive Temperature:     34 C`."""
    by_id = {int(r["id"]): r["raw"] for r in rows}
    for attr in (194, 190):
        if attr in by_id and (t := _first_int(by_id[attr])) is not None:
            return t
    m = re.match(r"(-?\d{1,4})\s*Celsius", pairs.get("current temperature", ""))
    if m:
        return float(m.group(1))
    m = re.match(r"(-?\d{1,4})\s*C\b", pairs.get("current drive temperature", ""))
    return float(m.group(1)) if m else None


def _power_on(rows: list[dict[str, str]]) -> Optional[float]:
    for r in rows:
        if int(r["id"]) == 9:
            raw = _first_int(r["raw"])
            if raw is None:
                return None
            return raw / POWER_ON_DIVISOR.get(r["name"].lower(), 1.0)
    return None


def _sata(text: str) -> Optional[tuple[float, float]]:
    m = _SATA.search(text)
    if not m:
        return None
    top, now = (finite(g.replace(",", ".")) for g in m.groups())
    return None if top is None or now is None else (top, now)  # "6.0.0 Gb/s": no link speed
