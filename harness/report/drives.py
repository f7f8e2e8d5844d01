"""The report's per-drive table: one row per NVMe drive (or other fio target device).

Identity, PCIe link, wear, spare and error counters come from checks with a `controllers` section
(nvme_health writes it; label `device` = controller, e.g. nvme0); GB/s and IOPS from fio.bw and
fio.iops labelled by device (fio run on several devices at once; label `device` = namespace, e.g.
nvme0n1, mapped to its controller). Each row carries the worst
outcome of the evaluations about that drive (profile rules and the sibling rule), so the slow
or worn drive is marked, with the evaluations' messages. Pure: a RunRecord in, rows out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness import siblings
from harness.model import CheckResult, Evaluation, Metric, Outcome, RunRecord

_NAMESPACE = re.compile(r"^(nvme\d+)(?:c\d+)?n\d+$")
_RANK = {Outcome.FAIL: 5, Outcome.ERROR: 4, Outcome.WARN: 3, Outcome.XFAIL: 2, Outcome.XPASS: 1,
         Outcome.PASS: 0}


@dataclass(frozen=True)
class DriveRow:
    """One drive as the table shows it: text cells, its worst outcome and why."""

    drive: str
    model: str
    serial: str
    firmware: str
    link: str
    wear: str
    spare: str
    errors: str
    perf: tuple[str, ...]  # one cell per column of DriveTable.perf_columns
    outcome: str  # worst evaluation outcome about the drive, "" when none judged it
    notes: tuple[str, ...]


@dataclass(frozen=True)
class DriveTable:
    perf_columns: tuple[str, ...]  # "check: job rw"
    rows: tuple[DriveRow, ...]


def controller_of(device: str) -> str:
    """nvme0n1 -> nvme0 (and nvme0c0n1 -> nvme0); anything else is its own drive."""
    m = _NAMESPACE.match(device)
    return m.group(1) if m else device


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _link(c: Mapping[str, Any]) -> str:
    link = c.get("link") or {}
    gen, width = link.get("gen"), link.get("width")
    if gen is None and width is None:
        return "—"
    now = f"Gen{gen or '?'} x{width or '?'}"
    if link.get("downgraded"):
        return f"{now} (below max Gen{link.get('max_gen') or '?'} x{link.get('max_width') or '?'})"
    return now


def _health(metrics: Sequence[Metric], ctrl: str) -> tuple[str, str, str]:
    def val(name: str) -> float | None:
        return next((m.value for m in metrics if m.name == name and m.labels.get("device") == ctrl
                     and "which" not in m.labels), None)

    used, spare, thr = val("nvme.percentage_used"), val("nvme.available_spare"), \
        val("nvme.available_spare_threshold")
    wear = "—" if used is None else f"{used:.0f} % used"
    spare_text = "—" if spare is None else f"{spare:.0f} %"
    if spare is not None and thr is not None:
        spare_text += f" (warns at {thr:.0f} %)"
    counts = [(label, val(name)) for label, name in (("warning", "nvme.critical_warning"),
                                                     ("media", "nvme.media_errors"),
                                                     ("log", "nvme.num_err_log_entries"))]
    errors = " · ".join(f"{label} {v:.0f}" for label, v in counts if v is not None) or "—"
    return wear, spare_text, errors


_PERF = ("fio.bw", "fio.iops")  # the metric family the table shows per drive


def _multi_fio(checks: Iterable[CheckResult]) -> list[CheckResult]:
    """The checks that measured drives one by one: fio bandwidth or IOPS labelled by device."""
    return [c for c in checks if any(m.name in _PERF and "device" in m.labels for m in c.metrics)]


def _worst(evs: Sequence[Evaluation]) -> str:
    if not evs:
        return ""
    return max(evs, key=lambda e: _RANK.get(e.outcome, 0)).outcome.value


def drive_table(record: RunRecord) -> DriveTable | None:
    """The per-drive table of a run, or None when no check measured drives one by one."""
    health = [c for c in record.checks if "controllers" in c.details]  # the nvme_health section
    fios = _multi_fio(record.checks)
    controllers: dict[str, Mapping[str, Any]] = {}
    owner: dict[str, CheckResult] = {}  # controller -> the nvme_health check that read it
    for c in health:
        for ctrl in c.details.get("controllers") or []:
            if isinstance(ctrl, Mapping) and ctrl.get("name"):
                controllers.setdefault(str(ctrl["name"]), ctrl)
                owner.setdefault(str(ctrl["name"]), c)
    columns: list[tuple[str, str, str, str]] = []  # (check id, job, rw, heading)
    perf: dict[tuple[str, str, str, str], dict[str, str]] = {}  # column -> drive -> cell
    fio_devices: dict[str, set[str]] = {}  # drive -> namespaces measured
    for c in fios:
        for m in c.metrics:
            dev = m.labels.get("device")
            if dev is None or m.name not in _PERF:
                continue
            col = (c.id, str(m.labels.get("job", "")), str(m.labels.get("rw", "")),
                   f"{c.id}: {m.labels.get('job', '')} {m.labels.get('rw', '')}")
            if col not in perf:
                columns.append(col)
                perf[col] = {}
            drive = controller_of(str(dev))
            fio_devices.setdefault(drive, set()).add(str(dev))
            text = f"{_num(m.value)} GB/s" if m.name == "fio.bw" else f"{_num(m.value)} IOPS"
            cell = perf[col].get(drive)
            perf[col][drive] = text if cell is None else (f"{text} · {cell}" if m.name == "fio.bw"
                                                          else f"{cell} · {text}")
    drives = list(controllers) + [d for d in fio_devices if d not in controllers]
    if not drives:
        return None
    rows = []
    for drive in drives:
        ctrl = controllers.get(drive, {})
        names = sorted(fio_devices.get(drive, ()))
        label = drive + (f" ({', '.join(n for n in names if n != drive)})" if any(n != drive for n in names)
                         else "")
        wear, spare, errors = _health(owner[drive].metrics, drive) if drive in owner else ("—", "—", "—")
        evs: list[Evaluation] = []
        for c in health:
            evs += [e for e in c.evaluations if str(e.labels.get("device", "")) == drive]
        # the sibling rule gives an evaluation to outliers only: the others passed it
        within = any(e.source == siblings.SOURCE for c in fios for e in c.evaluations
                     if any(str(m.labels.get("device")) in names for m in c.metrics))
        for c in fios:
            evs += [e for e in c.evaluations if str(e.labels.get("device", "")) in names]
        bad = [e for e in evs if e.outcome not in (Outcome.PASS, Outcome.XPASS)]
        rows.append(DriveRow(
            label, str(ctrl.get("model") or "—"), str(ctrl.get("serial") or "—"),
            str(ctrl.get("firmware") or "—"), _link(ctrl) if ctrl else "—", wear, spare, errors,
            tuple(perf[col].get(drive, "—") for col in columns), _worst(evs) or ("pass" if within else ""),
            tuple(dict.fromkeys(f"{e.metric}: {e.message}" for e in bad))))
    return DriveTable(tuple(col[3] for col in columns), tuple(rows))
