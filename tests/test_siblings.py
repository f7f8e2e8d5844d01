"""The sibling rule: one HCA, GPU or GPU pair far off the median of its siblings."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.model import Metric, Outcome
from harness.parsers import nvbandwidth
from harness.siblings import SiblingRule, groups, judge

DATA = Path(__file__).parent / "data" / "nvbandwidth"
D2H = "nvbandwidth_v0.10.0_8x_h100_device_to_host_memcpy_ce.txt"
PCIE = "nvbandwidth_v0.8_6x_rtx_a6000_d2d_read_ce_pcie_NA_diagonal_poster_elided.txt"
PAIRS = SiblingRule("gpu.p2p_bw", ("src", "dst"), 0.10)
GPUS = SiblingRule("gpu.d2h_bw", ("gpu",), 0.10)


def hca(device: str, value: float, **labels) -> Metric:
    labels = {"test": "ib_write_bw", "size": 65536, "device": device, **labels}
    return Metric("rdma.bw_avg", value, "GB/s", labels)


def test_real_h100_d2h_gpus_all_within_ten_percent():
    metrics = nvbandwidth.parse((DATA / D2H).read_text()).metrics
    (ev,) = judge(GPUS, metrics)
    assert ev.outcome is Outcome.PASS and ev.reduce == "min"
    assert ev.labels == {"test": "device_to_host_memcpy_ce"}
    assert ev.measured == 55.18 and ev.reference == pytest.approx(55.20)  # median of the 8 cells
    assert ev.low == pytest.approx(55.20 * 0.9) and ev.high is None
    assert "slowest of 8 (by gpu) is gpu2 at 55.18 GB/s" in ev.message


def test_one_slow_gpu_in_a_real_matrix_is_named():
    text = (DATA / D2H).read_text().replace("55.25     55.25     55.26", "55.25     40.00     55.26")
    (ev,) = judge(GPUS, nvbandwidth.parse(text).metrics)
    assert ev.outcome is Outcome.FAIL and ev.measured == 40.0
    assert ev.labels == {"test": "device_to_host_memcpy_ce", "gpu": 5}
    assert ev.message.startswith("gpu5 measured 40 GB/s, 27.5 % below the median 55.2 GB/s of its "
                                 "8 siblings (by gpu); allowed 10 %")


def test_pcie_pairs_across_the_switch_pass_at_ten_but_not_at_three_percent():
    # Real 6-GPU PCIe box: 12 pairs on a shared switch at ~26.3 GB/s, 18 across at 21.8-22.7 GB/s;
    # the median (22.64) sits among the slow ones, so only the slowest of those stand out.
    metrics = nvbandwidth.parse((DATA / PCIE).read_text()).metrics
    (ev,) = judge(PAIRS, metrics)
    assert (ev.outcome, ev.measured, ev.reference) == (Outcome.PASS, 21.8, 22.64)
    assert "is gpu0/gpu5 at 21.8 GB/s" in ev.message
    fails = judge(SiblingRule("gpu.p2p_bw", ("src", "dst"), 0.03), metrics)
    assert len(fails) == 8 and all(e.outcome is Outcome.FAIL and e.measured < 22.64 * 0.97 for e in fails)
    assert {(e.labels["src"], e.labels["dst"]) for e in fails} >= {("gpu0", "gpu5"), ("gpu3", "gpu1")}


def test_groups_keep_other_labels_apart():
    ms = [hca("mlx5_0", 48), hca("mlx5_1", 47), hca("mlx5_2", 20),
          hca("mlx5_0", 10, size=2), hca("mlx5_1", 10, size=2), hca("mlx5_2", 10, size=2),
          Metric("rdma.bw_avg", 1.0, "GB/s", {"size": 65536})]  # no device label: not a sibling
    rule = SiblingRule("rdma.bw_avg", ("device",), 0.10)
    assert [len(g) for g in groups(rule, ms)] == [3, 3]
    evs = judge(rule, ms)
    assert [(e.outcome, e.labels.get("device"), e.labels.get("size")) for e in evs] == [
        (Outcome.FAIL, "mlx5_2", 65536), (Outcome.PASS, None, 2)]


def test_lower_is_better_flags_the_highest():
    lat = [Metric("gpu.p2p_lat", v, "us", {"test": "t", "src": f"gpu{i}", "dst": "gpu9"})
           for i, v in enumerate((0.82, 0.83, 0.82, 1.5))]
    (ev,) = judge(SiblingRule("gpu.p2p_lat", ("src",), 0.2, better="lower"), lat)
    assert ev.outcome is Outcome.FAIL and ev.labels["src"] == "gpu3" and ev.high == pytest.approx(0.825 * 1.2)
    assert "above the median" in ev.message


def test_warn_severity_small_groups_and_zero_medians():
    rule = SiblingRule("rdma.bw_avg", ("device",), 0.10, severity="warn")
    (ev,) = judge(rule, [hca("a", 50), hca("b", 50), hca("c", 10)])
    assert ev.outcome is Outcome.WARN and ev.severity == "warn"
    assert judge(rule, [hca("a", 50), hca("b", 10)]) == ()  # two are not enough to call one odd
    assert judge(rule, [hca("a", 0), hca("b", 0), hca("c", 0)]) == ()  # nothing to compare against


@pytest.mark.parametrize("kw", [{"tolerance": 0}, {"tolerance": 1.5}, {"vary": ()}])
def test_bad_rules_are_refused(kw):
    with pytest.raises(ValueError):
        SiblingRule(**{"metric": "rdma.bw_avg", "vary": ("device",), **kw})


def gpu(i: int, value: float, name: str = "gpu.temp_max", unit: str = "C") -> Metric:
    return Metric(name, value, unit, {"gpu": i})


def test_an_offset_rule_names_the_gpu_more_than_10_c_above_the_median():
    rule = SiblingRule("gpu.temp_max", ("gpu",), None, "lower", offset=10)
    temps = [gpu(i, t) for i, t in enumerate([71, 72, 70, 73, 84, 71, 72, 70])]
    (bad,) = judge(rule, temps)
    assert bad.outcome is Outcome.FAIL and bad.labels == {"gpu": 4} and bad.high == 81.5
    assert bad.message == ("gpu4 measured 84 C, 12.5 C above the median 71.5 C of its 8 siblings "
                           "(by gpu); allowed 10 C")
    (ok,) = judge(rule, temps[:4] + temps[5:])
    assert ok.outcome is Outcome.PASS and ok.message == ("worst of 7 (by gpu) is gpu3 at 73 C, within "
                                                         "10 C of the median 71 C")
    assert rule.describe("C") == "<= the median of its siblings + 10 C (3 or more)"


def test_a_rule_takes_a_tolerance_or_an_offset_never_both_or_neither():
    with pytest.raises(ValueError, match="not both"):
        SiblingRule("gpu.temp_max", ("gpu",), 0.1, "lower", offset=10)
    with pytest.raises(ValueError, match="not both"):
        SiblingRule("gpu.temp_max", ("gpu",), None, "lower")
    with pytest.raises(ValueError, match="positive"):
        SiblingRule("gpu.temp_max", ("gpu",), None, "lower", offset=-1)
    assert SiblingRule("gpu_burn.tflops", ("gpu",), 0.05).describe() == \
        ">= 0.95 x the median of its siblings (3 or more)"
