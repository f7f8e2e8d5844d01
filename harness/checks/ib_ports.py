"""Check kind `ib_ports`: every InfiniBand/RoCE port Active, at its rate, with no error counts.

Read from sysfs (/sys/class/infiniband/<dev>/ports/<n>: state, phys_state, rate, link_layer,
counters/, hw_counters/), per port, labelled device, port and link_layer: `ib.port_active`
(1/0), `ib.rate` (GB/s: 400 Gb/s = 50), and the error counters (symbol_error, link_downed,
port_rcv_errors, ..., and the driver's hw_counters errors such as local_ack_timeout_err), label
counter: `ib.port_errors` (the value at the end) and `ib.error_delta` (growth over the soak
window, or since an earlier ib_ports check, `since`). A legacy counter already stuck at its
maximum when the window opens has no delta (its growth is unknown; listed under `saturated`).
`ib.hca_count` counts every RDMA device. The profile judges; `expect_rate_gbit` adds a rule of
the check's own (every port Active, at least that rate). Without RDMA devices the check is
skipped; when hardware.hca_count expects some, adapters absent from the PCI bus fail (hardware)
and adapters on the bus without their driver error naming the driver (pci.absent_or_unbound).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import Field, field_validator

from harness import catalog
from harness.checks import counterwindow as cw
from harness.checks import needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, PlannedCommand
from harness.compare.rules import Rule
from harness.config.models import Expectation
from harness.errors import HarnessError
from harness.model import Finding, LabelValue, Metric, Outcome
from harness.parsers import ibports, portcounters
from harness.platform import infiniband
from harness.units import COUNT, GBPS

KIND_NAME = "ib_ports"
PATTERN = re.compile(r"^[A-Za-z0-9_.:*?\[\]/-]{1,80}$")


class IbPortsParams(cw.WindowParams):
    """Which ports, the counter window, and optionally the rate every port must reach."""

    devices: Optional[list[str]] = Field(
        None, min_length=1, description="devices or device/port, glob patterns allowed (mlx5_*, mlx5_0/1); "
        "default every one in sysfs")
    exclude: list[str] = Field(default_factory=list,
                               description="devices or device/port to leave out (globs)")
    link_layer: Optional[Literal["InfiniBand", "Ethernet"]] = Field(
        None, description="only ports of this link layer (InfiniBand, or Ethernet for RoCE)")
    expect_rate_gbit: Optional[float] = Field(
        None, gt=0, le=10000, description="every chosen port Active at least at this rate, in Gb/s as "
        "ibstat prints it (400 for NDR): a rule of the check's own, beside the profile's")
    ibstat: bool = Field(False, description="also run ibstat: CA type and firmware, and any port it "
                         "sees in another state, go to details")
    sysfs_root: Optional[str] = Field(None, description="directory to read instead of /sys/class/infiniband")

    @field_validator("devices", "exclude")
    @classmethod
    def _patterns(cls, v: Optional[list[str]]) -> Optional[list[str]]:
        for p in v or []:
            if not PATTERN.match(p):
                raise ValueError(f"not a device or device/port pattern: {p!r}")
        return v


def _root(params: IbPortsParams) -> Path:
    return Path(params.sysfs_root) if params.sysfs_root else infiniband.SYSFS


def _key(p: infiniband.SysfsPort) -> str:
    return f"{p.device}/{p.port}"


def _chosen(params: IbPortsParams, ports: Sequence[infiniband.SysfsPort]) -> list[infiniband.SysfsPort]:
    return [p for p in ports if cw.selected([p.device, _key(p)], params.devices, params.exclude)
            and params.link_layer in (None, p.files.get("link_layer"))]


def _counters(p: infiniband.SysfsPort) -> dict[str, int]:
    """The port's counters/ and the error counters of its hw_counters/, in one map."""
    return {**portcounters.hw_errors(p.hw_counters), **p.counters}


def absent_hcas(hardware: Mapping[str, Any]) -> Finding:
    """The hardware verdict on HCAs the profile expects that are not on the PCI bus at all."""
    want = float(hardware.get("hca_count") or 0)
    return Finding(metric="ib.hca_count", outcome=Outcome.FAIL, measured=0.0, low=want, reference=want,
                   message=f"the profile expects {want:g} RDMA adapters, found 0: none on the PCI bus "
                   "(absent hardware, not a driver)", source="hardware.hca_count")


def plan(params: IbPortsParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    read = PlannedCommand(("cat", f"{_root(params)}/<device>/ports/<n>/{{state,phys_state,rate,link_layer,"
                                  "counters/*,hw_counters/*}"), "read in-process")
    if params.since is not None:
        out = [PlannedCommand(("cat", f"<run>/raw/{params.since}/after.json"),
                              f"the counters check {params.since} read"), read]
    else:
        out = [read, *cw.planned_soak(params.window), read]
    if params.ibstat:
        out.append(PlannedCommand(("ibstat",), "CA facts for details"))
    return out


def run(params: IbPortsParams, ctx: CheckContext) -> CheckOutput:
    """Read the ports, wait the window, read again; metrics from the second reading."""
    root = _root(params)
    found = infiniband.require_devices(ctx.hardware, root)
    if not found:  # the profile expects HCAs and the PCI bus has none: 0 measured, judged as hardware
        return CheckOutput(metrics=(Metric("ib.hca_count", 0.0, COUNT),), details={"root": str(root)},
                           summary=absent_hcas(ctx.hardware).message)
    first = infiniband.ports(found, root)
    problems = [f"{p}: no such RDMA device or port in {root} (found: {', '.join(found)})"
                for p in cw.unmatched(params.devices, [*found, *(_key(p) for p in first)])]
    first = _chosen(params, first)
    if not first:
        raise HarnessError(f"no port left to check in {root}: devices {params.devices or 'all'}, exclude "
                           f"{params.exclude}, link_layer {params.link_layer or 'any'}")
    devices = sorted({p.device for p in first})
    if params.since is not None:
        before, age = cw.earlier(ctx, KIND_NAME, params.since)
        window = f"since check {params.since} ({age:.0f} s)"
    else:
        before = {_key(p): _counters(p) for p in first}
        cw.keep(ctx, KIND_NAME, "before", before)
        cw.soak(ctx, params.window)
        window = f"over {params.window:g} s"
    ports = _chosen(params, infiniband.ports(devices, root))
    after = {_key(p): _counters(p) for p in ports}
    cw.keep(ctx, KIND_NAME, cw.AFTER, after, {"ports": {_key(p): dict(p.files) for p in ports}})
    metrics = [Metric("ib.hca_count", float(len(found)), COUNT)]
    saturated: dict[str, list[str]] = {}
    for p in ports:
        m, bad = _port(p, before.get(_key(p)), saturated)
        metrics += m
        problems += bad
    gone = [p for p in first if _key(p) not in after]  # the port or its HCA vanished: not Active
    metrics += [Metric("ib.port_active", 0.0, COUNT, _labels(p)) for p in gone]
    details: dict[str, Any] = {
        "root": str(root), "window": window, "saturated": saturated,
        "ports": {_key(p): dict(p.files) for p in ports}, "gone": [_key(p) for p in gone],
        "no_earlier_reading": sorted(set(after) - set(before)),
        "devices": {d: infiniband.device_facts(d, root) for d in devices}}
    if params.ibstat:
        details.update(_ibstat(ctx, metrics))
    text = summary(metrics, window, saturated, details["gone"])
    return CheckOutput(tuple(metrics), tuple(problems), details, text)


def _port(p: infiniband.SysfsPort, before: Optional[Mapping[str, int]],
          saturated: dict[str, list[str]]) -> tuple[list[Metric], list[str]]:
    """State, rate and error counter metrics of one port, and its problems."""
    key = _key(p)
    metrics = ibports.sysfs_port(p.device, str(p.port), p.files)
    if not metrics:
        return [], [f"{key}: no readable state file"]
    labels = _labels(p)
    now = _counters(p)
    errors = {k: v for k, v in now.items() if k in portcounters.WIDTH_MAX or k in p.hw_counters}
    metrics += _counter_metrics("ib.port_errors", errors, labels)
    stuck = portcounters.saturated(p.counters)
    if stuck:
        saturated[key] = stuck
    if before is None:
        return metrics, []
    already = portcounters.saturated(before)  # stuck before the window: its growth is unknown
    grown = {k: v for k, v in portcounters.deltas(before, errors).items() if k not in already}
    return metrics + _counter_metrics("ib.error_delta", grown, labels), []


def _labels(p: infiniband.SysfsPort) -> dict[str, LabelValue]:
    """The labels ibports gives a port's state metrics: device, port, link_layer."""
    return {"device": p.device, "port": p.port, "link_layer": p.files.get("link_layer") or "unknown"}


def _counter_metrics(name: str, counters: Mapping[str, int],
                     labels: Mapping[str, LabelValue]) -> list[Metric]:
    return [Metric(name, float(v), COUNT, {**labels, "counter": k}) for k, v in sorted(counters.items())]


def own_rules(params: IbPortsParams) -> list[Rule]:
    """The rules of the check's own params: judged by compare.judge, listed by --dry-run."""
    if params.expect_rate_gbit is None:
        return []
    src = f"check param expect_rate_gbit {params.expect_rate_gbit:g}"
    return [Rule(Expectation(metric="ib.port_active", min=1, unit=COUNT, note="port state Active"), src),
            Rule(Expectation(metric="ib.rate", min=params.expect_rate_gbit / 8, unit=GBPS,
                             note=f"{params.expect_rate_gbit:g} Gb/s"), src)]


def _ibstat(ctx: CheckContext, metrics: Sequence[Metric]) -> dict[str, Any]:
    """ibstat's CA facts, its problems, and the ports it sees Active when sysfs does not (or back)."""
    res = ctx.run_tool(["ibstat"], name="ibstat", timeout_s=60, check_rc=False)
    parsed = ibports.parse_ibstat(res.stdout() + "\n" + res.stderr())
    def active(ms: Sequence[Metric]) -> dict[tuple[str, str], float]:
        return {(str(m.labels["device"]), str(m.labels["port"])): m.value for m in ms
                if m.name == "ib.port_active"}

    ours, theirs = active(metrics), active(parsed.metrics)
    facts = {d: {k: v for k, v in info.items() if k in ("ca_type", "firmware_version")}
             for d, info in parsed.details.get("devices", {}).items()}
    return {"ibstat": facts, "ibstat_problems": list(parsed.problems),
            "ibstat_disagrees": sorted(f"{d}/{p}" for (d, p), v in theirs.items() if (d, p) in ours
                                       and ours[(d, p)] != v)}


def summary(metrics: Sequence[Metric], window: str, saturated: Mapping[str, list[str]],
            gone: Sequence[str] = ()) -> str:
    """'12 port(s): 11 Active; not Active: mlx5_2/1; lowest InfiniBand rate 200 Gb/s on mlx5_3/1; ...'
    (the lowest rate per link layer among the Active ports)."""
    def where(m: Metric) -> str:
        return f"{m.labels['device']}/{m.labels['port']}"

    active = [m for m in metrics if m.name == "ib.port_active"]
    parts = [f"{len(active)} port(s): {sum(1 for m in active if m.value)} Active"]
    if down := [where(m) for m in active if not m.value]:
        parts.append("not Active: " + ", ".join(down))
    up = {where(m) for m in active if m.value}
    for layer in sorted({str(m.labels.get("link_layer")) for m in active}):
        rates = [m for m in metrics
                 if m.name == "ib.rate" and where(m) in up and m.labels.get("link_layer") == layer]
        if rates:
            low = min(rates, key=lambda m: m.value)
            parts.append(f"lowest {layer} rate {low.value * 8:g} Gb/s on {where(low)}")
    grown = [m for m in metrics if m.name == "ib.error_delta" and m.value > 0]
    if grown:
        shown = ", ".join(f"{m.labels['counter']} +{m.value:.0f} on {where(m)}" for m in grown[:4])
        parts.append(f"errors {window}: {shown}" + (f" and {len(grown) - 4} more" if len(grown) > 4 else ""))
    else:
        parts.append(f"no error counter grew {window}")
    if gone:
        parts.append("gone during the check: " + ", ".join(gone))
    if saturated:
        parts.append("saturated (no delta): " + ", ".join(f"{k} {','.join(v)}" for k, v in saturated.items()))
    return "; ".join(parts)


KIND = CheckKind(
    name=KIND_NAME,
    description="InfiniBand/RoCE port state, rate and error counters from sysfs, over a soak window",
    params=IbPortsParams,
    metrics=catalog.subset(["ib.hca_count", "ib.port_active", "ib.rate", "ib.port_errors", "ib.error_delta"]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        estimate_s=lambda p: p.window,
        own_rules=own_rules,
        loads_node=False,
        requires=(needs.tool("ibstat", use="CA facts in the details (ports are read from sysfs)"),),
    ),
)
