"""The explicit registry of check kinds. Adding a kind means adding it here, nowhere else."""

from __future__ import annotations

from functools import cache

from harness.checks.base import CheckKind


@cache
def kinds() -> dict[str, CheckKind]:
    """Every check kind by name (imports are deferred so `harness --help` stays fast)."""
    from harness.checks import command, config_audit, fio, inventory, nccl, nvbandwidth, rdma

    return {k.name: k for k in (inventory.KIND, fio.KIND, command.KIND,
                                nccl.KIND, rdma.KIND, nvbandwidth.KIND, config_audit.KIND,
                                *_storage_kinds(), *_gpu_kinds())}


def _storage_kinds() -> tuple[CheckKind, ...]:
    """Drive health and software RAID (issue 9)."""
    from harness.checks import mdraid, nvme_health

    return (nvme_health.KIND, mdraid.KIND)


def _gpu_kinds() -> tuple[CheckKind, ...]:
    """GPU health and burn (issue 3)."""
    from harness.checks import gpu_burn, gpu_health

    return (gpu_health.KIND, gpu_burn.KIND)


def get(name: str) -> CheckKind:
    """The kind called `name`; KeyError when there is none."""
    return kinds()[name]
