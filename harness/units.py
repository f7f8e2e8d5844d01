"""The closed vocabulary of units and the conversions into them.

Bandwidth GB/s (10^9 B/s), latency us, power W, temperature C, compute TFLOPS, sizes bytes.
"""

from __future__ import annotations

import math
from typing import overload

GBPS = "GB/s"
US = "us"
WATT = "W"
CELSIUS = "C"
TFLOPS = "TFLOPS"
BYTES = "B"
IOPS = "IOPS"
MHZ = "MHz"
PERCENT = "%"
JOULE = "J"
SECONDS = "s"
COUNT = "count"
RATIO = "ratio"
SAMPLES_PER_S = "samples/s"  # data_path: dataset samples (files) delivered per second
GBITPS = "Gb/s"  # only for display of link rates; metrics use GB/s

UNITS: frozenset[str] = frozenset(
    {GBPS, US, WATT, CELSIUS, TFLOPS, BYTES, IOPS, MHZ, PERCENT, JOULE, SECONDS, COUNT, RATIO,
     SAMPLES_PER_S}
)

# Prometheus base units (prometheus.io/docs/practices/naming): each catalogue unit -> (the suffix of
# a metric family's name, the factor from the catalogue's unit to that base unit). The one table the
# exposition (harness/report/prometheus.py) converts with; COUNT has no suffix.
PROM_BASE: dict[str, tuple[str, float]] = {
    GBPS: ("bytes_per_second", 1e9), US: ("seconds", 1e-6), SECONDS: ("seconds", 1.0),
    WATT: ("watts", 1.0), CELSIUS: ("celsius", 1.0), JOULE: ("joules", 1.0), MHZ: ("hertz", 1e6),
    PERCENT: ("ratio", 0.01), RATIO: ("ratio", 1.0), TFLOPS: ("flops", 1e12), BYTES: ("bytes", 1.0),
    IOPS: ("iops", 1.0), COUNT: ("", 1.0), SAMPLES_PER_S: ("samples_per_second", 1.0),
}

_TO_GBPS = {
    "B/s": 1e-9, "KB/s": 1e-6, "MB/s": 1e-3, "GB/s": 1.0, "TB/s": 1e3,
    "KiB/s": 1024 / 1e9, "MiB/s": 1024**2 / 1e9, "GiB/s": 1024**3 / 1e9,
    "bit/s": 1.25e-10, "Kb/s": 1.25e-7, "Mb/s": 1.25e-4, "Gb/s": 0.125, "Tb/s": 125.0,
}
_TO_US = {"ns": 1e-3, "us": 1.0, "usec": 1.0, "ms": 1e3, "s": 1e6}
_TO_BYTES = {
    "B": 1, "K": 1024, "KB": 1000, "KiB": 1024, "M": 1024**2, "MB": 1000**2, "MiB": 1024**2,
    "G": 1024**3, "GB": 1000**3, "GiB": 1024**3, "T": 1024**4, "TB": 1000**4, "TiB": 1024**4,
    "P": 1024**5, "PB": 1000**5, "PiB": 1024**5,
}


def to_gbps(value: float, unit: str) -> float:
    """Convert a bandwidth in `unit` to GB/s (10^9 bytes per second)."""
    try:
        return value * _TO_GBPS[unit]
    except KeyError:
        raise ValueError(f"unknown bandwidth unit {unit!r}") from None


def to_prom_base(value: float, unit: str) -> tuple[float, str]:
    """(value in the Prometheus base unit, that unit's name suffix); ValueError for an unknown unit."""
    try:
        suffix, factor = PROM_BASE[unit]
    except KeyError:
        raise ValueError(f"unknown unit {unit!r}") from None
    return value * factor, suffix


def to_us(value: float, unit: str) -> float:
    """Convert a duration in `unit` to microseconds."""
    try:
        return value * _TO_US[unit]
    except KeyError:
        raise ValueError(f"unknown time unit {unit!r}") from None


def parse_size(text: str | int) -> int:
    """Parse '4k', '1M', '512', '8GiB' into bytes (k/M/G without B are binary, as fio does)."""
    if isinstance(text, int):
        return text
    s = text.strip()
    num = s.rstrip("BbiKkMmGgTtPp")
    suffix = s[len(num):]
    if not num:
        raise ValueError(f"not a size: {text!r}")
    norm = suffix[:1].upper() + suffix[1:] if suffix else "B"
    if norm in ("Kb", "Mb", "Gb", "Tb", "Pb"):  # '4kb' means bytes to operators, not bits
        norm = norm[0]
    try:
        return int(float(num) * _TO_BYTES[norm])
    except KeyError:
        raise ValueError(f"unknown size suffix in {text!r}") from None


def check_finite(v: float | None) -> float | None:
    """v unchanged when it is None or a finite number; else ValueError (for pydantic validators)."""
    if v is not None and not math.isfinite(v):
        raise ValueError("must be a finite number")
    return v


@overload
def check_size(v: None) -> None: ...
@overload
def check_size(v: str | int) -> str | int: ...
def check_size(v: str | int | None) -> str | int | None:
    """v unchanged when it is None or a positive size ('64k', '4M', 2097152); else ValueError
    (for pydantic field validators: the value keeps the user's spelling)."""
    if v is None:
        return v
    try:
        n = parse_size(v)
    except ValueError:
        raise ValueError(f"not a size: {v!r} (use e.g. 4k, 1M, 16G or a number of bytes)") from None
    if n <= 0:
        raise ValueError(f"size must be positive, got {v!r}")
    return v
