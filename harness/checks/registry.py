"""The explicit registry of check kinds. Adding a kind means adding it here, nowhere else."""

from __future__ import annotations

from functools import cache

from harness.checks.base import CheckKind


@cache
def kinds() -> dict[str, CheckKind]:
    """Every check kind by name (imports are deferred so `harness --help` stays fast)."""
    from harness.checks import command, fio, inventory

    return {k.name: k for k in (inventory.KIND, fio.KIND, command.KIND)}


def get(name: str) -> CheckKind:
    """The kind called `name`; KeyError when there is none."""
    return kinds()[name]
