"""Parse nvme-cli's `nvme smart-log` (JSON of every nvme-cli version, or its plain text) into metrics.

Pure: text in, ParseResult out. Quirks handled, each seen in real output: nvme-cli 1.x `"key" : v`
spacing; values as numbers, floats or strings (nvme-cli 2.1.1); `critical_warning` as an object
with `value` (nvme-cli 2.11); the text form with thousands separators and "42 C (315 Kelvin)".
nvme-cli's JSON gives the composite temperature in Kelvin; like nvme-cli and smartctl we convert
with K - 273. Data units are 1000 x 512 bytes (NVMe spec), warning/critical temperature times are
minutes (reported here in seconds). A field the output lacks is omitted, never zero-filled.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Optional

from harness.model import Metric
from harness.parsers.base import ParseResult, invalid, json_objects
from harness.units import BYTES, CELSIUS, COUNT, PERCENT, SECONDS

KIND = "nvme-smart"
DATA_UNIT_BYTES = 512_000
KELVIN_OFFSET = 273  # nvme-cli and smartctl both print K - 273
NOT_SMART = "not nvme smart-log output (use `nvme smart-log DEVICE -o json`)"

# metric -> (unit, source keys in order of preference: nvme-cli JSON, text, smartctl JSON)
FIELDS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "nvme.critical_warning": (COUNT, ("critical_warning",)),
    "nvme.available_spare": (PERCENT, ("avail_spare", "available_spare")),
    "nvme.available_spare_threshold": (PERCENT, ("spare_thresh", "available_spare_threshold")),
    "nvme.percentage_used": (PERCENT, ("percent_used", "percentage_used")),
    "nvme.power_on_hours": (COUNT, ("power_on_hours",)),
    "nvme.unsafe_shutdowns": (COUNT, ("unsafe_shutdowns",)),
    "nvme.media_errors": (COUNT, ("media_errors",)),
    "nvme.num_err_log_entries": (COUNT, ("num_err_log_entries",)),
}
DATA_UNITS = {"nvme.data_units_read": "data_units_read", "nvme.data_units_written": "data_units_written"}
MINUTES = {"nvme.warning_temp_time": "warning_temp_time", "nvme.critical_temp_time": "critical_comp_time"}
# plain-text labels of `nvme smart-log` (normal output) -> JSON key
TEXT_KEYS = {
    "warning temperature time": "warning_temp_time",
    "critical composite temperature time": "critical_comp_time",
    "endurance group critical warning summary": "endurance_grp_critical_warning_summary",
}
_NUMBER = re.compile(r"^[+-]?\d+(?:\.\d+)?$")
_TEXT_HEADER = re.compile(r"Smart Log for NVME device:\s*(\S+)", re.IGNORECASE)


def parse(text: str) -> ParseResult:
    """nvme.* metrics from `nvme smart-log` JSON (any nvme-cli version) or its text output."""
    fields, device = _json_fields(text), None
    if fields is None:
        fields, device = _text_fields(text)
    if not fields or "critical_warning" not in fields:
        return invalid(KIND, NOT_SMART)
    labels = {"device": device} if device else {}
    metrics, problems = health_metrics(fields, labels, kelvin=True)
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics),
                       {"fields": sorted(fields)})


def health_metrics(fields: Mapping[str, Any], labels: Mapping[str, str | int],
                   *, kelvin: bool) -> tuple[list[Metric], list[str]]:
    """Metrics from an NVMe health log's fields (nvme-cli or smartctl names) and the problems.

    `kelvin`: the temperature field is in Kelvin (nvme-cli) rather than Celsius (smartctl).
    """
    metrics: list[Metric] = []
    problems: list[str] = []

    def value(key: str) -> Optional[float]:
        v = number(fields.get(key))
        if v is None and fields.get(key) is not None:
            problems.append(f"{key}: not a number ({str(fields.get(key))[:40]!r})")
        return v

    for name, (unit, keys) in FIELDS.items():
        key = next((k for k in keys if k in fields), None)
        if key is not None and (v := value(key)) is not None:
            metrics.append(Metric(name, v, unit, labels))
    if "temperature" in fields and (t := value("temperature")) is not None:
        metrics.append(Metric("nvme.temperature", t - KELVIN_OFFSET if kelvin else t, CELSIUS, labels))
    for name, key in DATA_UNITS.items():
        if key in fields and (v := value(key)) is not None:
            metrics.append(Metric(name, v * DATA_UNIT_BYTES, BYTES, labels))
    for name, key in MINUTES.items():
        if key in fields and (v := value(key)) is not None:
            metrics.append(Metric(name, v * 60.0, SECONDS, labels))
    by_name = {m.name: m.value for m in metrics}
    spare, thresh = by_name.get("nvme.available_spare"), by_name.get("nvme.available_spare_threshold")
    if spare is not None and thresh is not None:
        metrics.append(Metric("nvme.spare_margin", spare - thresh, PERCENT, labels))
    problems += [f"{m.name}: out of range ({m.value})" for m in metrics if not math.isfinite(m.value)]
    return [m for m in metrics if math.isfinite(m.value)], problems


def number(raw: Any) -> Optional[float]:
    """A finite number from a JSON value: int, float, "123", "1,234", "100%" or {"value": n}."""
    if isinstance(raw, Mapping):
        raw = raw.get("value")
    if isinstance(raw, bool) or raw is None:
        return None
    try:
        if isinstance(raw, (int, float)):
            v = float(raw)
        elif isinstance(raw, str):
            s = re.sub(r"[,\s'’]", "", raw).rstrip("%")
            if s.lower().startswith("0x"):
                v = float(int(s, 16))
            elif _NUMBER.match(s):
                v = float(s)
            else:
                return None
        else:
            return None
    except (ValueError, OverflowError):  # "0xZZ", or more digits than a float holds
        return None
    return v if math.isfinite(v) else None


def _json_fields(text: str) -> Optional[dict[str, Any]]:
    """The first JSON object in the text that looks like a smart log; else None."""
    return next((o for o in json_objects(text) if "critical_warning" in o), None)


def _text_fields(text: str) -> tuple[dict[str, Any], Optional[str]]:
    """`key : value` lines of the normal output; the temperature keeps its Kelvin figure."""
    header = _TEXT_HEADER.search(text)
    fields: dict[str, Any] = {}
    for line in text.splitlines():
        key, sep, raw = line.partition(":")
        if not sep or (header and line.lstrip().lower().startswith("smart log")):
            continue
        name = key.strip().lower()
        name = TEXT_KEYS.get(name, name.replace(" ", "_"))
        value = raw.strip()
        if name == "temperature":  # "42 C (315 Kelvin)"; keep Kelvin, as the JSON has it
            kelvin = re.search(r"\((\d+)\s*Kelvin\)", value)
            celsius = re.match(r"(-?\d{1,4})\s*C\b", value)  # more digits: no temperature (left as text)
            if kelvin:
                value = kelvin.group(1)
            elif celsius:
                value = str(int(celsius.group(1)) + KELVIN_OFFSET)
        fields[name] = value
    return fields, header.group(1) if header else None
