"""Check kind `gpu_health`: the quick GPU health gate that runs first in a suite.

The GPUs against the profile's hardware.gpu: count, model and memory (checks/gpu_identity).
From NVML (platform/nvml, the only NVML edge): persistence and ECC modes, volatile and
aggregate ECC counters, retired pages (DCGM-like limits: 15 warns, 60 fails, pending fails),
row remapping (failure or pending fails), NVLink links up and the NVLink fabric (checks/gpu_links),
and the PCIe link. From the kernel
log (dmesg or journalctl -k): XID events, of which a configurable critical set fails (default
like DCGM/AzNHC). An idle GPU may lower its PCIe generation on purpose, so here only a link
*width* below its maximum fails; the generation is judged under load by the telemetry that
runs alongside the burn (harness.series.telemetry).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from harness import catalog
from harness.checks import gpu_identity, gpu_links, needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, Params, PlannedCommand
from harness.config.numbers import Hours
from harness.errors import ToolError
from harness.model import Finding, Metric, Outcome
from harness.parsers import xid as xid_parser
from harness.platform import nvml
from harness.units import COUNT

SOURCE = "gpu_health"
DEFAULT_CRITICAL_XIDS = (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)
METRICS = ("gpu.persistence_mode", "gpu.ecc_mode", "gpu.ecc_corrected", "gpu.ecc_uncorrected",
           "gpu.retired_pages", "gpu.retired_pending", "gpu.remapped_rows", "gpu.remap_pending",
           "gpu.remap_failure", "gpu.pcie_gen", "gpu.pcie_width", "gpu.nvlink_down", "gpu.nvlink_up",
           "gpu.fabric_healthy", "gpu.xid",
           "gpu.xid_critical", "gpu.driver_fault", "gpu.recovery_action", "gpu.memory")


class GpuHealthParams(Params):
    """What to read besides NVML, and the limits that are policy rather than physics."""

    xid_source: Literal["dmesg", "journal", "none"] = Field(
        "dmesg", description="where XIDs are read: dmesg (since boot), journal (journalctl -k), none")
    xid_window_h: Hours = Field(24.0, gt=0, le=24 * 365, description="hours of journal to read (journal)")
    xid_critical: list[int] = Field(default_factory=lambda: list(DEFAULT_CRITICAL_XIDS),
                                    description="XID codes that fail the check; unset, the profile's "
                                    "hardware.gpu.xid_critical, else the DCGM/AzNHC set")
    require_persistence: bool = True
    require_ecc: bool = True
    retired_pages_warn: int = Field(15, ge=0, description="retired pages from which the check warns")
    retired_pages_fail: int = Field(60, ge=0, description="retired pages from which the check fails")


@dataclass(frozen=True)
class _Issue:
    gpu: int
    measured: float
    message: str
    outcome: Outcome = Outcome.FAIL
    low: float | None = None  # the bound it missed, when not the metric's plain one (PCIe width)


def xid_argv(params: GpuHealthParams) -> list[str] | None:
    if params.xid_source == "dmesg":
        return ["dmesg"]
    if params.xid_source == "journal":
        return ["journalctl", "-k", "--no-pager", "-o", "short-iso", f"--since=-{params.xid_window_h:g}h"]
    return None


def profile_defaults(params: GpuHealthParams, hardware: Mapping[str, Any]) -> GpuHealthParams:
    """The profile's hardware.gpu.xid_critical, unless the suite set xid_critical itself."""
    policy = (hardware.get("gpu") or {}).get("xid_critical")
    if policy is None or "xid_critical" in params.model_fields_set:
        return params
    return params.model_copy(update={"xid_critical": list(policy)})


def verdicts(params: GpuHealthParams, hardware: Mapping[str, Any]) -> list[str]:
    """The built-in verdicts as --dry-run lines (findings() and gpu_identity.findings() state them)."""
    modes = [w for on, w in ((params.require_persistence, "persistence mode"), (params.require_ecc, "ECC"))
             if on]
    out = [*gpu_identity.describe(hardware.get("gpu") or {})]
    if modes:
        out.append(f"{' or '.join(m + ' off' for m in modes)} fails")
    out += ["uncorrectable ECC errors (volatile or aggregate) fail",
            f"retired pages warn from {params.retired_pages_warn}, fail from {params.retired_pages_fail}; "
            "a pending retirement, a failed or pending row remap fail",
            "fewer NVLink links up than hardware.gpu.nvlinks (unset: than the best sibling), an NVLink "
            "fabric whose status or health mask is bad once registered, or a PCIe link narrower than its "
            "maximum, fails"]
    if xid_argv(params):
        out.append(f"XIDs {', '.join(map(str, params.xid_critical))} in the kernel log fail their GPU")
    return out


def plan(params: GpuHealthParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    argv = xid_argv(params)
    reads = "NVML reads of modes, ECC, retired pages, row remap, PCIe, NVLink"
    if argv:
        return [PlannedCommand(tuple(argv), f"XID events in the kernel log; plus {reads}")]
    return [PlannedCommand(("NVML",), reads)]


def health_metrics(h: nvml.GpuHealth) -> list[Metric]:
    """The metrics of one GPU's health facts (pure); unknown facts are omitted."""
    lab: dict[str, str | int] = {"gpu": h.gpu}
    rows: list[tuple[str, Any, dict[str, str]]] = [
        ("gpu.persistence_mode", h.persistence, {}), ("gpu.ecc_mode", h.ecc_mode, {}),
        ("gpu.ecc_corrected", h.ecc_volatile_corrected, {"scope": "volatile"}),
        ("gpu.ecc_uncorrected", h.ecc_volatile_uncorrected, {"scope": "volatile"}),
        ("gpu.ecc_corrected", h.ecc_aggregate_corrected, {"scope": "aggregate"}),
        ("gpu.ecc_uncorrected", h.ecc_aggregate_uncorrected, {"scope": "aggregate"}),
        ("gpu.retired_pages", h.retired_sbe, {"cause": "sbe"}),
        ("gpu.retired_pages", h.retired_dbe, {"cause": "dbe"}),
        ("gpu.retired_pending", h.retired_pending, {}),
        ("gpu.remapped_rows", h.remap_corrected, {"kind": "correctable"}),
        ("gpu.remapped_rows", h.remap_uncorrected, {"kind": "uncorrectable"}),
        ("gpu.remap_pending", h.remap_pending, {}), ("gpu.remap_failure", h.remap_failure, {}),
        ("gpu.pcie_gen", h.pcie_gen, {"which": "current"}),
        ("gpu.pcie_gen", h.pcie_gen_max, {"which": "max"}),
        ("gpu.pcie_width", h.pcie_width, {"which": "current"}),
        ("gpu.pcie_width", h.pcie_width_max, {"which": "max"}),
        ("gpu.nvlink_down", None if h.nvlink_total is None else h.nvlink_total - (h.nvlink_up or 0), {}),
        ("gpu.nvlink_up", h.nvlink_up, {}),
    ]
    return [Metric(name, float(v), COUNT, {**lab, **extra}) for name, v, extra in rows if v is not None]


def findings(h: nvml.GpuHealth, params: GpuHealthParams) -> dict[str, list[_Issue]]:
    """Per metric, what is wrong with one GPU (pure). Empty lists mean checked and fine."""
    g = h.gpu
    out: dict[str, list[_Issue]] = {}

    def check(metric: str, known: bool, bad: bool, measured: float, msg: str,
              outcome: Outcome = Outcome.FAIL, low: float | None = None) -> None:
        if known:
            out.setdefault(metric, [])
            if bad:
                out[metric].append(_Issue(g, measured, f"GPU {g}: {msg}", outcome, low))

    if params.require_persistence:
        check("gpu.persistence_mode", h.persistence is not None, h.persistence is False, 0,
              "persistence mode is off (nvidia-smi -pm 1)")
    if params.require_ecc:
        check("gpu.ecc_mode", h.ecc_mode is not None, h.ecc_mode is False, 0, "ECC is off")
    for scope, n in (("volatile", h.ecc_volatile_uncorrected), ("aggregate", h.ecc_aggregate_uncorrected)):
        check("gpu.ecc_uncorrected", n is not None, bool(n), float(n or 0),
              f"{n} uncorrectable ECC errors ({scope})")
    retired = None
    if h.retired_sbe is not None or h.retired_dbe is not None:
        retired = (h.retired_sbe or 0) + (h.retired_dbe or 0)
    if retired is not None:
        over_fail = retired >= params.retired_pages_fail
        check("gpu.retired_pages", True, over_fail or retired >= params.retired_pages_warn, float(retired),
              f"{retired} retired pages (warn from {params.retired_pages_warn}, fail from "
              f"{params.retired_pages_fail})", Outcome.FAIL if over_fail else Outcome.WARN)
    check("gpu.retired_pending", h.retired_pending is not None, bool(h.retired_pending), 1,
          "a page retirement is pending: reset the GPU")
    check("gpu.remap_failure", h.remap_failure is not None, bool(h.remap_failure), 1,
          "a memory row remap failed: the GPU needs service")
    check("gpu.remap_pending", h.remap_pending is not None, bool(h.remap_pending), 1,
          "a row remap is pending: reset the GPU")
    w, wm = h.pcie_width, h.pcie_width_max
    check("gpu.pcie_width", w is not None and wm is not None, (w or 0) < (wm or 0), float(w or 0),
          f"PCIe link trained down: x{w} of x{wm} (Gen{h.pcie_gen} of Gen{h.pcie_gen_max} at idle)",
          low=float(wm or 0))
    return out


def xid_metrics(parsed_metrics: Sequence[Metric], inventory_gpus: Sequence[Mapping[str, Any]],
                critical: Sequence[int]) -> tuple[list[Metric], dict[int, int]]:
    """gpu.xid per GPU (by PCI address; `pci` label when no GPU matches) and critical counts per GPU."""
    by_pci = {xid_parser.normalize_pci(str(g.get("pci_bus_id", ""))): i for i, g in enumerate(inventory_gpus)}
    out: list[Metric] = []
    crit = {i: 0 for i in range(len(inventory_gpus))}
    for m in parsed_metrics:
        if m.name != "gpu.xid":
            continue
        pci, code = str(m.labels.get("pci")), int(m.labels.get("xid", -1))
        gpu = by_pci.get(pci)
        out.append(Metric("gpu.xid", m.value, COUNT, {"xid": code, **({"gpu": gpu} if gpu is not None
                                                                         else {"pci": pci})}))
        if gpu is not None and code in critical:
            crit[gpu] += int(m.value)
    return out, crit


def driver_fault_findings(parsed_metrics: Sequence[Metric], inventory_gpus: Sequence[Mapping[str, Any]],
                          ) -> tuple[list[Metric], list[Finding]]:
    """gpu.driver_fault per GPU (joined by PCI address to the NVML index; label `pci` for a GPU NVML
    cannot see), each one a failure of the GPU it names."""
    by_pci = {xid_parser.normalize_pci(str(g.get("pci_bus_id", ""))): (i, g)
              for i, g in enumerate(inventory_gpus)}
    metrics: list[Metric] = []
    found: list[Finding] = []
    words = {"fallen_off_bus": "fell off the bus",
             "init_failed": "failed to initialise (RmInitAdapter failed)",
             "unavailable": "is currently unavailable", "probe_failed": "failed the driver's probe"}
    for m in parsed_metrics:
        if m.name != "gpu.driver_fault":
            continue
        pci, fault = str(m.labels.get("pci")), str(m.labels.get("fault"))
        hit = by_pci.get(pci)
        lab: dict[str, str | int] = {"fault": fault, **({"gpu": hit[0]} if hit else {"pci": pci})}
        who = (f"GPU {hit[0]} ({pci}, {hit[1].get('uuid') or 'no UUID'})" if hit
               else "a GPU the driver could not name" if pci == xid_parser.UNKNOWN_PCI
               else f"the GPU at PCI {pci} (not visible to NVML)")
        metrics.append(Metric("gpu.driver_fault", m.value, COUNT, lab))
        found.append(Finding(metric="gpu.driver_fault", labels=lab, outcome=Outcome.FAIL, measured=m.value,
                             unit=COUNT, high=0.0, source=SOURCE,
                             message=f"{who} {words.get(fault, fault)}: {m.value:.0f} kernel-log "
                                     "message(s) without an XID number"))
    return metrics, found


def recovery_findings(parsed_metrics: Sequence[Metric], actions: Mapping[str, str],
                      inventory_gpus: Sequence[Mapping[str, Any]]) -> tuple[list[Metric], list[Finding]]:
    """gpu.recovery_action per GPU (Xid 154, the last one logged); any action but none fails its GPU."""
    by_pci = {xid_parser.normalize_pci(str(g.get("pci_bus_id", ""))): i for i, g in enumerate(inventory_gpus)}
    metrics: list[Metric] = []
    found: list[Finding] = []
    for m in parsed_metrics:
        if m.name != "gpu.recovery_action":
            continue
        pci = str(m.labels.get("pci"))
        gpu = by_pci.get(pci)
        lab: dict[str, str | int] = {"gpu": gpu} if gpu is not None else {"pci": pci}
        metrics.append(Metric("gpu.recovery_action", m.value, COUNT, lab))
        if m.value:
            who = f"GPU {gpu}" if gpu is not None else f"the GPU at PCI {pci}"
            found.append(Finding(metric="gpu.recovery_action", labels=lab, outcome=Outcome.FAIL,
                                 measured=m.value, unit=COUNT, high=0.0, source=SOURCE,
                                 message=f"{who}: the driver asks for {actions.get(pci) or 'a recovery'} "
                                         f"(Xid 154, action 0x{int(m.value):x})"))
    return metrics, found


def run(params: GpuHealthParams, ctx: CheckContext) -> CheckOutput:
    """Read NVML and the kernel log; metrics per GPU and the health verdicts."""
    with nvml.NvmlSession() as nv:
        health = nv.health()
    metrics: list[Metric] = []
    found: dict[str, list[_Issue]] = {}
    lost = [h for h in health if h.error]
    for h in health:
        if h.error:
            continue
        metrics += health_metrics(h)
        for metric, items in findings(h, params).items():
            found.setdefault(metric, []).extend(items)
    problems: list[str] = []
    fault_findings: list[Finding] = []  # driver faults and Xid 154 (or the kernel log's own error)
    details: dict[str, Any] = {"gpus": len(health)}
    argv = xid_argv(params)
    if argv:
        try:
            res = ctx.run_tool(argv, name=params.xid_source)
        except ToolError as e:  # that source is not judged; NVML's verdicts stand
            fault_findings.append(Finding(
                metric="gpu.xid_critical", outcome=Outcome.ERROR, unit=COUNT, high=0.0, source=SOURCE,
                message=f"could not read the kernel log for XIDs ({e}); run as root, or set "
                        "xid_source: none"))
        else:
            parsed = xid_parser.parse(res.stdout())
            xm, crit = xid_metrics(parsed.metrics, ctx.inventory.get("gpus", []), params.xid_critical)
            metrics += xm
            metrics += [Metric("gpu.xid_critical", float(n), COUNT, {"gpu": g}) for g, n in crit.items()]
            found["gpu.xid_critical"] = [
                _Issue(g, float(n), f"GPU {g}: {n} critical XID event(s) in the kernel log "
                         f"(codes {', '.join(map(str, params.xid_critical))})") for g, n in crit.items() if n]
            details["xid_events"] = parsed.details.get("events", [])[:20]
            fm, fault_findings = driver_fault_findings(parsed.metrics, ctx.inventory.get("gpus", []))
            metrics += fm
            rm, recovery = recovery_findings(parsed.metrics, parsed.details.get("recovery_actions", {}),
                                             ctx.inventory.get("gpus", []))
            metrics += rm
            fault_findings += recovery
    named = gpu_identity.names(ctx.inventory.get("gpus", []))
    own = [Finding(metric="gpu.lost", labels={"gpu": h.gpu}, outcome=Outcome.FAIL, measured=1.0, unit=COUNT,
                   high=0.0, message=f"{named.get(h.gpu, f'GPU {h.gpu}')} does not answer NVML: {h.error}",
                   source=SOURCE) for h in lost]
    own += _verdicts(found, len(health) - len(lost))
    own += gpu_links.nvlink_findings(health, (ctx.hardware.get("gpu") or {}).get("nvlinks"))
    fabric_metrics, fabric = gpu_links.fabric_findings(health)
    metrics += fabric_metrics
    own += fabric
    own += fault_findings
    inventory_gpus = ctx.inventory.get("gpus", [])
    metrics += gpu_identity.memory_metrics(inventory_gpus)
    own += gpu_identity.findings(inventory_gpus, ctx.hardware.get("gpu") or {},
                                 ctx.inventory.get("pci_gpus") or ())
    idle_gen = [f"GPU {h.gpu} Gen{h.pcie_gen} of Gen{h.pcie_gen_max}" for h in health
                if h.pcie_gen is not None and h.pcie_gen_max is not None and h.pcie_gen < h.pcie_gen_max]
    if idle_gen:
        details["pcie_gen_at_idle"] = "; ".join(idle_gen) + " (normal at idle; judged under load by the burn)"
    summary = f"{len(health)} GPUs: " + (_named(own) or "healthy")
    return CheckOutput(tuple(metrics), tuple(problems), details, summary, findings=tuple(own))


def _named(found: Sequence[Finding]) -> str:
    """What failed and warned, by rule and GPU: 'failed gpu.count; gpu.persistence_mode (GPU 3)'
    (it said '1 failed' when the one failure was the GPU-count rule, not a GPU)."""
    parts = []
    for outcome, word in ((Outcome.FAIL, "failed"), (Outcome.WARN, "warned")):
        gpus: dict[str, list[str]] = {}
        for f in found:
            if f.outcome is outcome:
                gpu = f.labels.get("gpu")
                gpus.setdefault(f.metric, []).extend([] if gpu is None else [str(gpu)])
        named = [m + (f" (GPU {', '.join(dict.fromkeys(g))})" if g else "") for m, g in gpus.items()]
        if named:
            more = f"; +{len(named) - 3} more" if len(named) > 3 else ""
            parts.append(f"{word} " + "; ".join(named[:3]) + more)
    return ", ".join(parts)


def _verdicts(found: Mapping[str, list[_Issue]], checked: int) -> list[Finding]:
    """One finding per issue, and one passing row per rule that found nothing."""
    out: list[Finding] = []
    for metric, items in found.items():
        for f in items:
            fails = f.outcome is Outcome.FAIL
            # the bound missed: a flag that must be on (persistence, ECC) >= 1, a width >= its max,
            # a count of faults <= 0
            on = catalog.METRICS[metric].better == "higher"
            low = (f.low if f.low is not None else 1.0) if fails and on else None
            out.append(Finding(metric=metric, labels={"gpu": f.gpu}, outcome=f.outcome,
                               severity="fail" if fails else "warn", measured=f.measured, unit=COUNT,
                               low=low, high=0.0 if fails and not on else None,
                               message=f.message, source=SOURCE))
        if not items:
            out.append(Finding(metric=metric, outcome=Outcome.PASS, unit=COUNT, reduce="max",
                               message=f"all {checked} GPUs fine", source=SOURCE))
    return out


KIND = CheckKind(
    name="gpu_health",
    description="GPU health gate: count/model/memory vs profile, ECC, retired pages, row remap, PCIe width, "
                "NVLink, XIDs (NVML, kernel log)",
    params=GpuHealthParams,
    metrics=catalog.subset(list(METRICS)),
    run=run,
    plan=plan,
    hooks=KindHooks(
        needs=frozenset({"gpu"}),
        estimate_s=lambda _p: 2.0,
        profile_defaults=profile_defaults,
        verdicts=verdicts,
        loads_node=False,
        requires=(needs.NVML, needs.tool("dmesg", use="xid_source: dmesg (default)"),
                  needs.tool("journalctl", use="xid_source: journal")),
    ),
)
