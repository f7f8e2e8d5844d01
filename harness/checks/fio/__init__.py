"""Check kind `fio`: storage IOPS, bandwidth and completion latency with fio.

One fio invocation runs the jobs one after another (stonewall), JSON to a file under the
run's raw directory. Targets: a fresh temporary directory (default), a fresh subdirectory
of a given directory (always removed afterwards; a mounted array or filesystem is named in
the details), a block device, or with `targets` several devices at once (checks/fio/multi);
params, command lines and running fio live in checks/fio/jobs.
Writing to a raw device needs both opt-ins (suite `destructive: true` and --allow-destructive)
and a device the data-loss guard (platform/blockdev) finds blank and unused. `preset` picks a
named job set (checks/fio/presets).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import catalog
from harness.checks import needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, PlannedCommand
from harness.checks.fio import medium as fio_medium
from harness.checks.fio import multi as fio_multi
from harness.checks.fio import presets as fio_presets
from harness.checks.fio.jobs import (
    FILE_SIZE,
    OUTPUT_NAME,
    TMPDIR,
    TRIMMING,
    FioParams,
    build_argv,
    check_device_targets,
    estimate_s,
    execute,
    output_path,
    own_rules,
)
from harness.errors import ToolError
from harness.platform import blockdev, scratch, storage


def plan(params: FioParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    """The fio command line; the temporary directory is shown as <tmpdir>."""
    params = params.for_gpus(fio_presets.gpu_count(params.preset_options, {}, inventory))
    output = f"<raw_dir>/{OUTPUT_NAME}"
    if params.targets is not None:
        return fio_multi.plan(params, output)
    t = params.target
    if t is not None and blockdev.is_block_device(t):
        dev = str(blockdev.resolve(t))
        writes = any(j.writes for j in params.jobs)
        note = "writes to the raw device: destroys its data" if writes else "read-only on a device"
        argv = build_argv(params, output=output, device=dev)
    else:
        where = TMPDIR if t is None else f"{t.rstrip('/')}/{TMPDIR}"
        note = "files in a fresh directory, removed afterwards"
        argv = build_argv(params, output=output, directory=where)
    return [PlannedCommand(tuple(argv), f"{note}; about {estimate_s(params):.0f} s")]


def run(params: FioParams, ctx: CheckContext) -> CheckOutput:
    """Run the jobs against the target and return per-job, per-direction metrics."""
    params = params.for_gpus(fio_presets.gpu_count(params.preset_options, ctx.hardware, ctx.inventory))
    if params.targets is not None:
        return fio_multi.run(params, ctx)
    t = params.target
    if t is not None and blockdev.is_block_device(t):
        return _run_device(params, ctx, str(blockdev.resolve(t)))
    if t is None:
        parent = Path(tempfile.gettempdir())
    else:
        parent = Path(t)
        if not parent.exists():
            raise ToolError(f"fio target {t} does not exist (give an existing directory or a "
                            "block device)")
        if not parent.is_dir():
            raise ToolError(f"fio target {t} is neither a directory nor a block device")
    trims = [j.name for j in params.jobs if j.rw in TRIMMING]
    if trims:
        raise ToolError(f"fio jobs {', '.join(trims)} trim, which needs a block device target")
    with scratch.scratch_dir("fio", parent, ctx.log) as work:
        mount = storage.mount_of(work)
        extra: dict[str, Any] = {"directory": str(work)}
        if mount is not None:  # which filesystem (or md array, or parallel filesystem) was measured
            extra["filesystem"] = {"mount_point": mount.mount_point, "type": mount.fstype,
                                   "source": mount.source}
        out = output_path(ctx)
        result = execute(params, ctx, out, build_argv(params, output=str(out), directory=str(work)),
                         str(t if t is not None else work), extra)
        return fio_medium.flag(result, fio_medium.directory_problems(params.jobs, str(work), FILE_SIZE))


def _run_device(params: FioParams, ctx: CheckContext, device: str) -> CheckOutput:
    with check_device_targets(params, ctx, [device]):
        out = output_path(ctx)
        result = execute(params, ctx, out, build_argv(params, output=str(out), device=device), device,
                         {"device": blockdev.describe(device)})
    return fio_medium.flag(result, fio_medium.device_problems([device]))


KIND = CheckKind(
    name="fio",
    description="storage IOPS, bandwidth and latency with fio (files or, opted in, a raw device)",
    params=FioParams,
    metrics=catalog.subset(["fio.iops", "fio.bw", "fio.clat_mean", "fio.clat_p50",
                            "fio.clat_p99", "fio.clat_p999", "fio.persist_time"]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        needs=frozenset({"fio"}),
        estimate_s=estimate_s,
        own_rules=own_rules,
        loads_node=True,
        requires=(needs.tool("fio"),),
    ),
)
