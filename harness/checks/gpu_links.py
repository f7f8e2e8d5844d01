"""gpu_health's NVLink verdicts, pure: links up against what the profile expects, and the NVLink fabric.

Links: NVML reports every link a GPU has, and a PCIe card without NVLink bridges (A100/H100/H200
NVL) reports all of them disabled, so a disabled link is not a fault by itself. Each GPU must have
the profile's `hardware.gpu.nvlinks` links up; without that number, as many as its best sibling (all
disabled everywhere: no NVLink in use, nothing to judge). Fabric (NVSwitch systems): NVML says a
GPU's fabric status means something only once the state is completed; then a status other than
success, or a health mask that says degraded bandwidth, unhealthy routes or an incorrect configuration
(insufficient NVLinks, ...), fails the GPU; a route or access-timeout recovery in progress warns.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.model import Finding, Metric, Outcome
from harness.platform.nvlink import FabricInfo
from harness.platform.nvml import GpuHealth
from harness.units import COUNT

SOURCE = "gpu_health"
FABRIC_COMPLETED = 3  # NVML_GPU_FABRIC_STATE_COMPLETED
_STATES = {1: "not started", 2: "in progress"}
# NVML_GPU_FABRIC_HEALTH_MASK_*: (shift, width) of each field; a 2-bit field is 1 when TRUE
_DEGRADED_BW, _ROUTE_RECOVERY, _ROUTE_UNHEALTHY, _ACCESS_TIMEOUT = 0, 2, 4, 6
_INCORRECT_CONFIG = 8  # 4 bits: 0 not supported, 1 none, else what is wrong
_CONFIG = {2: "incorrect system GUID", 3: "incorrect chassis serial number", 4: "no partition",
           5: "insufficient NVLinks", 6: "incompatible GPU firmware", 7: "invalid location",
           8: "GPU state invalid"}


def nvlink_findings(health: Sequence[GpuHealth], expected: int | None) -> list[Finding]:
    """gpu.nvlink_down per GPU with fewer links up than wanted; one passing row otherwise."""
    known = [h for h in health if not h.error and h.nvlink_total is not None]
    if not known:
        return []
    want = expected if expected is not None else max(h.nvlink_up or 0 for h in known)
    why = "the profile's hardware.gpu.nvlinks" if expected is not None else "as many as its siblings"
    if want == 0:
        note = ("the profile expects none" if expected is not None
                else "a PCIe card without NVLink bridges? set hardware.gpu.nvlinks to require links")
        return [Finding(metric="gpu.nvlink_down", outcome=Outcome.PASS, unit=COUNT, reduce="max",
                        message=f"no NVLink link up on any of {len(known)} GPUs ({note})", source=SOURCE)]
    out = [Finding(metric="gpu.nvlink_down", labels={"gpu": h.gpu}, outcome=Outcome.FAIL,
                   measured=float(want - (h.nvlink_up or 0)), unit=COUNT, high=0.0, source=SOURCE,
                   message=f"GPU {h.gpu}: {h.nvlink_up or 0} of {h.nvlink_total} NVLink links up, "
                           f"{want} expected ({why})")
           for h in known if (h.nvlink_up or 0) < want]
    if not out:
        out.append(Finding(metric="gpu.nvlink_down", outcome=Outcome.PASS, unit=COUNT, reduce="max",
                           message=f"all {len(known)} GPUs have {want} or more NVLink links up ({why})",
                           source=SOURCE))
    return out


def _field(mask: int, shift: int, width: int = 0x3) -> int:
    return (mask >> shift) & width


def fabric_problems(f: FabricInfo) -> list[tuple[Outcome, str]]:
    """What is wrong with one GPU's fabric registration (empty: healthy)."""
    if f.state != FABRIC_COMPLETED:
        return [(Outcome.WARN, f"NVLink fabric registration {_STATES.get(f.state, f'state {f.state}')}: "
                 "status and health not known yet")]
    if f.status != 0:
        return [(Outcome.FAIL, f"NVLink fabric registration failed (NVML status {f.status})")]
    out: list[tuple[Outcome, str]] = []
    if _field(f.health_mask, _DEGRADED_BW) == 1:
        out.append((Outcome.FAIL, "NVLink fabric bandwidth degraded"))
    if _field(f.health_mask, _ROUTE_UNHEALTHY) == 1:
        out.append((Outcome.FAIL, "NVLink fabric route unhealthy"))
    config = _field(f.health_mask, _INCORRECT_CONFIG, 0xF)
    if config > 1:
        out.append((Outcome.FAIL, f"NVLink fabric misconfigured: {_CONFIG.get(config, f'code {config}')}"))
    if _field(f.health_mask, _ROUTE_RECOVERY) == 1:
        out.append((Outcome.WARN, "NVLink fabric route recovery in progress"))
    if _field(f.health_mask, _ACCESS_TIMEOUT) == 1:
        out.append((Outcome.WARN, "NVLink fabric access-timeout recovery in progress"))
    return out


def fabric_findings(health: Sequence[GpuHealth]) -> tuple[list[Metric], list[Finding]]:
    """gpu.fabric_healthy per GPU on a fabric (1 healthy), a finding per problem, one passing row."""
    metrics: list[Metric] = []
    found: list[Finding] = []
    on_fabric = [h for h in health if not h.error and h.fabric is not None]
    for h in on_fabric:
        assert h.fabric is not None
        problems = fabric_problems(h.fabric)
        bad = any(o is Outcome.FAIL for o, _ in problems)
        metrics.append(Metric("gpu.fabric_healthy", 0.0 if bad else 1.0, COUNT, {"gpu": h.gpu}))
        found += [Finding(metric="gpu.fabric_healthy", labels={"gpu": h.gpu}, outcome=o,
                          severity="fail" if o is Outcome.FAIL else "warn", measured=0.0 if bad else 1.0,
                          unit=COUNT, low=1.0 if o is Outcome.FAIL else None, source=SOURCE,
                          message=f"GPU {h.gpu}: {msg}") for o, msg in problems]
    if on_fabric and not found:
        found.append(Finding(metric="gpu.fabric_healthy", outcome=Outcome.PASS, measured=1.0, unit=COUNT,
                             low=1.0, reduce="min", source=SOURCE,
                             message=f"all {len(on_fabric)} GPUs registered on the NVLink fabric, healthy"))
    return metrics, found
