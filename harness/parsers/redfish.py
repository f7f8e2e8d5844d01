"""Parse Redfish power resources into metrics and a BmcReading.

Pure: JSON text (or parsed documents) in. Parse kind `redfish-power` takes one resource or a
bundle {"/redfish/v1/...": resource, ...} (what RedfishSource keeps of one read). Resources read:

* legacy `Chassis/<id>/Power`: PowerControl[].PowerConsumedWatts (+ PowerMetrics min/max/avg),
  PowerSupplies[] (Status, PowerInputWatts, PowerOutputWatts or LastPowerOutputWatts,
  PowerCapacityWatts), Redundancy[];
* `PowerSubsystem` (PowerSupplyRedundancy, CapacityWatts), `PowerSupplies/<id>` (Status,
  PowerCapacityWatts), `.../Metrics` (InputPowerWatts/OutputPowerWatts .Reading) and the chassis
  `EnvironmentMetrics` (PowerWatts.Reading: node power).

Quirks handled, each seen in real output: PowerConsumedWatts absent and PowerMetrics all zero
with IntervalInMin 0 (NVIDIA DGX H100: no node power, not 0 W); several PSUs with one Name
(HPE "HpeServerPowerSupply": labelled by Oem.Hpe.BayNumber); PSU without Status (DGX: ok
unknown); OutputPowerWatts without Reading; Dell iDRAC reporting the PSU's rated maximum input
(Oem.Dell...Range1MaxInputPowerWatts) as PowerInputWatts (dropped: not a reading).

A PSU whose Status says OK but that shows no sign of a live feed (no input power, output power or
line voltage above zero) is unplugged or on a dead feed as far as anyone can tell: it is made
"unknown" (ok None) with a status that says so, so it never counts toward usable capacity or
redundancy. This applies where the BMC does report such readings: the PSU's own fields are there
(null or 0) or a sibling PSU has a live one. A BMC that reports no reading for any PSU is not
judged this way (nothing to tell an unplugged PSU from a BMC that does not measure).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.model import BmcReading, Metric, PsuReading
from harness.parsers.base import ParseResult, invalid, json_document
from harness.parsers.bmcread import all_or_none, label_order, psu_label, reading_metrics, watts
from harness.units import WATT

KIND = "redfish-power"
Doc = Mapping[str, Any]
TYPES = ("Power", "PowerSubsystem", "PowerSupply", "PowerSupplyMetrics", "EnvironmentMetrics")
NOT_REDFISH = ("not a Redfish power resource (Power, PowerSubsystem, PowerSupply,"
               " PowerSupplyMetrics or EnvironmentMetrics) nor a bundle of them")
_INLET_URI = re.compile(r"inlet|intake|ambient", re.IGNORECASE)
_BAD_HEALTH = ("Warning", "Critical")
_OFF_STATES = ("Absent", "UnavailableOffline", "Disabled")
NO_INPUT = "reports OK but no input power or line voltage: unplugged or dead feed?"
# legacy Power.PowerSupplies[] fields that show a feed; PowerSupplyMetrics objects with a Reading
_LEGACY_FEED = ("PowerInputWatts", "PowerOutputWatts", "LastPowerOutputWatts", "LineInputVoltage")
_METRICS_FEED = ("InputPowerWatts", "OutputPowerWatts", "InputVoltage")


@dataclass(frozen=True)
class _Feed:
    """Whether a PSU's resource has any feed field at all, and whether one reads above zero."""

    fields: bool
    live: bool


def doc_type(doc: Doc) -> str:
    """The resource type from @odata.type ("#Power.v1_7_1.Power" -> "Power"), else by its keys."""
    odata = doc.get("@odata.type")
    if isinstance(odata, str) and odata.startswith("#"):
        return odata[1:].split(".")[0]
    if "PowerControl" in doc or isinstance(doc.get("PowerSupplies"), list):
        return "Power"
    if "PowerSupplyRedundancy" in doc:
        return "PowerSubsystem"
    if isinstance(doc.get("InputPowerWatts"), Mapping) or isinstance(doc.get("OutputPowerWatts"), Mapping):
        return "PowerSupplyMetrics"
    if isinstance(doc.get("PowerWatts"), Mapping):
        return "EnvironmentMetrics"
    return ""


def documents(text: str) -> tuple[dict[str, Doc], tuple[str, ...]]:
    """The resources in a file: one resource keyed by its @odata.id, or a bundle."""
    try:
        obj = json_document(text)
    except ValueError as e:
        return {}, (f"not JSON: {e}",)
    if not isinstance(obj, dict):
        return {}, (NOT_REDFISH,)
    if doc_type(obj) in TYPES:
        return {str(obj.get("@odata.id", "")): obj}, ()
    if obj and all(k.startswith("/redfish/") and isinstance(v, dict) for k, v in obj.items()) \
            and any(doc_type(v) in TYPES for v in obj.values()):
        return dict(obj), ()
    return {}, (NOT_REDFISH,)


@dataclass
class RedfishPower:
    """What the resources say, before it becomes a BmcReading."""

    node_power_w: Optional[float] = None
    node_power_from: str = ""  # "EnvironmentMetrics" / "PowerControl"
    stats: dict[str, float] = field(default_factory=dict)  # PowerMetrics minimum/maximum/average
    interval_min: Optional[float] = None
    psus: tuple[PsuReading, ...] = ()
    redundancy: list[Optional[bool]] = field(default_factory=list)
    inlet_c: Optional[float] = None
    capacity_w: Optional[float] = None  # PowerSubsystem CapacityWatts

    def reading(self, t: float, source: str) -> BmcReading:
        node, how = self.node_power_w, self.node_power_from
        if node is None:
            inputs = [p.power_in_w for p in self.psus if p.ok is not False]
            total = sum(v for v in inputs if v is not None)
            if inputs and all(v is not None for v in inputs) and total > 0:
                node, how = total, "sum of PSU input"
        src = f"{source} (node power: {how})" if node is not None else source
        return BmcReading(t, node, self.psus, all_or_none(self.redundancy), src, self.inlet_c, None)


def analyse(docs: Mapping[str, Doc]) -> RedfishPower:
    """Node power, PSUs, redundancy and inlet temperature from any mix of the power resources."""
    out = RedfishPower()
    legacy: list[PsuReading] = []
    supplies: dict[str, Doc] = {}
    metrics: dict[str, Doc] = {}
    for url, doc in docs.items():
        typ, oid = doc_type(doc), str(doc.get("@odata.id") or url)
        if typ == "Power":
            legacy.extend(_legacy_psus(doc.get("PowerSupplies")))
            _power_control(doc.get("PowerControl"), out)
            out.redundancy.extend(_redundancy_ok(g) for g in _list(doc.get("Redundancy"))
                                  if "fan" not in str(g.get("Name", "")).lower())
        elif typ == "PowerSubsystem":
            out.capacity_w = watts(doc.get("CapacityWatts"))
            out.redundancy.extend(_redundancy_ok(g) for g in _list(doc.get("PowerSupplyRedundancy")))
        elif typ == "PowerSupply":
            supplies[oid.rstrip("/")] = doc
        elif typ == "PowerSupplyMetrics":
            metrics[oid.rstrip("/").rsplit("/Metrics", 1)[0]] = doc
        elif typ == "EnvironmentMetrics":
            _environment(doc, out)
    out.psus = _subsystem_psus(supplies, metrics) if (supplies or metrics) else tuple(legacy)
    return out


def reading(docs: Mapping[str, Doc], t: float, source: str = "redfish") -> BmcReading:
    """A BmcReading from the resources of one read."""
    return analyse(docs).reading(t, source)


def parse(text: str) -> ParseResult:
    """bmc.power{stat}, psu.* and bmc.inlet_temp from a Redfish power resource or bundle."""
    docs, problems = documents(text)
    if problems:
        return invalid(KIND, *problems)
    power = analyse(docs)
    rd = power.reading(0.0, "redfish")
    metrics = reading_metrics(rd, node_power=power.node_power_w is not None)
    metrics += [Metric("bmc.power", v, WATT, {"stat": k}) for k, v in power.stats.items()]
    details = {"resources": sorted(doc_type(d) for d in docs.values()),
               "psus": [p.name for p in rd.psus], "capacity_w": power.capacity_w,
               "node_power_from": power.node_power_from, "interval_min": power.interval_min,
               "unknown_psus": {p.name: p.status for p in rd.psus if p.ok is None}}
    return ParseResult(KIND, True, (), tuple(metrics), details)


def _obj(doc: Doc, *keys: str) -> Doc:
    """doc[k1][k2]... where each is an object; {} where one is missing or not an object."""
    for key in keys:
        value = doc.get(key)
        doc = value if isinstance(value, Mapping) else {}
    return doc


def _list(raw: Any) -> list[Doc]:
    return [x for x in raw if isinstance(x, Mapping)] if isinstance(raw, list) else []


def _power_control(raw: Any, out: RedfishPower) -> None:
    for pc in _list(raw):
        if _obj(pc, "Status").get("State") == "Absent":
            continue
        consumed = watts(pc.get("PowerConsumedWatts"))
        if consumed is None or consumed <= 0:  # 0 W for a running node is no measurement
            continue
        if out.node_power_from != "EnvironmentMetrics":
            out.node_power_w, out.node_power_from = consumed, "PowerControl"
        pm = _obj(pc, "PowerMetrics")
        interval = watts(pm.get("IntervalInMin"))
        stats = {"minimum": watts(pm.get("MinConsumedWatts")),
                 "maximum": watts(pm.get("MaxConsumedWatts")),
                 "average": watts(pm.get("AverageConsumedWatts"))}
        if interval != 0 and any(v for v in stats.values()):
            out.stats = {k: v for k, v in stats.items() if v is not None}
            out.interval_min = interval
        return


def _environment(doc: Doc, out: RedfishPower) -> None:
    if (w := watts(_obj(doc, "PowerWatts").get("Reading"))) is not None and w > 0:
        out.node_power_w, out.node_power_from = w, "EnvironmentMetrics"
    temp = _obj(doc, "TemperatureCelsius")
    if _INLET_URI.search(str(temp.get("DataSourceUri", ""))):
        out.inlet_c = watts(temp.get("Reading"))


def psu_ok(status: Any) -> tuple[Optional[bool], str]:
    """(ok, text) from a Redfish Status: absent, offline, disabled, Warning or Critical -> False;
    Health OK, or Enabled/standby without a Health -> True; no Status -> unknown."""
    if not isinstance(status, Mapping) or not status:
        return None, "no Status"
    state = status.get("State")
    health = status.get("Health") or status.get("HealthRollup")
    text = ", ".join(f"{k} {v}" for k, v in (("State", state), ("Health", health)) if v)
    if state in _OFF_STATES or health in _BAD_HEALTH:
        return False, text
    if health == "OK" or state in ("Enabled", "StandbySpare", "StandbyOffline"):
        return True, text
    return None, text


def _redundancy_ok(group: Doc) -> Optional[bool]:
    ok, _ = psu_ok(group.get("Status"))
    state = _obj(group, "Status").get("State")
    return None if state == "Absent" else ok


def _legacy_psus(raw: Any) -> list[PsuReading]:
    out = []
    feeds = []
    for ps in _list(raw):
        ok, text = psu_ok(ps.get("Status"))
        bay = _obj(ps, "Oem", "Hpe").get("BayNumber")
        label = psu_label(_service_label(ps), str(ps.get("Name", "")),
                          f"PSU{bay}" if isinstance(bay, int) else "",
                          str(ps.get("MemberId", "")), str(ps.get("Id", "")))
        power_in = watts(ps.get("PowerInputWatts"))
        rated_in = _obj(ps, "Oem", "Dell", "DellPowerSupplyView").get("Range1MaxInputPowerWatts")
        if power_in is not None and power_in == watts(rated_in):
            power_in = None  # Dell: the rating, not a reading
        out_w = watts(ps.get("PowerOutputWatts"))
        out.append(PsuReading(label or str(ps.get("Name", "PSU")), ok, power_in,
                              out_w if out_w is not None else watts(ps.get("LastPowerOutputWatts")),
                              watts(ps.get("PowerCapacityWatts")), text))
        readings = [power_in, out_w, watts(ps.get("LastPowerOutputWatts")),
                    watts(ps.get("LineInputVoltage"))]
        feeds.append(_Feed(any(k in ps for k in _LEGACY_FEED),
                           any(v is not None and v > 0 for v in readings)))
    return _unique(_no_input(out, feeds))


def _subsystem_psus(supplies: Mapping[str, Doc], metrics: Mapping[str, Doc]) -> tuple[PsuReading, ...]:
    out = []
    feeds = []
    for oid in sorted(set(supplies) | set(metrics)):
        ps, m = supplies.get(oid, {}), metrics.get(oid, {})
        segment = oid.rsplit("/", 1)[-1]
        label = psu_label(_service_label(ps), str(ps.get("Name", "")), str(ps.get("Id", "")), segment)
        ok, text = psu_ok(ps.get("Status")) if ps else (None, "")
        out.append(PsuReading(label or segment, ok, _reading_of(m.get("InputPowerWatts")),
                              _reading_of(m.get("OutputPowerWatts")),
                              watts(ps.get("PowerCapacityWatts")), text))
        readings = [_reading_of(m.get(k)) for k in _METRICS_FEED]
        feeds.append(_Feed(bool(m), any(v is not None and v > 0 for v in readings)))
    return tuple(sorted(_unique(_no_input(out, feeds)), key=lambda p: label_order(p.name)))


def _no_input(psus: list[PsuReading], feeds: list[_Feed]) -> list[PsuReading]:
    """A PSU that says OK without any live reading, where readings exist, becomes unknown (named)."""
    measured = any(f.fields or f.live for f in feeds)
    out = []
    for p, f in zip(psus, feeds, strict=True):
        if p.ok is True and measured and not f.live:
            why = f"{p.status}; {NO_INPUT}" if p.status else NO_INPUT
            p = PsuReading(p.name, None, p.power_in_w, p.power_out_w, p.capacity_w, why)
        out.append(p)
    return out


def _service_label(ps: Doc) -> str:
    return str(_obj(ps, "Location", "PartLocation").get("ServiceLabel", ""))


def _reading_of(raw: Any) -> Optional[float]:
    return watts(raw.get("Reading")) if isinstance(raw, Mapping) else None


def _unique(psus: list[PsuReading]) -> list[PsuReading]:
    """Labels made unique ("PSU1", "PSU1#2") so two PSUs never share one."""
    seen: dict[str, int] = {}
    out = []
    for p in psus:
        seen[p.name] = seen.get(p.name, 0) + 1
        out.append(p if seen[p.name] == 1 else PsuReading(f"{p.name}#{seen[p.name]}", p.ok,
                   p.power_in_w, p.power_out_w, p.capacity_w, p.status))
    return out
