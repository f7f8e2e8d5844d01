"""Parse `nvidia-smi -q` (text, drivers ~495-570) and `nvidia-smi -q -x` (XML) into GPU health metrics,
and the XML into the modes and versions the config audit judges (`parse_smi_xml`).

Pure: text in, ParseResult out. Per GPU (label `gpu`: the position in the output, which is
nvidia-smi's index order): PCIe generation and width (`which` current/max), replays,
temperatures, power draw and limit, SM clock, ECC mode and counters (`scope`
volatile/aggregate), retired pages, row remapping, persistence mode and the clock-event
reasons (`gpu.clocks_event`, 1 active / 0 not, label `reason`). A field printed as N/A is
omitted, never zero-filled. A GPU at idle may downshift its link, so `which=current` below
`which=max` here is a hint, not a verdict: judge the link under load (telemetry during a burn).
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.model import Metric
from harness.parsers import clockreasons
from harness.parsers.base import ParseResult, invalid
from harness.units import CELSIUS, COUNT, MHZ, WATT

KIND = "nvidia-smi-q"
_GPU_HEAD = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_NUM = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")

Info = dict[str, Any]  # one GPU's fields, the same keys from text and XML


def _num(v: str | None) -> float | None:
    if v is None:
        return None
    m = _NUM.match(v)
    n = float(m.group(1)) if m else None
    return n if n is not None and math.isfinite(n) else None  # 400 digits read as inf: not a reading


def _flag(v: str | None, yes: tuple[str, ...] = ("enabled", "yes", "active")) -> bool | None:
    if v is None:
        return None
    t = v.strip().lower()
    if t in yes:
        return True
    if t in ("disabled", "no", "not active"):
        return False
    return None


def parse(text: str) -> ParseResult:
    """Health metrics per GPU from nvidia-smi -q text or -q -x XML."""
    if text.lstrip().startswith("<?xml") or "<nvidia_smi_log" in text:
        return _parse_xml(text)
    if "NVSMI LOG" in text or re.search(r"^GPU [0-9A-Fa-f]{4,8}:", text, re.MULTILINE):
        return _parse_text(text)
    return invalid(KIND, "not nvidia-smi -q output (no 'NVSMI LOG' header, no GPU block)")


# ---------------------------------------------------------------- text

def _text_tree(lines: list[str]) -> dict[tuple[str, ...], str]:
    """Indented 'Key : value' lines as {path: value}; sections are keys without a value."""
    out: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, sep, value = line.strip().partition(":")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = (*[n for _, n in stack], key.strip())
        if sep and value.strip():
            out.setdefault(path, value.strip())
        else:
            stack.append((indent, key.strip()))
    return out


def _parse_text(text: str) -> ParseResult:
    lines = text.replace("\r\n", "\n").split("\n")
    header: dict[str, str] = {}
    blocks: list[tuple[str, list[str]]] = []
    for line in lines:
        head = _GPU_HEAD.match(line)
        if head:
            blocks.append((head.group(1), []))
        elif blocks and (line.startswith(" ") or not line.strip()):
            blocks[-1][1].append(line)
        elif ":" in line and not blocks:
            k, _, v = line.partition(":")
            header[k.strip()] = v.strip()
    infos = [_text_info(bus, _text_tree(body)) for bus, body in blocks]
    return _finish(infos, header.get("Attached GPUs"), header.get("Driver Version"),
                   header.get("CUDA Version"), "text")


def _first(tree: Mapping[tuple[str, ...], str], *paths: tuple[str, ...]) -> str | None:
    for p in paths:
        v = tree.get(p)
        if v is not None and v not in ("N/A", "[N/A]") and "Not Supported" not in v:
            return v
    return None


def _text_info(bus: str, t: Mapping[tuple[str, ...], str]) -> Info:
    link = ("PCI", "GPU Link Info")
    power = next((s for s in ("GPU Power Readings", "Power Readings") if any(p[0] == s for p in t)),
                 "GPU Power Readings")
    info: Info = {
        "pci": bus, "name": _first(t, ("Product Name",)),
        "persistence": _flag(_first(t, ("Persistence Mode",))),
        "ecc_mode": _flag(_first(t, ("ECC Mode", "Current"))),
        "pcie_gen_cur": _num(_first(t, (*link, "PCIe Generation", "Current"))),
        "pcie_gen_max": _num(_first(t, (*link, "PCIe Generation", "Max"))),
        "pcie_width_cur": _num(_first(t, (*link, "Link Width", "Current"))),
        "pcie_width_max": _num(_first(t, (*link, "Link Width", "Max"))),
        "replays": _num(_first(t, ("PCI", "Replays Since Reset"))),
        "temp": _num(_first(t, ("Temperature", "GPU Current Temp"))),
        "mem_temp": _num(_first(t, ("Temperature", "Memory Current Temp"))),
        "power_draw": _num(_first(t, (power, "Power Draw"), (power, "Average Power Draw"))),
        "power_limit": _num(_first(t, (power, "Current Power Limit"), (power, "Enforced Power Limit"),
                                   (power, "Power Limit"))),
        "sm_clock": _num(_first(t, ("Clocks", "SM"))),
        "sm_clock_max": _num(_first(t, ("Max Clocks", "SM"))),
        "retired_sbe": _num(_first(t, ("Retired Pages", "Single Bit ECC"))),
        "retired_dbe": _num(_first(t, ("Retired Pages", "Double Bit ECC"))),
        "retired_pending": _flag(_first(t, ("Retired Pages", "Pending Page Blacklist"),
                                        ("Retired Pages", "Pending Page Retirement"))),
        "remap_corr": _num(_first(t, ("Remapped Rows", "Correctable Error"))),
        "remap_unc": _num(_first(t, ("Remapped Rows", "Uncorrectable Error"))),
        "remap_pending": _flag(_first(t, ("Remapped Rows", "Pending"))),
        "remap_failure": _flag(_first(t, ("Remapped Rows", "Remapping Failure Occurred"))),
    }
    for scope in ("Volatile", "Aggregate"):
        under = [(p[2:], v) for p, v in t.items() if p[:2] == ("ECC Errors", scope)]
        flat = {k[0]: v for k, v in under if len(k) == 1}
        totals = {k[0]: v for k, v in under if len(k) == 2 and k[1] == "Total"}
        info[f"ecc_{scope.lower()}_corr"], info[f"ecc_{scope.lower()}_unc"] = _ecc_sums(flat, totals)
    reasons: dict[str, bool] = {}
    for section in ("Clocks Event Reasons", "Clocks Throttle Reasons"):
        for p, v in t.items():
            if p[0] == section and p[-1] in clockreasons.TEXT_LABELS:
                flag = _flag(v)
                if flag is not None:
                    reasons[clockreasons.TEXT_LABELS[p[-1]]] = flag
    info["reasons"] = reasons
    return info


def _ecc_sums(flat: Mapping[str, str], totals: Mapping[str, str]) -> tuple[float | None, float | None]:
    """(corrected, uncorrected) from 'SRAM/DRAM (Un)correctable...' keys or 'Single/Double Bit' totals."""
    corr = unc = None
    for key, v in flat.items():
        n = _num(v)
        if n is None or "threshold" in key.lower():
            continue
        if "uncorrectable" in key.lower():
            unc = (unc or 0.0) + n
        elif "correctable" in key.lower():
            corr = (corr or 0.0) + n
    for key, v in totals.items():  # drivers before ~525: Single Bit / Double Bit blocks
        n = _num(v)
        if n is not None and key.lower().startswith("single"):
            corr = (corr or 0.0) + n
        elif n is not None and key.lower().startswith("double"):
            unc = (unc or 0.0) + n
    return corr, unc


# ---------------------------------------------------------------- XML

def _xml_root(text: str) -> ET.Element:
    """The <nvidia_smi_log> element; ValueError when the text is not such a document."""
    start = text.find("<nvidia_smi_log")
    body = text[start:] if start >= 0 else text.strip()
    try:
        root = ET.fromstring(body)  # noqa: S314 - nvidia-smi's own output; DOCTYPE skipped above
    except ET.ParseError as e:
        raise ValueError(f"not XML: {e}") from e
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"root element is <{root.tag}>, not <nvidia_smi_log>")
    return root


def _parse_xml(text: str) -> ParseResult:
    try:
        root = _xml_root(text)
    except ValueError as e:
        return invalid(KIND, f"nvidia-smi XML does not parse: {e}")
    infos = [_xml_info(g) for g in root.findall("gpu")]
    return _finish(infos, root.findtext("attached_gpus"), root.findtext("driver_version"),
                   root.findtext("cuda_version"), "xml")


def _xml_info(g: ET.Element) -> Info:
    def get(*paths: str) -> str | None:
        for p in paths:
            v = g.findtext(p)
            if v is not None and v.strip() and v.strip() != "N/A" and "Not Supported" not in v:
                return v.strip()
        return None

    link = "pci/pci_gpu_link_info"
    pw = ("gpu_power_readings", "power_readings")
    info: Info = {
        "pci": g.get("id"), "name": get("product_name"),
        "persistence": _flag(get("persistence_mode")), "ecc_mode": _flag(get("ecc_mode/current_ecc")),
        "pcie_gen_cur": _num(get(f"{link}/pcie_gen/current_link_gen")),
        "pcie_gen_max": _num(get(f"{link}/pcie_gen/max_link_gen")),
        "pcie_width_cur": _num(get(f"{link}/link_widths/current_link_width")),
        "pcie_width_max": _num(get(f"{link}/link_widths/max_link_width")),
        "replays": _num(get("pci/replay_counter")),
        "temp": _num(get("temperature/gpu_temp")), "mem_temp": _num(get("temperature/memory_temp")),
        "power_draw": _num(get(*(f"{s}/power_draw" for s in pw), *(f"{s}/average_power_draw" for s in pw))),
        "power_limit": _num(get(*(f"{s}/{k}" for k in ("current_power_limit", "enforced_power_limit",
                                                      "power_limit") for s in pw))),
        "sm_clock": _num(get("clocks/sm_clock")), "sm_clock_max": _num(get("max_clocks/sm_clock")),
        "retired_sbe": _num(get("retired_pages/multiple_single_bit_retirement/retired_count")),
        "retired_dbe": _num(get("retired_pages/double_bit_retirement/retired_count")),
        "retired_pending": _flag(get("retired_pages/pending_blacklist", "retired_pages/pending_retirement")),
        "remap_corr": _num(get("remapped_rows/remapped_row_corr")),
        "remap_unc": _num(get("remapped_rows/remapped_row_unc")),
        "remap_pending": _flag(get("remapped_rows/remapped_row_pending")),
        "remap_failure": _flag(get("remapped_rows/remapped_row_failure")),
    }
    for scope in ("volatile", "aggregate"):
        el = g.find(f"ecc_errors/{scope}")
        flat = {c.tag.replace("_", " "): (c.text or "") for c in el if len(c) == 0} if el is not None else {}
        totals = {c.tag: (c.findtext("total") or "") for c in el if len(c)} if el is not None else {}
        info[f"ecc_{scope}_corr"], info[f"ecc_{scope}_unc"] = _ecc_sums(flat, totals)
    reasons: dict[str, bool] = {}
    for section in ("clocks_event_reasons", "clocks_throttle_reasons"):
        for c in g.findall(f"{section}/*"):
            suffix = re.sub(r"^clocks_(?:event|throttle)_reason_", "", c.tag)
            flag = _flag(c.text)
            if suffix in clockreasons.TAG_SUFFIXES and flag is not None:
                reasons[clockreasons.TAG_SUFFIXES[suffix]] = flag
    info["reasons"] = reasons
    return info


# ---------------------------------------------------------------- metrics

_SIMPLE: tuple[tuple[str, str, str, dict[str, str]], ...] = (
    ("pcie_gen_cur", "gpu.pcie_gen", COUNT, {"which": "current"}),
    ("pcie_gen_max", "gpu.pcie_gen", COUNT, {"which": "max"}),
    ("pcie_width_cur", "gpu.pcie_width", COUNT, {"which": "current"}),
    ("pcie_width_max", "gpu.pcie_width", COUNT, {"which": "max"}),
    ("replays", "gpu.pcie_replays", COUNT, {}),
    ("temp", "gpu.temp", CELSIUS, {}),
    ("mem_temp", "gpu.mem_temp", CELSIUS, {}),
    ("power_draw", "gpu.power", WATT, {}),
    ("power_limit", "gpu.power_limit", WATT, {}),
    ("sm_clock", "gpu.sm_clock", MHZ, {"which": "current"}),
    ("sm_clock_max", "gpu.sm_clock", MHZ, {"which": "max"}),
    ("ecc_volatile_corr", "gpu.ecc_corrected", COUNT, {"scope": "volatile"}),
    ("ecc_volatile_unc", "gpu.ecc_uncorrected", COUNT, {"scope": "volatile"}),
    ("ecc_aggregate_corr", "gpu.ecc_corrected", COUNT, {"scope": "aggregate"}),
    ("ecc_aggregate_unc", "gpu.ecc_uncorrected", COUNT, {"scope": "aggregate"}),
    ("retired_sbe", "gpu.retired_pages", COUNT, {"cause": "sbe"}),
    ("retired_dbe", "gpu.retired_pages", COUNT, {"cause": "dbe"}),
    ("remap_corr", "gpu.remapped_rows", COUNT, {"kind": "correctable"}),
    ("remap_unc", "gpu.remapped_rows", COUNT, {"kind": "uncorrectable"}),
)
_FLAGS = (("persistence", "gpu.persistence_mode"), ("ecc_mode", "gpu.ecc_mode"),
          ("retired_pending", "gpu.retired_pending"), ("remap_pending", "gpu.remap_pending"),
          ("remap_failure", "gpu.remap_failure"))


def info_metrics(info: Info, gpu: int) -> list[Metric]:
    """The metrics of one GPU's fields (shared by the text and XML paths)."""
    out: list[Metric] = []
    for key, name, unit, extra in _SIMPLE:
        if info.get(key) is not None:
            out.append(Metric(name, float(info[key]), unit, {"gpu": gpu, **extra}))
    for key, name in _FLAGS:
        if info.get(key) is not None:
            out.append(Metric(name, 1.0 if info[key] else 0.0, COUNT, {"gpu": gpu}))
    for reason, on in info.get("reasons", {}).items():
        out.append(Metric("gpu.clocks_event", 1.0 if on else 0.0, COUNT, {"gpu": gpu, "reason": reason}))
    return out


def _finish(infos: list[Info], attached: str | None, driver: str | None, cuda: str | None,
            fmt: str) -> ParseResult:
    if not infos:
        return invalid(KIND, "no GPU in the nvidia-smi output")
    problems = []
    n = _num(attached)
    if n is not None and math.isfinite(n) and int(n) != len(infos):
        problems.append(f"nvidia-smi says {int(n)} GPUs attached but lists {len(infos)}")
    metrics = [m for i, info in enumerate(infos) for m in info_metrics(info, i)]
    details = {"format": fmt, "driver": driver, "cuda": cuda,
               "gpus": [{"gpu": i, "pci": x.get("pci"), "name": x.get("name"), "link": link_text(x),
                         "mask": clockreasons.encode(x.get("reasons", {}))} for i, x in enumerate(infos)]}
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)


def link_text(info: Mapping[str, Any]) -> str | None:
    """'Gen4 x8 of Gen5 x16' style text, or None when nothing is known."""
    g, gm, w, wm = (info.get(k) for k in ("pcie_gen_cur", "pcie_gen_max", "pcie_width_cur", "pcie_width_max"))
    if g is None and w is None:
        return None

    def part(gen: float | None, width: float | None) -> str:
        return " ".join(s for s in (f"Gen{gen:g}" if gen is not None else "",
                                    f"x{width:g}" if width is not None else "") if s)

    return f"{part(g, w)} of {part(gm, wm)}"


# ---------------------------------------------------------------- audit view (XML)

@dataclass(frozen=True)
class SmiGpu:
    """One <gpu> element, in the order nvidia-smi lists them (its index order)."""

    index: int
    pci_bus_id: str
    name: str
    persistence_mode: bool | None
    mig_mode: str | None  # enabled | disabled | n/a
    ecc_mode: str | None
    vbios_version: str | None
    fabric_state: str | None  # None when the driver does not report it


@dataclass(frozen=True)
class SmiLog:
    """The parts of an nvidia_smi_log the config audit uses."""

    driver_version: str | None
    cuda_version: str | None
    attached_gpus: int | None
    gpus: tuple[SmiGpu, ...]


def parse_smi_xml(text: str) -> SmiLog:
    """Versions and per-GPU modes from `nvidia-smi -q -x`; ValueError when it is not that."""
    root = _xml_root(text)

    def get(el: ET.Element, path: str) -> str | None:
        v = el.findtext(path)
        return v.strip() or None if v is not None else None

    def mode(el: ET.Element, path: str) -> str | None:
        v = get(el, path)
        return v.lower() if v is not None else None

    gpus = []
    for i, g in enumerate(root.findall("gpu")):
        pm = get(g, "persistence_mode")
        gpus.append(SmiGpu(
            index=i, pci_bus_id=g.get("id") or get(g, "pci/pci_bus_id") or "",
            name=get(g, "product_name") or "",
            persistence_mode=None if pm is None or pm == "N/A" else pm == "Enabled",
            mig_mode=mode(g, "mig_mode/current_mig"), ecc_mode=mode(g, "ecc_mode/current_ecc"),
            vbios_version=get(g, "vbios_version"), fabric_state=mode(g, "fabric/state"),
        ))
    attached = get(root, "attached_gpus")
    return SmiLog(get(root, "driver_version"), get(root, "cuda_version"),
                  int(attached) if attached and attached.isdecimal() else None, tuple(gpus))
