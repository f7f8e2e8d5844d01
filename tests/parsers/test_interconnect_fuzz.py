"""Every interconnect parser, on any text: never an exception, and an invalid result explains itself.

Inputs are drawn from the real samples' own lines (shuffled, dropped, repeated, cut and mixed
across tools) and from arbitrary text, which is where parsers meet what they did not expect.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from samples import real_samples

from harness.parsers.registry import parsers

KINDS = ("nccl", "perftest", "ibstat", "ibv-devinfo", "nvbandwidth", "cuda-bandwidthtest", "p2p",
         "nvidia-smi-topo", "perfquery", "ethtool-stats")
DIRS = ("nccl-tests", "perftest", "ibports", "nvbandwidth", "cuda-samples", "nvidia-smi-topo", "ibcounters",
        "ethtool")
LINES = sorted({ln for d in DIRS for p in real_samples(d)
                for ln in p.read_text().splitlines()})
real_lines = st.lists(st.sampled_from(LINES), max_size=60).map("\n".join)
mangled = st.tuples(real_lines, st.integers(0, 4000), st.text(max_size=40)).map(
    lambda t: t[0][: t[1]] + t[2] + t[0][t[1]:])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(real_lines, mangled, st.text(max_size=400)), kind=st.sampled_from(KINDS))
def test_never_raises_and_invalid_means_a_problem(text, kind):
    result = parsers()[kind](text)
    assert result.kind == kind
    assert result.valid == (not result.problems)
    for m in result.metrics:
        assert m.value == m.value  # not NaN
        assert isinstance(m.unit, str) and m.unit
