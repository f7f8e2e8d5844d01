"""Count NVIDIA XID events in kernel log text (dmesg, `dmesg --ctime`, journalctl -k). Pure.

A line such as `NVRM: Xid (PCI:0000:9b:00): 119, pid=..., <message>` is one event. Any
prefix (a boot-time or ctime stamp, a journal "host kernel:" prefix) is allowed. NVSwitch
`SXid` lines are not GPU XIDs and are not counted. `NVRM: GPU at PCI:...: GPU-<uuid>` lines
name the GPU behind a PCI address; they are kept in details so a check can map events to
GPUs. Every text is valid: a log without XID lines means no XID was logged. On a MIG GPU the driver
names the instance inside the parenthesis (`Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:01): 94, ...`): the
event counts for the physical GPU and keeps the instance. Xid 154 says which recovery the driver asks
for ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"): the last one per GPU
is `gpu.recovery_action{pci}` (0 = none).

The gravest driver messages carry no XID number; each is counted as `gpu.driver_fault{pci, fault}`:
`fallen_off_bus` ("The NVIDIA GPU <pci> ... has fallen off the bus", which the driver wraps over
several lines, each with its own "NVRM:"), `init_failed` ("GPU <pci>: RmInitAdapter failed!"),
`unavailable` ("GPU <pci>: ... currently unavailable") and `probe_failed` ("The NVIDIA probe
routine failed for N device(s)", which names no GPU: pci "unknown", counted N times).
"""

from __future__ import annotations

import re
from collections import Counter

from harness.model import Metric
from harness.parsers.base import ParseResult
from harness.units import COUNT

KIND = "xid"
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?"
                  r"(?:\s+GPU-I:(\d{1,9}))?(?:\s+GPU-CI:(\d{1,9}))?\):\s*(\d{1,9})(?!\d)\s*,?\s*(.*)$")
# Xid 154: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)" (or "changed to ...")
_RECOVERY = re.compile(r"GPU recovery action changed (?:from 0x[0-9A-Fa-f]+ \([^)]*\) )?to "
                       r"(0x[0-9A-Fa-f]{1,16})\s*\(([^)]*)\)")
RECOVERY_XID = 154
_GPU_AT = re.compile(r"NVRM: GPU at PCI:([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}):"
                     r"\s*(GPU-[0-9a-fA-F-]+)")
_STAMP = re.compile(r"^\s*\[([^\]]+)\]")
_BUS = r"((?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?"
_NVRM = re.compile(r"NVRM:\s?(.*)$")
FAULTS = (  # (fault, pattern matched at the start of one NVRM message, joined over up to 3 lines)
    ("fallen_off_bus", re.compile(r"The NVIDIA GPU (?:at PCI:)?" + _BUS
                                  + r"\b.{0,80}?installed in this system has\s+fallen off the bus")),
    ("fallen_off_bus", re.compile(r"GPU (?:at PCI:)?" + _BUS + r": GPU has fallen off the bus")),
    ("init_failed", re.compile(r"GPU (?:at PCI:)?" + _BUS + r": RmInitAdapter failed")),
    ("unavailable", re.compile(r"GPU (?:at PCI:)?" + _BUS + r":.{0,80}?currently unavailable")),
    ("probe_failed", re.compile(r"The NVIDIA probe routine failed for (\d{1,9}) device")),
)
UNKNOWN_PCI = "unknown"
MAX_EVENTS = 200


def normalize_pci(bus_id: str) -> str:
    """'00000000:9B:00.0' or '0000:9b:00' as '0000:9b:00' (domain, bus, device; lower case)."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) < 3:
        return bus_id.strip().lower()
    return f"{parts[-3][-4:]}:{parts[-2]}:{parts[-1].split('.')[0]}"


def parse(text: str) -> ParseResult:
    """gpu.xid{pci,xid}: how many times each XID code was logged for each GPU."""
    counts: Counter[tuple[str, int]] = Counter()
    events: list[dict[str, object]] = []
    uuids: dict[str, str] = {}
    recovery: dict[str, tuple[int, str]] = {}  # pci -> the last recovery action the driver asked for
    for line in text.splitlines():
        at = _GPU_AT.search(line)
        if at:
            uuids[normalize_pci(at.group(1))] = at.group(2)
            continue
        m = _XID.search(line)
        if m is None:
            continue
        pci, code, message = normalize_pci(m.group(1)), int(m.group(4)), m.group(5).strip()
        counts[(pci, code)] += 1
        action = _RECOVERY.search(message) if code == RECOVERY_XID else None
        if action:
            recovery[pci] = (int(action.group(1), 16), action.group(2).strip())
        if len(events) < MAX_EVENTS:
            stamp = _STAMP.match(line)
            event: dict[str, object] = {"pci": pci, "xid": code, "when": stamp.group(1) if stamp else None,
                                        "message": message[:300]}
            if m.group(2) is not None:  # attributed to a MIG instance
                event["gpu_instance"] = int(m.group(2))
                if m.group(3) is not None:
                    event["compute_instance"] = int(m.group(3))
            if action:
                event["recovery_action"] = action.group(2).strip()
            events.append(event)
    faults = driver_faults(text)
    metrics = tuple(Metric("gpu.xid", float(n), COUNT, {"pci": pci, "xid": code})
                    for (pci, code), n in sorted(counts.items()))
    metrics += tuple(Metric("gpu.driver_fault", float(n), COUNT, {"pci": pci, "fault": fault})
                     for (pci, fault), n in sorted(faults.items()))
    metrics += tuple(Metric("gpu.recovery_action", float(code), COUNT, {"pci": pci})
                     for pci, (code, _) in sorted(recovery.items()))
    return ParseResult(KIND, True, (), metrics,
                       {"events": events, "total": sum(counts.values()), "uuids": uuids,
                        "recovery_actions": {pci: what for pci, (_, what) in sorted(recovery.items())},
                        "driver_faults": [{"pci": p, "fault": f, "count": n}
                                          for (p, f), n in sorted(faults.items())]})


def driver_faults(text: str) -> Counter[tuple[str, str]]:
    """(pci, fault) -> count of the un-numbered driver messages (see the module docstring)."""
    frags = [m.group(1).strip() for m in map(_NVRM.search, text.splitlines()) if m]
    out: Counter[tuple[str, str]] = Counter()
    for i in range(len(frags)):
        joined = " ".join(frags[i:i + 3])
        for fault, pattern in FAULTS:
            m = pattern.match(joined)
            if m is None:
                continue
            if fault == "probe_failed":
                out[(UNKNOWN_PCI, fault)] += min(int(m.group(1)), 64)
            else:
                out[(normalize_pci(m.group(1)), fault)] += 1
            break
    return out
