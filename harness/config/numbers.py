"""The one number syntax of suites, profiles and the command line, as pydantic field types.

Every size, duration, fraction and quantity a person writes is read by harness.units (sizes as fio
reads them, k = KB = KiB = 1024; durations 90, '90s', '10m', '1h30m'; fractions 0.15 or '15%';
quantities with a unit that is a known multiple of the catalogue's). These types plug those
parsers into pydantic, so a bad value is one located FILE:LINE:COL problem with the parser's words.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

from pydantic import BeforeValidator, Field, WithJsonSchema

from harness.units import (
    DURATION_HINT,
    canonical_for,
    parse_duration,
    parse_fraction,
    parse_percent,
    parse_quantity,
    parse_size,
)

DURATION_PATTERN = r"^\s*(\d+(\.\d+)?|\.\d+)\s*$|^\s*((\d+(\.\d+)?|\.\d+)\s*(ns|us|ms|sec|min|s|m|h|d)\s*)+$"
SIZE_PATTERN = r"^\s*(\d+(\.\d+)?|\.\d+)\s*([KkMmGgTtPpEe]([Ii]?[Bb])?|[Bb])?\s*$"
PERCENT_PATTERN = r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)\s*%\s*$"


def _duration(v: Any) -> Any:
    """Seconds from 90, 90.5, '90s', '10m', '1h', '1h30m'."""
    return parse_duration(v)


def _hours(v: Any) -> Any:
    """Hours from 24 (bare numbers are hours here), '90m', '7d'."""
    return parse_duration(v, bare="h") / 3600.0


def _whole_seconds(v: Any) -> Any:
    """Whole seconds from 10 or '10s', '2m'; a fraction of a second is refused."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v  # pydantic's int check words a bad number
    secs = parse_duration(v)
    if not secs.is_integer():
        raise ValueError(f"{v!r} is {secs:g} s: give whole seconds ({DURATION_HINT})")
    return int(secs)


def _bytes(v: Any) -> Any:
    """Bytes from 17179869184, '16GiB', '16G', '512M' (k = KB = KiB = 1024)."""
    return parse_size(v)


def _fraction(v: Any) -> Any:
    """A fraction from 0.95 or '95%'; bare numbers above 1 are refused (a percent without '%')."""
    return parse_fraction(v)


def _ratio(v: Any) -> Any:
    """A ratio from 1.15 or '115%' (may exceed 1)."""
    return parse_fraction(v, above_one=True)


def _gbps(v: Any) -> Any:
    """GB/s from 0.05 or '50 MB/s' (a known multiple of GB/s)."""
    return parse_quantity(v, "GB/s")


def _percent(v: Any) -> Any:
    """A number of percent from 15 or '15%'."""
    frac = parse_percent(v)
    return v if frac is None else frac * 100


_DURATION_JS = {"type": "string", "pattern": DURATION_PATTERN,
                "description": "a duration such as '90s', '10m', '1h' or '1h30m'"}
_SIZE_JS = {"type": "string", "pattern": SIZE_PATTERN,
            "description": "a size such as '4k', '16GiB' (k, KB and KiB all mean 1024, as in fio)"}
_PERCENT_JS = {"type": "string", "pattern": PERCENT_PATTERN, "description": "a percent such as '15%'"}


def _number_or(extra: dict[str, Any], integer: bool = False) -> WithJsonSchema:
    return WithJsonSchema({"anyOf": [{"type": "integer" if integer else "number"}, extra]})


# Field types: the bounds (gt/le...) are on the value after parsing.
Seconds = Annotated[float, BeforeValidator(_duration), Field(gt=0, le=7 * 24 * 3600)]
Duration = Annotated[float, BeforeValidator(_duration), _number_or(_DURATION_JS)]
WholeSeconds = Annotated[int, BeforeValidator(_whole_seconds), _number_or(_DURATION_JS, True)]
Hours = Annotated[float, BeforeValidator(_hours), _number_or(_DURATION_JS)]
Bytes = Annotated[int, BeforeValidator(_bytes), _number_or(_SIZE_JS, True)]
Fraction = Annotated[float, BeforeValidator(_fraction), _number_or(_PERCENT_JS)]
Ratio = Annotated[float, BeforeValidator(_ratio), _number_or(_PERCENT_JS)]
Percent = Annotated[float, BeforeValidator(_percent), _number_or(_PERCENT_JS)]
GBps = Annotated[float, BeforeValidator(_gbps), _number_or({"type": "string", "description": "a rate "
                                                            "such as '50 MB/s' or '0.05 GB/s'"})]


class Unreadable:
    """A value the rule-level conversion could not read, carried to its own field so the problem
    is located there (see Expectation._canonical_unit)."""

    def __init__(self, message: str) -> None:
        self.message = message


def _reject_unreadable(v: Any) -> Any:
    if isinstance(v, Unreadable):
        raise ValueError(v.message)
    if isinstance(v, str):  # a number written as text, e.g. '1e3' (YAML 1.2 reads it as a float)
        try:
            return float(v)
        except ValueError:
            raise ValueError(f"expected a number, or a number with its unit such as '900 MB/s', "
                             f"got {v!r}") from None
    return v


_QUANTITY_JS = {"type": "string", "description": "a number with a unit, e.g. '900 MB/s' or '37 ms'"}

# A number in a rule's unit; Expectation converts '900 MB/s' or a multiple unit before this runs.
Quantity = Annotated[Optional[float], BeforeValidator(_reject_unreadable),
                     WithJsonSchema({"anyOf": [{"type": "number"}, _QUANTITY_JS, {"type": "null"}]})]


def convert_rule(data: dict[str, Any], metric_unit: str | None = None) -> dict[str, Any]:
    """A rule's raw mapping with its unit made the catalogue's (MB/s -> GB/s, ms -> us, kW -> W; s
    -> us for a metric in us) and its absolute numbers converted into it: reference, min, max,
    lower/upper where the reference is 0 (they are absolute then) and a sibling band's max_below and
    max_above. A number that cannot be read becomes Unreadable."""
    unit = data.get("unit")
    if not isinstance(unit, str):
        return data
    try:
        to, factor = canonical_for(unit, metric_unit)
    except ValueError:
        return data  # the unit field's own validator words it
    out = dict(data, unit=to)
    band = out.get("sibling")
    if isinstance(band, dict) and factor != 1.0:
        band = dict(band)
        for k in ("max_below", "max_above"):
            v = band.get(k)
            if v is not None and not isinstance(v, bool):
                try:
                    band[k] = parse_quantity(v, to, factor)
                except ValueError as e:
                    band[k] = Unreadable(str(e))
        out["sibling"] = band
    for k in ("reference", "min", "max", "lower", "upper"):
        if k == "lower" and out.get("reference") != 0:
            break
        v = out.get(k)
        if v is None or isinstance(v, bool):
            continue
        try:
            out[k] = parse_quantity(v, to, factor)
        except ValueError as e:
            out[k] = Unreadable(str(e))
    return out
