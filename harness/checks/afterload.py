"""GPU health judged after a load as well as before: what the load did to each GPU. Pure.

The runner's telemetry hook (harness.run.sampler) reads NVML's health facts (platform/nvml
GpuHealth) and the kernel log's XIDs just before and just after every check that loads the node,
and this module turns the two readings into metrics and findings, judged by compare.judge with the
check's own:

* counters that grew (`gpu.health_growth`, label `counter`): uncorrectable ECC errors (volatile or
  aggregate), rows remapped for uncorrectable errors and pages retired for double-bit errors fail;
  PCIe replays fail above DCGM's limit of 8 per minute (dcgm's DCGM_LIMIT_MAX_PCIREPLAY_RATE, "the
  maximum recommended by RM"); an NVLink recovery (the link retrained: a flapping link) fails, and
  NVLink CRC and replay errors warn; new XIDs of the critical set fail their GPU;
* NVML's GPU recovery action (`gpu.recovery_action`) other than none fails, naming the action;
* any fact the gpu_health gate fails (a pending or failed row remap, a pending page retirement,
  fewer NVLinks up than the GPU's siblings, the NVLink fabric, ...) that was fine before the load
  fails, with "after the load";
* a GPU that answered before and does not after fails (`gpu.lost`), unless the telemetry already
  named it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from harness.checks import gpu_health, gpu_links
from harness.model import Finding, Metric, Outcome
from harness.platform import nvml
from harness.units import COUNT

SOURCE = "after the load"
PCIE_REPLAYS_PER_MIN = 8.0  # DCGM_LIMIT_MAX_PCIREPLAY_RATE
COUNTED = ("gpu.ecc_uncorrected", "gpu.retired_pages")  # judged as growth below, not as a state


@dataclass(frozen=True)
class Reading:
    """One reading of the node's GPU health: NVML's facts and the critical XIDs per GPU so far
    (None when the kernel log could not be read)."""

    health: tuple[nvml.GpuHealth, ...]
    xids: Mapping[int, int] | None = None


def _growth(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else max(0, b - a)


def _counters(a: nvml.GpuHealth, b: nvml.GpuHealth) -> dict[str, int | None]:
    ecc = [x for x in (_growth(a.ecc_volatile_uncorrected, b.ecc_volatile_uncorrected),
                       _growth(a.ecc_aggregate_uncorrected, b.ecc_aggregate_uncorrected)) if x is not None]
    return {"ecc_uncorrected": max(ecc) if ecc else None,
            "remapped_uncorrectable": _growth(a.remap_uncorrected, b.remap_uncorrected),
            "remapped_correctable": _growth(a.remap_corrected, b.remap_corrected),
            "retired_dbe": _growth(a.retired_dbe, b.retired_dbe),
            "retired_sbe": _growth(a.retired_sbe, b.retired_sbe),
            "pcie_replays": _growth(a.pcie_replays, b.pcie_replays),
            "nvlink_recovery": _growth(a.nvlink_recovery, b.nvlink_recovery),
            "nvlink_crc": _growth(a.nvlink_crc, b.nvlink_crc),
            "nvlink_replay": _growth(a.nvlink_replay, b.nvlink_replay)}


def _rule(counter: str, n: int, seconds: float) -> tuple[Outcome, float | None, str] | None:
    """(outcome, the bound, what it means) for a counter that grew by n, None when n is fine."""
    if counter in ("ecc_uncorrected", "remapped_uncorrectable", "retired_dbe"):
        what = {"ecc_uncorrected": "uncorrectable ECC errors",
                "remapped_uncorrectable": "memory rows remapped for uncorrectable errors",
                "retired_dbe": "pages retired for double-bit ECC errors"}[counter]
        return (Outcome.FAIL, 0.0, what) if n else None
    if counter == "pcie_replays":
        limit = PCIE_REPLAYS_PER_MIN * max(1.0, seconds / 60.0)
        return (Outcome.FAIL, limit, f"PCIe replays (more than {PCIE_REPLAYS_PER_MIN:g} a minute: a bad "
                "link, riser or slot)") if n > limit else None
    if counter == "nvlink_recovery":
        return (Outcome.FAIL, 0.0, "NVLink recoveries (a link retrained: a flapping NVLink)") if n else None
    if counter in ("nvlink_crc", "nvlink_replay"):
        what = "NVLink CRC errors" if counter == "nvlink_crc" else "NVLink replays"
        return (Outcome.WARN, 0.0, what) if n else None
    return None


def verdicts() -> list[str]:
    """The built-in verdicts of every check that loads the node, as --dry-run lines."""
    return ["on a node with GPUs, health is read before and after this load: uncorrectable ECC errors, "
            "rows remapped or pages retired for them, an NVLink recovery, PCIe replays above "
            f"{PCIE_REPLAYS_PER_MIN:g} a minute, a new critical XID, a recovery action, a gate finding "
            "that appeared, or a GPU lost fail that GPU; NVLink CRC/replay errors warn"]


def judge(before: Reading, after: Reading, seconds: float, critical: Sequence[int],
          lost: Sequence[int] = (), names: Mapping[int, str] | None = None,
          ) -> tuple[tuple[Metric, ...], tuple[Finding, ...]]:
    """Metrics and findings of what a load of `seconds` did; `lost`: GPUs the telemetry already named;
    `names`: how a lost GPU is named ('GPU 3 (00000000:4B:00.0)')."""
    metrics: list[Metric] = []
    found: list[Finding] = []
    was = {h.gpu: h for h in before.health}
    params = gpu_health.GpuHealthParams(xid_source="none", xid_critical=list(critical))
    for b in after.health:
        a = was.get(b.gpu)
        lab: dict[str, str | int] = {"gpu": b.gpu}
        who = (names or {}).get(b.gpu, f"GPU {b.gpu}")
        if a is None or a.error:
            continue  # not readable before: the gate (or the telemetry) named it then
        if b.error:
            if b.gpu not in lost:
                found.append(Finding(metric="gpu.lost", labels=lab, outcome=Outcome.FAIL, measured=1.0,
                                     unit=COUNT, high=0.0, source=SOURCE,
                                     message=f"{who} does not answer NVML after the load: {b.error}"))
            continue
        for counter, n in _counters(a, b).items():
            if n is None:
                continue
            clab = {**lab, "counter": counter}
            metrics.append(Metric("gpu.health_growth", float(n), COUNT, clab))
            rule = _rule(counter, n, seconds)
            if rule is not None:
                outcome, bound, what = rule
                found.append(Finding(metric="gpu.health_growth", labels=clab, outcome=outcome,
                                     severity="fail" if outcome is Outcome.FAIL else "warn",
                                     measured=float(n), unit=COUNT, high=bound, source=SOURCE,
                                     message=f"{who}: {n:,} {what} during the load ({seconds:.0f} s)"))
        if b.recovery_action is not None:
            metrics.append(Metric("gpu.recovery_action", float(b.recovery_action), COUNT, lab))
            if b.recovery_action:
                why = nvml.RECOVERY_ACTIONS.get(b.recovery_action, f"action {b.recovery_action}")
                found.append(Finding(metric="gpu.recovery_action", labels=lab, outcome=Outcome.FAIL,
                                     measured=float(b.recovery_action), unit=COUNT, high=0.0, source=SOURCE,
                                     message=f"{who}: NVML asks for a recovery after the load: {why}"))
        old = {m for m, items in gpu_health.findings(a, params).items() if items}
        for metric, items in gpu_health.findings(b, params).items():
            if metric in COUNTED or metric in old:
                continue
            for issue in items:
                found.append(Finding(metric=metric, labels=lab, outcome=issue.outcome,
                                     severity="fail" if issue.outcome is Outcome.FAIL else "warn",
                                     measured=issue.measured, unit=COUNT, source=SOURCE,
                                     high=0.0 if issue.outcome is Outcome.FAIL else None,
                                     message="after the load: " + issue.message.replace(
                                         f"GPU {b.gpu}:", f"{who}:", 1)))
    found += _links(before, after, names or {})
    found += _xids(before, after, critical, names or {})
    return tuple(metrics), tuple(found)


def _gate_links(health: Sequence[nvml.GpuHealth]) -> dict[tuple[str, object], Finding]:
    """The gate's failing or warning NVLink and fabric verdicts per (metric, GPU)."""
    out = [*gpu_links.nvlink_findings(health, None), *gpu_links.fabric_findings(health)[1]]
    return {(f.metric, f.labels.get("gpu")): f for f in out
            if f.outcome in (Outcome.FAIL, Outcome.WARN) and "gpu" in f.labels}


def _links(before: Reading, after: Reading, names: Mapping[int, str]) -> list[Finding]:
    """NVLink and fabric verdicts that appeared during the load (links that went down, a fabric that
    degraded); those already there before are the gate's."""
    was = _gate_links(before.health)
    out = []
    for key, f in _gate_links([h for h in after.health if not h.error]).items():
        if key not in was:
            g = f.labels.get("gpu")
            who = names.get(g, f"GPU {g}") if isinstance(g, int) else f"GPU {g}"
            out.append(replace(f, source=SOURCE, message="after the load: " + f.message.replace(
                f"GPU {g}:", f"{who}:", 1)))
    return out


def _xids(before: Reading, after: Reading, critical: Sequence[int],
          names: Mapping[int, str]) -> list[Finding]:
    if before.xids is None or after.xids is None:
        return []
    out = []
    for g, n in sorted(after.xids.items()):
        new = n - before.xids.get(g, 0)
        if new > 0:
            out.append(Finding(metric="gpu.xid_critical", labels={"gpu": g}, outcome=Outcome.FAIL,
                               measured=float(new), unit=COUNT, high=0.0, source=SOURCE,
                               message=f"{names.get(g, f'GPU {g}')}: {new} critical XID event(s) in the "
                               f"kernel log during the load (codes {', '.join(map(str, critical))})"))
    return out
