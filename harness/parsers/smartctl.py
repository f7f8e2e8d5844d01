"""Parse smartmontools' `smartctl -a -j` JSON, or its plain text (`-a`/`-x`, any locale), into metrics.

NVMe health (nvme.*) and ATA/SATA attributes (disk.*); both forms give the same metrics, built
here from either (the text is read by smartctl_text). Pure: text in, ParseResult out. smartctl's
exit status is a bit mask: bits 0-2 (bad command line, device open failed, SMART command failed)
mean the run is not valid; bits 3-7 (disk failing, attributes at threshold, error logs) are
measurements and show in the metrics instead. The text carries no exit status: smartctl's own
lines for bits 0-2 ("Smartctl open device: ... failed") make it invalid instead, and a caller that
has the status adds `status_problems(rc)`. Labels: `device` (kernel name, e.g. nvme0 or sda; JSON
only, the text does not name it) and `serial`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Optional

from harness.model import Metric
from harness.parsers import smartctl_text
from harness.parsers.base import ParseResult, invalid, json_objects
from harness.parsers.nvme import health_metrics, number
from harness.units import CELSIUS, COUNT

KIND = "smartctl"
NOT_SMARTCTL = "not smartctl output (use `smartctl -a -j DEVICE`, or `smartctl -a DEVICE` for text)"
INVALID_BITS = {0: "command line did not parse or device type unknown",
                1: "device open failed or not supported",
                2: "a SMART or other ATA command to the disk failed"}
# ATA attribute id -> metric (raw value is a count for these on common firmware)
ATA_COUNTS = {5: "disk.reallocated_sectors", 187: "disk.reported_uncorrect",
              197: "disk.pending_sectors", 198: "disk.offline_uncorrectable"}


def parse(text: str) -> ParseResult:
    """disk.* for any protocol, nvme.* for NVMe, ATA attribute counts for SATA."""
    doc = _document(text)
    if doc is None:
        return _from_text(text) if smartctl_text.looks_like_text(text) else invalid(KIND, NOT_SMARTCTL)
    meta = _dict(doc.get("smartctl"))
    status = int(number(meta.get("exit_status")) or 0)
    problems = status_problems(status)
    messages = [str(m.get("string")) for m in _list(meta.get("messages"))
                if isinstance(m, dict) and m.get("severity") == "error"]
    if problems:
        problems += [f"smartctl: {m}" for m in messages]
    device = _dict(doc.get("device"))
    labels: dict[str, str | int] = {}
    if device.get("name"):
        labels["device"] = os.path.basename(str(device["name"]))
    if doc.get("serial_number"):
        labels["serial"] = str(doc["serial_number"]).strip()
    protocol = str(device.get("protocol") or "")
    details = {"device": device.get("name"), "protocol": protocol or None,
               "model": doc.get("model_name"), "serial": labels.get("serial"),
               "firmware": doc.get("firmware_version"), "exit_status": status,
               "messages": messages}
    if problems:
        return ParseResult(KIND, False, tuple(problems), (), details)
    metrics = _common(doc, labels)
    log = doc.get("nvme_smart_health_information_log")
    if isinstance(log, dict):
        nvme, bad = health_metrics(log, labels, kelvin=False)
        metrics += nvme
        problems += bad
        metrics = [m for m in metrics if m.name != "disk.temperature"]  # nvme.temperature has it
    metrics += _ata(_list(_dict(doc.get("ata_smart_attributes")).get("table")), labels)
    link = _sata_link(doc.get("interface_speed"), labels)
    if link is not None:
        metrics.append(link)
    if not metrics:
        problems.append("no health data in the output (SMART unsupported or disabled?)")
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)


def status_problems(status: int) -> list[str]:
    """What smartctl's exit status says made the run invalid (bits 0-2); [] for a valid run."""
    return [f"smartctl exit status {status}: {why}" for bit, why in INVALID_BITS.items()
            if status & (1 << bit)]


def lacks_json(text: str) -> bool:
    """True when smartctl refused -j: smartmontools before 7.0, which has only text output."""
    return smartctl_text.lacks_json(text)


def _from_text(text: str) -> ParseResult:
    """The same metrics as the JSON path, from `smartctl -a`/`-x`/`-A` text."""
    rep = smartctl_text.read(text)
    labels: dict[str, str | int] = {"serial": rep.identity["serial"].strip()} if rep.identity.get(
        "serial") else {}
    details = {"device": None, "protocol": rep.protocol, "model": rep.identity.get("model"),
               "serial": labels.get("serial"), "firmware": rep.identity.get("firmware"),
               "exit_status": None, "messages": list(rep.fatal), "format": "text",
               "decimal_mark": rep.decimal_mark, "failing_attributes": list(rep.failing)}
    if rep.fatal:
        hint = ("smartctl before 7.0 has no -j: run `smartctl -a DEVICE` for text",) if lacks_json(
            text) else ()
        return ParseResult(KIND, False, tuple(f"smartctl: {m}" for m in rep.fatal) + hint, (), details)
    problems = list(rep.doubts)
    metrics: list[Metric] = []
    if rep.passed is not None:
        metrics.append(Metric("disk.smart_passed", 1.0 if rep.passed else 0.0, COUNT, labels))
    if rep.nvme:
        nvme, bad = health_metrics(rep.nvme, labels, kelvin=False)
        metrics += nvme
        problems += bad
    else:
        if rep.temperature is not None:
            metrics.append(Metric("disk.temperature", rep.temperature, CELSIUS, labels))
        if rep.power_on_hours is not None:
            metrics.append(Metric("disk.power_on_hours", rep.power_on_hours, COUNT, labels))
        metrics += [Metric(name, rep.ata_raw[attr], COUNT, labels) for attr, name in ATA_COUNTS.items()
                    if attr in rep.ata_raw]
        if rep.sata_gbps is not None:
            top, now = rep.sata_gbps
            metrics.append(Metric("disk.link_downgraded", 1.0 if now < top else 0.0, COUNT, labels))
    if not metrics:
        problems.append("no health data in the output (SMART unsupported or disabled?)")
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _document(text: str) -> Optional[dict[str, Any]]:
    """The first JSON object in the text that is smartctl's document; else None."""
    return next((o for o in json_objects(text) if "smartctl" in o or "json_format_version" in o), None)


def _common(doc: Mapping[str, Any], labels: Mapping[str, str | int]) -> list[Metric]:
    out = []
    passed = _dict(doc.get("smart_status")).get("passed")
    if isinstance(passed, bool):
        out.append(Metric("disk.smart_passed", 1.0 if passed else 0.0, COUNT, labels))
    temp = number(_dict(doc.get("temperature")).get("current"))
    if temp is not None:
        out.append(Metric("disk.temperature", temp, CELSIUS, labels))
    hours = number(_dict(doc.get("power_on_time")).get("hours"))
    if hours is not None and "nvme_smart_health_information_log" not in doc:
        out.append(Metric("disk.power_on_hours", hours, COUNT, labels))
    return out


def _ata(table: list[Any], labels: Mapping[str, str | int]) -> list[Metric]:
    out = []
    for row in table:
        if not isinstance(row, dict) or not isinstance(row.get("id"), int) or row["id"] not in ATA_COUNTS:
            continue
        raw = number(_dict(row.get("raw")).get("value"))
        if raw is not None:
            out.append(Metric(ATA_COUNTS[row["id"]], raw, COUNT, labels))
    return out


def _sata_link(speed: Any, labels: Mapping[str, str | int]) -> Optional[Metric]:
    """disk.link_downgraded: 1 when the SATA link runs below the rate both ends support."""
    if not isinstance(speed, dict):
        return None
    rates = []
    for which in ("max", "current"):
        block = speed.get(which)
        if not isinstance(block, dict):
            return None
        ups, bpu = number(block.get("units_per_second")), number(block.get("bits_per_unit"))
        if ups is None or bpu is None:
            return None
        rates.append(ups * bpu)
    return Metric("disk.link_downgraded", 1.0 if rates[1] < rates[0] else 0.0, COUNT, labels)
