"""What a record says, as a person reads it: timestamps, statuses, labels and an evaluation's
expectation in words. Numbers themselves (significant digits, thousands separators, scaled units,
bytes, durations, bands) have one door, harness.numfmt, which every layer formats through, so the
same value reads the same everywhere; these functions word records with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from harness import catalog
from harness.model import Evaluation, join_labels
from harness.numfmt import digits_for, fmt_band, fmt_delta, fmt_num, fmt_value

__all__ = ["expectation_text", "fmt_expected", "fmt_labels", "fmt_measured", "fmt_status", "fmt_time",
           "rule_line"]


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


def _is_flag(ev: Evaluation) -> bool:
    spec = catalog.spec(ev.metric)
    return spec is not None and spec.flag


def fmt_measured(ev: Evaluation, digits: int = 3) -> str:
    """What an evaluation measured as a person reads it: 'off' for a flag at 0, '23.6 GiB'."""
    if ev.measured is None:
        return "nothing"
    if _is_flag(ev):
        return "on" if ev.measured else "off"
    return fmt_value(ev.measured, ev.unit, digits)


def fmt_expected(ev: Evaluation, digits: int = 3, ascii_: bool = True) -> str:
    """What an evaluation expected: 'on' for a flag that must be 1, '8' for an exact count, else
    its band ('>= 2 GB/s', 'within [60, 85] C')."""
    if _is_flag(ev) and (ev.low, ev.high) in ((1.0, None), (None, 0.0), (1.0, 1.0), (0.0, 0.0)):
        return "on" if ev.low == 1.0 else "off"
    if ev.low is not None and ev.low == ev.high:
        return fmt_value(ev.low, ev.unit, digits, trim=True)
    band = fmt_band(ev.low, ev.high, ev.unit, digits, ascii_=ascii_)
    return f"within {band}" if band.startswith("[") else band


def expectation_text(ev: Evaluation) -> str:
    """'measured 1.23 GB/s, expected >= 2 GB/s (-38.5 % vs reference 2 GB/s)'; a flag reads
    'measured off, expected on', an exact count 'measured 7, expected 8'."""
    d = digits_for(ev.measured, (ev.reference, ev.low, ev.high))
    text = f"measured {fmt_measured(ev, d)}, expected {fmt_expected(ev, d)}"
    if ev.reference is not None and ev.delta_pct is not None and not _is_flag(ev):
        delta = fmt_delta(ev.delta_pct).replace(" ", "")
        text += f" ({delta} vs reference {fmt_value(ev.reference, ev.unit, d)})"
    return text


def rule_line(ev: Evaluation) -> str:
    """One judged rule in a line, the metric first: 'gpu.count 7 of 8', 'gpu.persistence_mode{gpu=3}
    off, expected on', 'fio.bw{job=r} 1.23 GB/s, expected >= 2 GB/s'; a rule with no measured value
    or no bound (a config fact, a finding) in its own words."""
    name = ev.metric + fmt_labels(ev.labels)
    if ev.measured is None or (ev.low is None and ev.high is None):
        return f"{name}: {ev.message}" if ev.message else f"{name}: {expectation_text(ev)}"
    d = digits_for(ev.measured, (ev.reference, ev.low, ev.high))
    if (ev.unit == "count" and not _is_flag(ev) and ev.low is not None and ev.low == ev.high
            and ev.measured < ev.low):
        return f"{name} {fmt_num(ev.measured)} of {fmt_num(ev.low)}"
    return f"{name} {fmt_measured(ev, d)}, expected {fmt_expected(ev, d)}"
