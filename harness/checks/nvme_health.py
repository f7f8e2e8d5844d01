"""Check kind `nvme_health`: every NVMe controller's identity, PCIe link and SMART/health log.

Controllers come from sysfs (platform/nvme): model, serial, firmware, namespaces, and the PCIe
link now and at most (nvme.link_downgraded = 1 when it trained below). The health log comes
from nvme-cli (`nvme smart-log /dev/nvmeN -o json`, default) or smartctl (`smartctl -a -j`; a
smartctl before 7.0, which refuses -j, is asked again for its text: `smartctl -a`);
metrics nvme.* are labelled `device` (nvmeN) and `serial`. Without NVMe the check is skipped,
unless the profile's hardware.nvme_count expects drives: then it is an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import Field, field_validator

from harness import catalog
from harness.checks import needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, Params, PlannedCommand
from harness.errors import HarnessError, SkipCheck, ToolError, ToolMissing, ToolTimeout
from harness.model import Metric
from harness.parsers import nvme as nvme_parser
from harness.parsers import smartctl as smartctl_parser
from harness.platform import nvme, pci
from harness.units import COUNT

TOOL_TIMEOUT_S = 60.0


class NvmeHealthParams(Params):
    """Which tool reads the health log, and optionally which controllers."""

    tool: Literal["nvme", "smartctl"] = Field(
        "nvme", description="nvme (nvme-cli smart-log -o json) or smartctl (-a -j)")
    controllers: Optional[list[str]] = Field(
        None, description="controllers such as nvme0 or /dev/nvme1; default: every one in sysfs")

    @field_validator("controllers")
    @classmethod
    def _names(cls, v: Optional[list[str]]) -> Optional[list[str]]:
        for name in v or []:
            if not Path(name).name.startswith("nvme"):
                raise ValueError(f"{name!r} is not an NVMe controller (nvme0, /dev/nvme0, ...)")
        return v


def argv_for(tool: str, device: str) -> list[str]:
    if tool == "smartctl":
        return ["smartctl", "-a", "-j", device]
    return ["nvme", "smart-log", device, "-o", "json"]


def _controllers(params: NvmeHealthParams) -> list[nvme.NvmeController]:
    found = nvme.controllers()
    if not params.controllers:
        return found
    by_name = {c.name: c for c in found}
    out = []
    for given in params.controllers:
        name = Path(given).name
        out.append(by_name.get(name) or nvme.NvmeController(name, "", "", "", "", "", (), None,
                                                            in_sysfs=False))
    return out


def plan(params: NvmeHealthParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    ctrls = _controllers(params)
    if not ctrls:
        return [PlannedCommand((params.tool,), "no NVMe controller in /sys/class/nvme: skipped")]
    return [PlannedCommand(tuple(argv_for(params.tool, c.dev)), f"{c.model or c.name} (read-only)")
            for c in ctrls]


def link_metrics(ctrl: nvme.NvmeController, labels: Mapping[str, str | int]) -> list[Metric]:
    """nvme.pcie_gen / nvme.pcie_width (which=current|max) and nvme.link_downgraded."""
    link = ctrl.link
    if link is None:
        return []
    out = []
    for name, now, top in (("nvme.pcie_gen", link.gen, link.max_gen),
                           ("nvme.pcie_width", link.width, link.max_width)):
        for which, value in (("current", now), ("max", top)):
            if value is not None:
                out.append(Metric(name, float(value), COUNT, {**labels, "which": which}))
    if link.downgraded is not None:
        out.append(Metric("nvme.link_downgraded", 1.0 if link.downgraded else 0.0, COUNT, labels))
    return out


def run(params: NvmeHealthParams, ctx: CheckContext) -> CheckOutput:
    """Identity, link and health log of every controller; a failed read spoils only its own."""
    ctrls = _controllers(params)
    if not ctrls:
        expected = ctx.hardware.get("nvme_count")
        if expected:  # one rule for every counted family: on the bus without a driver errors
            why = pci.absent_or_unbound("nvme", int(expected), 0, "/sys/class/nvme")
            if why:
                raise HarnessError(why)
            return CheckOutput(metrics=(Metric("nvme.count", 0.0, COUNT),),  # absent: the hardware's
                               summary=f"the profile expects {expected} NVMe controllers, found 0: none on "
                               "the PCI bus (absent hardware, not a driver)")
        raise SkipCheck("no NVMe devices")
    expected = ctx.hardware.get("nvme_count")
    if expected and not params.controllers and len(ctrls) < int(expected):  # the bus tells driver from absent
        why = pci.absent_or_unbound("nvme", int(expected), len(ctrls), "/sys/class/nvme")
        if why:
            raise HarnessError(why)
    metrics = [Metric("nvme.count", float(len(ctrls)), COUNT)]
    problems: list[str] = []
    for i, ctrl in enumerate(ctrls):
        ctx.progress(f"{ctrl.name}: health log ({i + 1}/{len(ctrls)})")
        labels: dict[str, str | int] = {"device": ctrl.name}
        if ctrl.serial:
            labels["serial"] = ctrl.serial
        if ctrl.in_sysfs:
            metrics.append(Metric("nvme.namespaces", float(len(ctrl.namespaces)), COUNT, labels))
        metrics += link_metrics(ctrl, labels)
        got, bad = _health(params.tool, ctx, ctrl, labels)
        metrics += got
        problems += bad
    details = {"tool": params.tool, "controllers": [c.to_dict() for c in ctrls]}
    return CheckOutput(tuple(metrics), tuple(problems), details, _summary(ctrls, metrics))


def _health(tool: str, ctx: CheckContext, ctrl: nvme.NvmeController,
            labels: Mapping[str, str | int]) -> tuple[list[Metric], list[str]]:
    argv = argv_for(tool, ctrl.dev)
    try:  # smartctl's exit status is a bit mask the parser reads; nvme-cli's is pass/fail
        res = ctx.run_tool(argv, name=f"{tool}-{ctrl.name}", timeout_s=TOOL_TIMEOUT_S,
                           check_rc=tool != "smartctl")
    except ToolMissing:
        raise  # no controller can be read: the whole check errors with the install hint
    except ToolError as e:  # includes a timeout: this controller only
        first = next((ln.strip() for ln in e.output_tail.splitlines() if ln.strip()), "")
        how = str(e) if not first or isinstance(e, ToolTimeout) else f"{' '.join(argv)}: exit {e.rc}: {first}"
        return [], [f"{ctrl.name}: {how}"]
    text, extra = res.stdout(), []
    if tool == "smartctl" and smartctl_parser.lacks_json(text):  # smartctl < 7.0: read its text
        try:
            res = ctx.run_tool([a for a in argv if a != "-j"], name=f"{tool}-{ctrl.name}-text",
                               timeout_s=TOOL_TIMEOUT_S, check_rc=False)
        except ToolError as e:
            return [], [f"{ctrl.name}: {e}"]
        text, extra = res.stdout(), smartctl_parser.status_problems(max(res.rc or 0, 0))
    parsed = (smartctl_parser if tool == "smartctl" else nvme_parser).parse(text)
    if extra:
        return [], [f"{ctrl.name}: {p}" for p in [*extra, *parsed.problems]]
    metrics = [Metric(m.name, m.value, m.unit, {**m.labels, **labels}) for m in parsed.metrics]
    return metrics, [f"{ctrl.name}: {p}" for p in parsed.problems]


def _summary(ctrls: Sequence[nvme.NvmeController], metrics: Sequence[Metric]) -> str:
    def val(name: str, dev: str) -> Optional[float]:
        return next((m.value for m in metrics if m.name == name and m.labels.get("device") == dev
                     and "which" not in m.labels), None)

    parts = []
    for c in ctrls:
        bits = [c.model or c.name]
        if (t := val("nvme.temperature", c.name)) is not None:
            bits.append(f"{t:.0f} C")
        if (u := val("nvme.percentage_used", c.name)) is not None:
            bits.append(f"{u:.0f}% used")
        if c.link is not None and c.link.gen is not None:
            bits.append(f"Gen{c.link.gen} x{c.link.width}" + (" (below max)" if c.link.downgraded else ""))
        parts.append(f"{c.name}: " + ", ".join(bits))
    return f"{len(ctrls)} NVMe: " + "; ".join(parts)


KIND = CheckKind(
    name="nvme_health",
    description="NVMe identity, PCIe link and SMART/health log (nvme-cli or smartctl)",
    params=NvmeHealthParams,
    metrics=catalog.subset([
        "nvme.count", "nvme.namespaces", "nvme.pcie_gen", "nvme.pcie_width", "nvme.link_downgraded",
        "nvme.critical_warning", "nvme.temperature", "nvme.available_spare",
        "nvme.available_spare_threshold", "nvme.spare_margin", "nvme.percentage_used",
        "nvme.media_errors", "nvme.num_err_log_entries", "nvme.unsafe_shutdowns",
        "nvme.power_on_hours", "nvme.data_units_read", "nvme.data_units_written",
        "nvme.warning_temp_time", "nvme.critical_temp_time"]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        declared_metrics=lambda p: catalog.subset(["disk.smart_passed"]) if p.tool == "smartctl" else {},
        loads_node=False,
        sections=frozenset({"controllers"}),
        requires=(needs.tool("nvme", use="tool: nvme (default)", group="tool"),
                  needs.tool("smartctl", use="tool: smartctl", group="tool")),
    ),
)
