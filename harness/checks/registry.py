"""The explicit registry of check kinds. Adding a kind means adding it here, nowhere else.

Each kind's module is imported the first time that kind is asked for, so a run of a
one-check suite does not pay for building every kind's parameter models.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from functools import cache

from harness.checks.base import CheckKind

# kind name -> module holding its KIND
MODULES: Mapping[str, str] = {
    "inventory": "harness.checks.inventory",
    "fio": "harness.checks.fio",
    "command": "harness.checks.command",
    "nccl": "harness.checks.nccl",
    "rdma": "harness.checks.rdma",
    "ib_ports": "harness.checks.ib_ports",
    "nic_ports": "harness.checks.nic_ports",
    "gpu_bandwidth": "harness.checks.gpu_bandwidth",
    "config_audit": "harness.checks.config_audit",
    "nvme_health": "harness.checks.nvme_health",
    "mdraid": "harness.checks.mdraid",
    "gpu_health": "harness.checks.gpu_health",
    "gpu_burn": "harness.checks.gpu_burn",
    "power_headroom": "harness.checks.power_headroom",
    "data_path": "harness.checks.data_path",
    "topology": "harness.checks.topology",
    "iperf3": "harness.checks.iperf3",
    "observe": "harness.checks.observe",
}


class _Kinds(Mapping[str, CheckKind]):
    """Name -> CheckKind, importing a kind's module on first access."""

    def __getitem__(self, name: str) -> CheckKind:
        return _load(MODULES[name])

    def __iter__(self) -> Iterator[str]:
        return iter(MODULES)

    def __len__(self) -> int:
        return len(MODULES)


@cache
def _load(module: str) -> CheckKind:
    kind: CheckKind = importlib.import_module(module).KIND
    return kind


_KINDS = _Kinds()


def kinds() -> Mapping[str, CheckKind]:
    """Every check kind by name; iterating values imports them all."""
    return _KINDS


def get(name: str) -> CheckKind:
    """The kind called `name`; KeyError when there is none."""
    return _KINDS[name]
