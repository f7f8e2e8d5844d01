"""Check kind `mdraid`: Linux software RAID health from /proc/mdstat.

Per array: degraded, missing and failed members, spares, and the progress of a running
resync/recovery (parsers/mdstat). `arrays` narrows the check to some arrays. Without the md
driver or without arrays the check is skipped, unless `arrays` names some: then it errors.
The text read is kept as raw/<check>/mdstat.txt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from pydantic import Field

from harness import catalog
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, Params, PlannedCommand
from harness.errors import HarnessError, SkipCheck
from harness.fsutil import atomic_write_text
from harness.parsers import mdstat
from harness.platform import storage


class MdraidParams(Params):
    """Optionally, the arrays that must exist (e.g. [md0])."""

    arrays: Optional[list[str]] = Field(
        None, description="arrays to judge (e.g. md0); each must exist. Default: every array")


def plan(params: MdraidParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    return [PlannedCommand(("cat", "/proc/mdstat"), "read in-process; nothing is run")]


def run(params: MdraidParams, ctx: CheckContext) -> CheckOutput:
    text = storage.read_mdstat()
    if text is None:
        if params.arrays:
            raise HarnessError(f"arrays {', '.join(params.arrays)} expected, but /proc/mdstat is "
                               "missing (md driver not loaded)")
        raise SkipCheck("no md driver: /proc/mdstat is missing")
    ctx.raw_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(ctx.raw_dir / "mdstat.txt", text)
    parsed = mdstat.parse(text)
    arrays = [a for a in parsed.details.get("arrays", []) if not a["container"]]
    names = [a["name"] for a in arrays]
    if params.arrays:
        missing = [a for a in params.arrays if a not in names]
        if missing:
            raise HarnessError(f"md arrays {', '.join(missing)} not found in /proc/mdstat "
                               f"(present: {', '.join(names) or 'none'})")
        keep = set(params.arrays)
        metrics = tuple(m for m in parsed.metrics
                        if m.labels.get("array") in keep or m.name == "md.arrays")
    elif not arrays:
        raise SkipCheck("no md arrays in /proc/mdstat")
    else:
        metrics = parsed.metrics
    degraded = [str(m.labels["array"]) for m in metrics if m.name == "md.degraded" and m.value]
    listed = ", ".join(f"{a['name']} {a['level']} {a['status'] or ''}".strip() for a in arrays)
    summary = (f"{len(arrays)} md array(s): {listed}"
               + (f"; DEGRADED: {', '.join(degraded)}" if degraded else ""))
    return CheckOutput(metrics, parsed.problems, dict(parsed.details), summary)


KIND = CheckKind(
    name="mdraid",
    description="Linux software RAID (md) health from /proc/mdstat: degraded arrays, failed members",
    params=MdraidParams,
    metrics=catalog.subset(["md.arrays", "md.active", "md.degraded", "md.disks_missing",
                            "md.disks_failed", "md.disks_spare", "md.sync_pct"]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        loads_node=False,
    ),
)
