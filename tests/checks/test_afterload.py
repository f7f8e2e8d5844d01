"""Health judged after a load as well as before (harness.checks.afterload, pure): what the load did
to each GPU, from two NVML health readings and the critical XIDs counted in the kernel log."""

from __future__ import annotations

from dataclasses import replace

from harness.checks.afterload import Reading, judge
from harness.compare.judge import judge as compare_judge
from harness.model import Outcome
from harness.platform.nvml import GpuHealth

CRIT = (79, 94, 119)
OK = GpuHealth(gpu=0, persistence=True, ecc_mode=True, ecc_volatile_uncorrected=0,
               ecc_aggregate_uncorrected=0, remap_corrected=0, remap_uncorrected=0, remap_pending=False,
               remap_failure=False,
               retired_sbe=0, retired_dbe=0, retired_pending=False, pcie_width=16, pcie_width_max=16,
               nvlink_up=18, nvlink_total=18, pcie_replays=100, nvlink_replay=0, nvlink_recovery=0,
               nvlink_crc=0, recovery_action=0)


def outcomes(before, after, seconds=600.0, lost=(), xids=(None, None)):
    metrics, found = judge(Reading((before,), xids[0]), Reading((after,), xids[1]), seconds, CRIT, lost)
    return metrics, {(f.metric, f.labels.get("counter")): (f.outcome, f.message) for f in found}


def test_a_load_that_changed_nothing_has_metrics_and_no_findings():
    metrics, found = outcomes(OK, OK)
    assert found == {}
    grown = {m.labels["counter"]: m.value for m in metrics if m.name == "gpu.health_growth"}
    assert grown["pcie_replays"] == 0
    assert [m.value for m in metrics if m.name == "gpu.recovery_action"] == [0.0]


def test_pcie_replays_fail_above_dcgms_eight_a_minute():
    _, ten_minutes = outcomes(OK, replace(OK, pcie_replays=100 + 80))  # 8 a minute over 600 s: fine
    assert ten_minutes == {}
    _, found = outcomes(OK, replace(OK, pcie_replays=100 + 81))
    outcome, msg = found[("gpu.health_growth", "pcie_replays")]
    assert outcome is Outcome.FAIL and msg.startswith("GPU 0: 81 PCIe replays (more than 8 a minute")


def test_states_that_went_bad_during_the_load_fail_with_after_the_load():
    _, found = outcomes(OK, replace(OK, remap_pending=True))
    assert found[("gpu.remap_pending", None)] == (
        Outcome.FAIL, "after the load: GPU 0: a row remap is pending: reset the GPU")
    # a link that went down under the load: fewer up than its sibling (the gate's rule, gpu_links)
    one = replace(OK, gpu=1)
    _, links = judge(Reading((OK, one)), Reading((replace(OK, nvlink_up=17), one)), 600.0, CRIT)
    (down,) = [f for f in links if f.metric == "gpu.nvlink_down"]
    assert down.labels["gpu"] == 0 and down.outcome is Outcome.FAIL
    assert down.message.startswith("after the load: GPU 0")
    # a state that was bad already before is the gate's finding, not the load's
    _, again = outcomes(replace(OK, remap_pending=True), replace(OK, remap_pending=True))
    assert again == {}


def test_uncorrectable_growth_and_critical_xids_fail_and_are_judged_by_the_one_judge():
    after = Reading((replace(OK, ecc_aggregate_uncorrected=3),), {0: 2})
    metrics, found = judge(Reading((OK,), {0: 1}), after, 60.0, CRIT)
    assert compare_judge((), metrics, found).status.value == "failed"
    msgs = sorted(f.message for f in found)
    assert msgs == ["GPU 0: 1 critical XID event(s) in the kernel log during the load (codes 79, 94, 119)",
                    "GPU 0: 3 uncorrectable ECC errors during the load (60 s)"]


def test_a_gpu_lost_by_the_load_fails_once():
    gone = GpuHealth(gpu=0, error="GPU is lost: GPU is lost")
    _, found = outcomes(OK, gone)
    assert found == {("gpu.lost", None): (
        Outcome.FAIL, "GPU 0 does not answer NVML after the load: GPU is lost: GPU is lost")}
    _, named = outcomes(OK, gone, lost=(0,))  # the telemetry named it during the load already
    assert named == {}
