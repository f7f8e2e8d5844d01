"""srun step command lines and node-pair rounds for multi-node checks (pure; running them needs GPUs)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import UsageError
from harness.fleet.steps import StepSpec, blame, nccl_program, pair_rounds, srun_argv


def test_srun_argv_one_task_per_gpu_across_the_nodes():
    spec = StepSpec(("gpu001", "gpu002", "gpu003"), tasks_per_node=8, cpus_per_task=12, time_limit="10:00",
                    env={"NCCL_IB_HCA": "mlx5_0:1", "NCCL_DEBUG": "WARN"})
    argv = srun_argv(spec, nccl_program(max_bytes="8G"))
    sep = argv.index("--")
    assert argv[0] == "srun" and argv[sep + 1:] == ["all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g",
                                                    "1", "-n", "20", "-c", "1"]
    opts = argv[1:sep]
    for a in ("--nodes=3", "--nodelist=gpu[001-003]", "--ntasks-per-node=8", "--ntasks=24", "--mpi=pmix",
              "--gpus-per-task=1", "--gpu-bind=closest", "--cpus-per-task=12", "--time=10:00",
              "--kill-on-bad-exit=1", "--export=ALL,NCCL_DEBUG=WARN,NCCL_IB_HCA=mlx5_0:1"):
        assert a in opts


@pytest.mark.parametrize("env", [{"A": "x,y"}, {"A B": "1"}, {"A=B": "1"}])
def test_srun_refuses_environment_it_cannot_carry(env):
    with pytest.raises(UsageError):
        srun_argv(StepSpec(("n1",), env=env), ["true"])


def test_pair_rounds_small_fleets():
    assert pair_rounds(["a"]) == [] and pair_rounds(["a", "b"]) == [[("a", "b")]]
    rounds = pair_rounds(["a", "b", "c"])
    partners = {n: {x for r in rounds for p in r if n in p for x in p if x != n} for n in "abc"}
    assert all(len(v) == 2 for v in partners.values())


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=3, max_value=40), st.data())
def test_rounds_meet_two_partners_and_blame_finds_the_bad_node(n, data):
    nodes = [f"gpu{i:03d}" for i in range(n)]
    rounds = pair_rounds(nodes)
    for r in rounds:
        members = [x for p in r for x in p]
        assert len(members) == len(set(members))  # a node is in at most one pair per round
        assert all(a != b for a, b in r)
    partners: dict[str, set[str]] = {x: set() for x in nodes}
    for r in rounds:
        for a, b in r:
            partners[a].add(b)
            partners[b].add(a)
    assert all(len(p) >= 2 for p in partners.values())
    bad = data.draw(st.sampled_from(nodes))
    results = {p: bad not in p for r in rounds for p in r}
    suspects, links = blame(results)
    assert suspects == [bad] and links == []


def test_a_bad_link_between_good_nodes_is_blamed_on_the_link():
    rounds = pair_rounds(["a", "b", "c", "d"])
    results = {p: p != ("a", "b") for r in rounds for p in r}
    assert blame(results) == ([], [("a", "b")])
