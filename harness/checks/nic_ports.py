"""Check kind `nic_ports`: Ethernet/RoCE NIC link state and speed, and error counters
(`ethtool -S`) over a soak window.

Per interface, `ethtool -S IFACE` is read, then read again after the window (`window_s`), or
compared with an earlier nic_ports check's reading (`since`). Metrics, labelled iface and
counter: `net.port_errors` (the value at the end) and `net.error_delta` (the growth), for the
port-level error counters the ethtool-stats parser recognises (rx_crc_errors_phy,
rx_discards_phy, rx_out_of_buffer, link_down_events_phy, ...). Every counter of both readings
is kept under raw/. At the end, the link from sysfs (/sys/class/net/IFACE: operstate, carrier,
speed), labelled iface and driver: `net.link_up` (1/0) and `net.link_speed` (GB/s: 400 Gb/s =
50; 0 when down; none when an up link's speed is unknown, as for virtio_net). Without
`interfaces`, every interface on a device (/sys/class/net/*/device) is read; with none, the check
is skipped. An interface whose driver has no statistics, or that is not there, makes the run
invalid with ethtool's own words. Rules of the check's own: `max_error_delta` warns on every
error counter's growth; `expect_speed_gbit` fails a link that is down or slower.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from pydantic import Field, field_validator

from harness import catalog
from harness.checks import counterwindow as cw
from harness.checks import needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, PlannedCommand
from harness.compare.rules import Rule
from harness.config.models import Expectation
from harness.errors import HarnessError, SkipCheck
from harness.model import LabelValue, Metric
from harness.parsers import ethtool, linkstate, portcounters
from harness.platform import facts, netdev
from harness.units import COUNT, GBPS

KIND_NAME = "nic_ports"
PATTERN = re.compile(r"^[A-Za-z0-9_.:@*?\[\]-]{1,32}$")
TOOL_TIMEOUT_S = 30.0


class NicPortsParams(cw.WindowParams):
    """Which interfaces, and the counter window."""

    interfaces: Optional[list[str]] = Field(
        None, min_length=1, description="interfaces, glob patterns allowed (ens*); default every "
        "interface on a device (/sys/class/net/*/device)")
    exclude: list[str] = Field(default_factory=list, description="interfaces to leave out (globs)")
    max_error_delta: Optional[int] = Field(
        None, ge=0, description="warn when an error counter grows by more (a rule of the check's own; "
        "drops under load can be the host's, so a warning)")
    expect_speed_gbit: Optional[float] = Field(
        None, gt=0, le=10000, description="every chosen interface's link up at least at this speed, in "
        "Gb/s (400 for 400GbE; sysfs speed / 1000): a rule of the check's own, beside the profile's; "
        "a link that is down measures 0")

    @field_validator("interfaces", "exclude")
    @classmethod
    def _patterns(cls, v: Optional[list[str]]) -> Optional[list[str]]:
        for p in v or []:
            if not PATTERN.match(p):
                raise ValueError(f"not an interface name or pattern: {p!r}")
        return v


def _all_interfaces() -> list[str]:
    try:
        return sorted(p.name for p in (facts.SYS / "class/net").iterdir())
    except OSError:
        return []


def interfaces(params: NicPortsParams) -> tuple[list[str], list[str]]:
    """(the interfaces to read, the given names or patterns that match no interface)."""
    if params.interfaces is None:
        names = [p.name for p in facts.physical_nics()]
        return [n for n in names if cw.selected([n], None, params.exclude)], []
    present = _all_interfaces()
    return ([n for n in present if cw.selected([n], params.interfaces, params.exclude)],
            cw.unmatched(params.interfaces, present))


def argv_for(iface: str) -> list[str]:
    return ["ethtool", "-S", iface]


def plan(params: NicPortsParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    names = interfaces(params)[0] or params.interfaces or ["<every interface on a device>"]
    reads = [PlannedCommand(tuple(argv_for(n)), "") for n in names]
    link = PlannedCommand(("cat", f"{facts.SYS}/class/net/<iface>/{{{','.join(netdev.LINK_FILES)}}}"),
                          "link state and speed of each, read in-process")
    if params.since is not None:
        return [PlannedCommand(("cat", f"<run>/raw/{params.since}/after.json"),
                               f"the counters check {params.since} read"), *reads, link]
    return [*reads, *cw.planned_soak(params.window), *reads, link]


def own_rules(params: NicPortsParams) -> list[Rule]:
    """The rules of the check's own params: judged by compare.judge, listed by --dry-run."""
    rules = []
    if params.max_error_delta is not None:
        rules.append(Rule(Expectation(metric="net.error_delta", max=params.max_error_delta, unit=COUNT,
                                      severity="warn"),
                          f"check param max_error_delta {params.max_error_delta}"))
    if params.expect_speed_gbit is not None:
        src = f"check param expect_speed_gbit {params.expect_speed_gbit:g}"
        rules += [Rule(Expectation(metric="net.link_up", min=1, unit=COUNT, note="link up"), src),
                  Rule(Expectation(metric="net.link_speed", min=params.expect_speed_gbit / 8, unit=GBPS,
                                   note=f"{params.expect_speed_gbit:g} Gb/s"), src)]
    return rules


def _read(ctx: CheckContext, names: Sequence[str], which: str) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Every interface's counters; the interfaces ethtool cannot read give a problem instead."""
    counters: dict[str, dict[str, int]] = {}
    problems = []
    for n in names:
        res = ctx.run_tool(argv_for(n), name=f"ethtool-S-{n}-{which}", timeout_s=TOOL_TIMEOUT_S,
                           check_rc=False)
        out = res.stdout() + "\n" + res.stderr()
        parsed = ethtool.parse(out, n)
        if res.rc != 0 or not parsed.valid:
            first = next((ln.strip() for ln in out.splitlines() if ln.strip()), "no output")
            problems.append(f"{n}: {' '.join(argv_for(n))}: exit {res.rc}: {first[:200]}")
            continue
        counters[n] = parsed.details["counters"]
    return counters, problems


def run(params: NicPortsParams, ctx: CheckContext) -> CheckOutput:
    """Read, wait the window, read again: error counter values and their growth per interface."""
    names, missing = interfaces(params)
    problems = [f"{p}: no such network interface in /sys/class/net" for p in missing]
    if not names:
        if problems:
            raise HarnessError("; ".join(problems))
        raise SkipCheck("no network interface on a device (/sys/class/net/*/device)")
    if params.since is not None:
        before, age = cw.earlier(ctx, KIND_NAME, params.since)
        window = f"since check {params.since} ({age:.0f} s)"
    else:
        before, bad = _read(ctx, names, "before")
        problems += bad
        cw.keep(ctx, KIND_NAME, "before", before)
        cw.soak(ctx, params.window)
        window = f"over {params.window:g} s"
    after, bad = _read(ctx, names, "after")
    problems += [p for p in bad if p not in problems]
    cw.keep(ctx, KIND_NAME, cw.AFTER, after)
    metrics: list[Metric] = []
    for n, now in after.items():
        labels = {"iface": n}
        metrics += ethtool.error_metrics(now, labels)
        if n in before:
            grown = portcounters.deltas(before[n], now)
            metrics += ethtool.error_metrics(grown, labels, name="net.error_delta")
    links = [netdev.link(n) for n in names]
    metrics += [m for ln in links for m in linkstate.metrics(ln.files, _labels(ln))]
    found = {n: [k for k in now if ethtool.is_error_counter(k)] for n, now in after.items()}
    details = {"interfaces": names, "window": window, "error_counters": found,
               "links": {ln.iface: ln.to_dict() for ln in links}}
    return CheckOutput(tuple(metrics), tuple(problems), details, summary(metrics, names, window, links))


def _labels(link: netdev.NetLink) -> dict[str, LabelValue]:
    return {"iface": link.iface, **({"driver": link.driver} if link.driver else {})}


def summary(metrics: Sequence[Metric], names: Sequence[str], window: str,
            links: Sequence[netdev.NetLink] = ()) -> str:
    """'2 interface(s); errors over 10 s: rx_crc_errors_phy +3 on ens1; down: ens2; lowest speed
    200 Gb/s on ens1' or '...; no error counter grew ...; all 2 up; speed unknown: eth0'."""
    grown = [m for m in metrics if m.name == "net.error_delta" and m.value > 0]
    parts = [f"{len(names)} interface(s)"]
    if grown:
        shown = ", ".join(f"{m.labels['counter']} +{m.value:.0f} on {m.labels['iface']}" for m in grown[:4])
        parts.append(f"errors {window}: {shown}" + (f" and {len(grown) - 4} more" if len(grown) > 4 else ""))
    else:
        parts.append(f"no error counter grew {window}")
    up = {str(m.labels["iface"]) for m in metrics if m.name == "net.link_up" and m.value}
    if down := [ln.iface + (f" ({state})" if (state := linkstate.describe(ln.files)) != "down" else "")
                for ln in links if linkstate.is_up(ln.files) is False]:
        parts.append("down: " + ", ".join(down))
    elif up:
        parts.append(f"all {len(up)} up")
    speeds = [m for m in metrics if m.name == "net.link_speed" and m.labels["iface"] in up]
    if speeds:
        low = min(speeds, key=lambda m: m.value)
        parts.append(f"lowest speed {low.value * 8:g} Gb/s on {low.labels['iface']}")
    if unknown := sorted(up - {str(m.labels["iface"]) for m in speeds}):
        parts.append("speed unknown: " + ", ".join(unknown))
    return "; ".join(parts)


KIND = CheckKind(
    name=KIND_NAME,
    description="Ethernet NIC link state and speed (sysfs), error counters (ethtool -S) over a soak window",
    params=NicPortsParams,
    metrics=catalog.subset(["net.port_errors", "net.error_delta", "net.link_up", "net.link_speed"]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        estimate_s=lambda p: p.window,
        own_rules=own_rules,
        loads_node=False,
        requires=(needs.tool("ethtool"),),
    ),
)
