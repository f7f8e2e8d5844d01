"""Multi-node checks as srun steps inside one allocation, and node-pair rounds (pure).

NCCL across N nodes and node-pair RDMA/NCCL rings run as `srun` steps with one task per GPU.
Pairs are tested in rounds so that every node meets at least two different partners: a node
whose every pair is slow is the bad one; a slow pair of two otherwise good nodes points at the
link between them (the idea of Google's cluster scanner). Running these needs GPUs and an RDMA
fabric; this module builds the command lines and reads the pair results, and is tested on its
own until such hardware is at hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.errors import UsageError
from harness.fleet.dispatch import fold_nodes

Pair = tuple[str, str]


@dataclass(frozen=True)
class StepSpec:
    """One srun step across `nodes`: `tasks_per_node` tasks, one GPU each."""

    nodes: tuple[str, ...]
    tasks_per_node: int = 8
    gpus_per_task: int = 1
    cpus_per_task: int | None = None
    mpi: str = "pmix"  # srun --mpi plugin the NCCL/perftest binaries were built for
    time_limit: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)  # e.g. NCCL_IB_HCA, NCCL_DEBUG


def srun_argv(spec: StepSpec, program: Sequence[str]) -> list[str]:
    """`srun ... -- program` for the step (no shell; values are separate arguments)."""
    if not spec.nodes:
        raise UsageError("a step needs at least one node")
    if spec.tasks_per_node < 1 or spec.gpus_per_task < 0:
        raise UsageError("tasks per node must be >= 1 and GPUs per task >= 0")
    for k, v in spec.env.items():
        if not k.isidentifier() or "," in v or "=" in k:
            raise UsageError(f"step environment {k}={v!r}: srun --export cannot carry it")
    argv = ["srun", f"--nodes={len(spec.nodes)}", f"--nodelist={fold_nodes(spec.nodes)}",
            f"--ntasks-per-node={spec.tasks_per_node}", f"--ntasks={len(spec.nodes) * spec.tasks_per_node}",
            f"--mpi={spec.mpi}", "--kill-on-bad-exit=1", "--label"]
    if spec.gpus_per_task:
        argv += [f"--gpus-per-task={spec.gpus_per_task}", "--gpu-bind=closest"]
    if spec.cpus_per_task:
        argv.append(f"--cpus-per-task={spec.cpus_per_task}")
    if spec.time_limit:
        argv.append(f"--time={spec.time_limit}")
    argv.append("--export=" + ",".join(["ALL", *(f"{k}={v}" for k, v in sorted(spec.env.items()))]))
    return [*argv, "--", *program]


def nccl_program(binary: str = "all_reduce_perf", min_bytes: str = "8", max_bytes: str = "16G",
                 factor: int = 2, iters: int = 20) -> list[str]:
    """nccl-tests with one GPU per task (-g 1), as srun launches one task per GPU."""
    return [binary, "-b", min_bytes, "-e", max_bytes, "-f", str(factor), "-g", "1", "-n", str(iters),
            "-c", "1"]


def pair_rounds(nodes: Sequence[str]) -> list[list[Pair]]:
    """Rounds of disjoint pairs in which every node meets >= 2 different partners (>= 3 nodes)."""
    names = list(dict.fromkeys(nodes))
    if len(names) < 2:
        return []
    partners: dict[str, set[str]] = {n: set() for n in names}
    rounds: list[list[Pair]] = []

    def add_round(order: Sequence[str]) -> None:
        busy: set[str] = set()
        pairs: list[Pair] = []
        for a in order:
            if a in busy:
                continue
            b = next((x for x in order if x != a and x not in busy and x not in partners[a]), None)
            if b is None:
                continue
            busy |= {a, b}
            partners[a].add(b)
            partners[b].add(a)
            pairs.append((a, b))
        if pairs:
            rounds.append(pairs)

    add_round(names)
    add_round(names[1:] + names[:1])
    want = min(2, len(names) - 1)
    for _ in range(len(names)):  # bounded: each round adds a partner to some lacking node
        lacking = [n for n in names if len(partners[n]) < want]
        if not lacking:
            break
        add_round(lacking + [n for n in names if n not in lacking])
    return rounds


def blame(results: Mapping[Pair, bool]) -> tuple[list[str], list[Pair]]:
    """From pair results (True: good), the suspect nodes and the suspect links.

    A node is suspect when it met >= 2 partners and every pair with it was bad. A bad pair
    with no suspect node in it is a suspect link.
    """
    pairs_of: dict[str, list[bool]] = {}
    for (a, b), ok in results.items():
        pairs_of.setdefault(a, []).append(ok)
        pairs_of.setdefault(b, []).append(ok)
    nodes = sorted(n for n, oks in pairs_of.items() if len(oks) >= 2 and not any(oks))
    links = sorted(p for p, ok in results.items() if not ok and p[0] not in nodes and p[1] not in nodes)
    return nodes, links
