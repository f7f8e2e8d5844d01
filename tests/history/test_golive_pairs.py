"""The shipped suites pair with their go-live: every check the quarterly suite's `vs: golive` drift
rules read runs in `acceptance` (and `reacceptance`) under the same id with parameters that measure
the same thing, as `harness run` plans and digests them. Which parameters count is decided once
(harness.history.series.SPAN_PARAMS): a longer fio runtime pairs, another block size does not."""

from __future__ import annotations

import pytest

from harness import config
from harness.checks.registry import kinds
from harness.history.series import comparable, params_digest
from harness.run import plan


def planned(suite: str, profile: str = "h100-sxm-8x") -> dict[str, tuple[str, set[str]]]:
    """check id -> (parameter digest, metric names) exactly as `harness run` records them."""
    loaded = config.load_suite(config.find_suite(suite), kinds())
    out = {}
    for pc in plan.build(loaded, config.load_profile(profile)):
        kind = pc.check.kind
        out[pc.id] = (params_digest(pc.check.spec.kind, pc.check.params.model_dump(mode="json"),
                                    pc.check.repeat), set(kind.metric_specs(pc.check.params)))
    return out


def golive_rules() -> list:
    loaded = config.load_suite(config.find_suite("quarterly"), kinds())
    return [r for r in loaded.suite.drift if r.vs == "golive"]


def test_quarterly_has_golive_rules_for_every_key_bandwidth():
    assert {r.metric for r in golive_rules()} >= {"nccl.busbw", "gpu.h2d_bw", "gpu.d2h_bw", "gpu.p2p_bw",
                                                  "gpu_burn.tflops", "rdma.bw_avg", "fio.iops", "fio.bw"}


@pytest.mark.parametrize("golive_suite", ["acceptance", "reacceptance"])
def test_every_golive_rule_has_a_counterpart_measuring_the_same(golive_suite: str):
    quarterly, golive = planned("quarterly"), planned(golive_suite)
    for rule in golive_rules():
        readers = [cid for cid, (_, metrics) in quarterly.items()
                   if rule.metric in metrics and rule.check in (None, cid)]
        assert readers, f"no quarterly check measures {rule.metric}"
        for cid in readers:
            assert cid in golive, f"{golive_suite} does not run {cid} ({rule.metric} vs go-live)"
            assert golive[cid][0] == quarterly[cid][0], f"{cid}: {golive_suite} measures something else"


def test_a_length_pairs_and_a_block_size_does_not():
    job = {"name": "r", "rw": "randread", "bs": "4k", "iodepth": 32, "runtime": 4, "ramp_time": 1}
    four = params_digest("fio", {"jobs": [job]})
    assert params_digest("fio", {"jobs": [{**job, "runtime": 10, "ramp_time": 2}]}) == four
    assert params_digest("fio", {"jobs": [{**job, "bs": "1M"}]}) != four
    assert params_digest("gpu_burn", {"engine": "auto", "duration": 600}) == \
        params_digest("gpu_burn", {"engine": "auto", "duration": 300})
    assert params_digest("gpu_burn", {"engine": "auto"}) != params_digest("gpu_burn", {"engine": "gpu-burn"})
    assert comparable({"iters": 20, "minbytes": "1M", "env": {"A": "1"}}) == \
        {"minbytes": "1M", "env": {"A": "1"}}
