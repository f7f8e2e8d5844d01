"""The closed vocabulary of units and the conversions into them.

Bandwidth GB/s (10^9 B/s), latency us, power W, temperature C, compute TFLOPS, sizes bytes.
"""

from __future__ import annotations

import math
import re
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


def to_gbps(value: float, unit: str) -> float:
    """Convert a bandwidth in `unit` to GB/s (10^9 bytes per second)."""
    try:
        return value * _TO_GBPS[unit]
    except KeyError:
        raise ValueError(f"unknown bandwidth unit {unit!r}") from None


def to_us(value: float, unit: str) -> float:
    """Convert a duration in `unit` to microseconds."""
    try:
        return value * _TO_US[unit]
    except KeyError:
        raise ValueError(f"unknown time unit {unit!r}") from None


# Sizes are read as fio reads them with its default kb_base=1024: k, K, KB, KiB and kb all mean
# 1024 (`bs: 4KB` is 4096 bytes, as fio itself takes it); the same for M, G, T, P.
_SIZE_EXP = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(?:([KMGTPE])(?:I?B)?|B)?\s*$", re.IGNORECASE)
MAX_SIZE = 2**63 - 1  # what fio and the kernel take as a byte count
SIZE_HINT = "use e.g. 4k, 1M, 16GiB or a number of bytes; k/KB/KiB all mean 1024, as in fio"


def parse_size(text: str | int) -> int:
    """Bytes from '4k', '4KB', '4KiB' (all 4096, as fio reads them), '1.5G', '512' or an int.

    ValueError (worded for people) for anything else, including 'inf', '1e300P' and sizes beyond
    2^63-1 bytes."""
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r} ({SIZE_HINT})")
    if isinstance(text, int):
        n = text
    else:
        m = _SIZE.match(text) if isinstance(text, str) else None
        if m is None:
            raise ValueError(f"not a size: {text!r} ({SIZE_HINT})")
        num, prefix = m.group(1), (m.group(2) or "").upper()
        whole, _, frac = num.partition(".")
        scale = 1024 ** _SIZE_EXP[prefix]
        n = int(whole or "0") * scale + (int(frac) * scale) // (10 ** len(frac)) if frac else \
            int(whole) * scale
    if n > MAX_SIZE:
        raise ValueError(f"size {text!r} is too large (at most 2^63-1 bytes, about 8 EiB)")
    return n


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*(ns|us|ms|sec|min|s|m|h|d)?", re.IGNORECASE)
_TO_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0,
         "h": 3600.0, "d": 86400.0}
DURATION_HINT = "use e.g. 90, 90s, 500ms, 10m, 1h or 1h30m"


def parse_duration(v: str | float, bare: str = "s") -> float:
    """Seconds from 90 (in `bare` units), '90s', '500ms', '10m', '1h', '1h30m', '2d'.

    ValueError (worded for people) for anything else: booleans, negative, non-finite numbers."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ValueError(f"not a duration: {v!r} ({DURATION_HINT})")
    if isinstance(v, (int, float)):  # a negative number is left to the field's bounds to word
        try:
            secs = float(v) * _TO_S[bare]
        except OverflowError:
            raise ValueError(f"duration {v} is out of range") from None
        if not math.isfinite(secs):
            raise ValueError(f"not a duration: {v!r} ({DURATION_HINT})")
        return secs
    else:
        text, pos, secs, parts = v.strip(), 0, 0.0, 0
        while pos < len(text):
            m = _DURATION_PART.match(text, pos)
            if m is None or (m.group(2) is None and (parts or m.end() < len(text))):
                raise ValueError(f"not a duration: {v!r} ({DURATION_HINT})")
            secs += float(m.group(1)) * _TO_S[(m.group(2) or bare).lower()]
            pos, parts = m.end(), parts + 1
            while pos < len(text) and text[pos] == " ":
                pos += 1
        if not parts:
            raise ValueError(f"not a duration: {v!r} ({DURATION_HINT})")
    if not math.isfinite(secs) or secs < 0:
        raise ValueError(f"not a duration: {v!r} ({DURATION_HINT})")
    return secs


FRACTION_HINT = "a fraction such as 0.15 or a percent such as 15%"


def parse_percent(v: object) -> float | None:
    """The fraction a percent string means ('15%' -> 0.15, '2.5 %' -> 0.025); None when `v` is not
    a percent string. ValueError for a malformed or non-finite percent."""
    if not isinstance(v, str) or not v.strip().endswith("%"):
        return None
    try:
        x = float(v.strip()[:-1])
    except ValueError:
        raise ValueError(f"not a percent: {v!r} (write e.g. 15%)") from None
    if not math.isfinite(x):
        raise ValueError(f"not a percent: {v!r} (write e.g. 15%)")
    return x / 100


def parse_fraction(v: object, *, above_one: bool = False) -> float:
    """A fraction from 0.15 or '15%'. A bare number above 1 is refused (it is almost always a
    percent written without its sign: `lower: 15` meant 15%) unless `above_one`."""
    pct = parse_percent(v)
    if pct is not None:
        return pct
    x = _plain_number(v, FRACTION_HINT)
    if x > 1 and not above_one:
        raise ValueError(f"{_show_num(v)} is a fraction, so it means {x * 100:,.0f}%; write "
                         f"{_show_num(v)}% for {_show_num(v)} percent, or {x / 100:g} as a fraction")
    return x


def _show_num(v: object) -> str:
    return v.strip() if isinstance(v, str) else (f"{v:g}" if isinstance(v, float) else str(v))


def _plain_number(v: object, hint: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ValueError(f"expected {hint}, got {v!r}")
    try:
        x = float(v)
    except (ValueError, OverflowError):
        raise ValueError(f"expected {hint}, got {v!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"expected {hint}, got {v!r} (not a finite number)")
    return x


# Units a person may write that are a known multiple of a catalogue unit: unit -> (catalogue unit,
# factor into it). Suites and profiles are converted on load (MB/s -> GB/s, ms -> us, kW -> W).
_MULTIPLES: dict[str, tuple[str, float]] = {
    **{u: (GBPS, f) for u, f in _TO_GBPS.items() if u != GBPS},
    "ns": (US, 1e-3), "usec": (US, 1.0), "µs": (US, 1.0), "ms": (US, 1e3),
    "min": (SECONDS, 60.0), "h": (SECONDS, 3600.0),
    "mW": (WATT, 1e-3), "kW": (WATT, 1e3), "MW": (WATT, 1e6),
    "Hz": (MHZ, 1e-6), "kHz": (MHZ, 1e-3), "GHz": (MHZ, 1e3),
    "GFLOPS": (TFLOPS, 1e-3), "PFLOPS": (TFLOPS, 1e3),
    "kIOPS": (IOPS, 1e3), "KIOPS": (IOPS, 1e3), "MIOPS": (IOPS, 1e6),
    **{p + s: (BYTES, float(1024 ** e)) for p, e in _SIZE_EXP.items() if p
       for s in ("", "B", "iB")},
    "kB": (BYTES, 1024.0), "kiB": (BYTES, 1024.0),
}


# Two catalogue units of one dimension: (from, to) -> factor.
_BETWEEN: dict[tuple[str, str], float] = {(SECONDS, US): 1e6, (US, SECONDS): 1e-6}


def canonical(unit: str) -> tuple[str, float]:
    """(the catalogue unit, the factor into it) for a unit a person wrote: ('GB/s', 1.0) for GB/s,
    ('GB/s', 0.001) for MB/s; ValueError for a unit that is neither."""
    if unit in UNITS:
        return unit, 1.0
    if unit in _MULTIPLES:
        return _MULTIPLES[unit]
    raise ValueError(f"unknown unit {unit!r}; use one of {', '.join(sorted(UNITS))} "
                     f"or a multiple such as MB/s, ms, kW, GHz, GiB")


def canonical_for(unit: str, target: str | None) -> tuple[str, float]:
    """canonical(unit), but into `target` (a metric's catalogue unit) where the two are one dimension
    in different catalogue units: ('us', 1e6) for a latency rule written in s."""
    to, factor = canonical(unit)
    if target is not None and to != target and (to, target) in _BETWEEN:
        return target, factor * _BETWEEN[(to, target)]
    return to, factor


_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([^\s\d].*?)?\s*$")


def parse_quantity(v: object, unit: str, bare: float = 1.0) -> float:
    """A number in `unit` (a catalogue unit) from 900, '900', '900 MB/s' (-> 0.9 for GB/s) or
    '37ms' (-> 37000 for us); a number without a unit is multiplied by `bare` (the factor of the
    unit the rule was written in). ValueError for another dimension, an unknown unit or a
    non-finite number."""
    if not isinstance(v, str):
        return _finite(_plain_number(v, f"a number in {unit}") * bare, v)
    m = _QUANTITY.match(v)
    if m is None:
        raise ValueError(f"expected a number in {unit} (e.g. 12.5 or '12.5 {unit}'), got {v!r}")
    x = _plain_number(m.group(1), f"a number in {unit}")
    if m.group(2) is None:
        return _finite(x * bare, v)
    try:
        to, factor = canonical(m.group(2))
    except ValueError as e:
        raise ValueError(f"{v!r}: {e}") from None
    if to != unit and (to, unit) not in _BETWEEN:
        raise ValueError(f"{v!r} is in {to}, not {unit}")
    return _finite(x * factor * _BETWEEN.get((to, unit), 1.0), v)


def _finite(x: float, given: object) -> float:
    if not math.isfinite(x):
        raise ValueError(f"{given!r} is out of range")
    return x


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
    n = parse_size(v)
    if n <= 0:
        raise ValueError(f"size must be positive, got {v!r}")
    return v
