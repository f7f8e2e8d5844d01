"""What a record says, as a person reads it: timestamps, statuses, labels and an evaluation's
expectation in words. Numbers themselves (significant digits, thousands separators, scaled units,
bytes, durations, bands) have one door, harness.numfmt, which every layer formats through, so the
same value reads the same everywhere; these functions word records with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from harness.model import Evaluation, join_labels
from harness.numfmt import digits_for, fmt_band, fmt_delta, fmt_value

__all__ = ["expectation_text", "fmt_labels", "fmt_status", "fmt_time"]


def fmt_time(iso: str) -> str:
    """An ISO 8601 timestamp as 'YYYY-MM-DD HH:MM:SS UTC'; unparsable text is returned as is."""
    if not iso:
        return "—"
    try:
        t = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso
    if t.tzinfo is not None:
        t = t.astimezone(timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_status(value: str) -> str:
    """A check status as a line of text shows it: 'PASSED', 'NOT RUN' (never 'NOT_RUN')."""
    return value.replace("_", " ").upper()


def fmt_labels(labels: Mapping[str, Any]) -> str:
    """Labels as '{k=v,k=v}', or '' when there are none."""
    return join_labels(labels, braces=True)


def expectation_text(ev: Evaluation) -> str:
    """'measured 1.23 GB/s, expected >= 2 GB/s (-38.5 % vs reference 2 GB/s)'."""
    d = digits_for(ev.measured, (ev.reference, ev.low, ev.high))
    measured = "nothing" if ev.measured is None else fmt_value(ev.measured, ev.unit, d)
    band = fmt_band(ev.low, ev.high, ev.unit, d, ascii_=True)
    if band.startswith("["):
        band = f"within {band}"
    text = f"measured {measured}, expected {band}"
    if ev.reference is not None and ev.delta_pct is not None:
        delta = fmt_delta(ev.delta_pct).replace(" ", "")
        text += f" ({delta} vs reference {fmt_value(ev.reference, ev.unit, d)})"
    return text
