"""The fio kind on several block devices at once (`targets`), with the sibling rule.

Every job of the suite runs on all devices together, one fio job per device: the first copy
carries the stonewall, each copy its own reporting group (`--new_group`), so the drives share
the moment, the CPUs and the PCIe root complex as they do in production, and each is reported
alone. Read-only (`--readonly`) unless a job writes; then both opt-ins and the data-loss guard
must pass for every device before anything runs. Metrics get a `device` label (kernel name);
a device more than `sibling_tolerance` below the median fio.bw of its siblings fails.
`targets: all-nvme` takes every NVMe namespace the running system does not use (mounted, swap,
or under a mounted md/dm stack: the OS drive) and lists the others it left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from harness.checks.base import CheckContext, CheckOutput, PlannedCommand
from harness.checks.fio import jobs as fio
from harness.checks.fio import medium as fio_medium
from harness.errors import HarnessError, SkipCheck, ToolError
from harness.model import Metric
from harness.platform import blockdev, nvme, storage

SEP = "@"  # job name and device in fio's job name: randread_4k@nvme0n1


def resolve(params: fio.FioParams) -> tuple[list[str], list[dict[str, Any]]]:
    """The devices to run on (real paths) and, for all-nvme, those left out with the reason."""
    if params.targets == "all-nvme":
        chosen, excluded = [], []
        for dev in nvme.namespace_devices():
            why = storage.system_use(dev)
            if why:
                excluded.append({"device": dev, "why": why})
            else:
                chosen.append(dev)
        return chosen, excluded
    devices: list[str] = []
    for given in params.targets or []:
        if not blockdev.is_block_device(given):
            raise ToolError(f"fio targets: {given} is not a block device")
        real = str(blockdev.resolve(given))
        if real in devices or Path(real).name in {Path(d).name for d in devices}:
            raise ToolError(f"fio targets: {given} is {real}, which is listed already")
        devices.append(real)
    return devices, []


def build_argv(params: fio.FioParams, *, output: str, devices: Sequence[str]) -> list[str]:
    """fio's argv: each job on every device at once, one reporting group per device."""
    argv = ["fio", "--output-format=json", f"--output={output}", "--group_reporting"]
    if not any(j.writes for j in params.jobs):
        argv.append("--readonly")
    for job in params.jobs:
        for k, dev in enumerate(devices):
            argv += [f"--name={job.name}{SEP}{Path(dev).name}", *(["--stonewall"] if k == 0 else []),
                     "--new_group", f"--filename={fio.escape(dev)}",
                     *fio.job_options(job, device=True)]
    return argv


def plan(params: fio.FioParams, output: str) -> Sequence[PlannedCommand]:
    """The command line for the devices as they are now (all-nvme is resolved on the spot)."""
    try:
        devices, excluded = resolve(params)
    except ToolError as e:
        return [PlannedCommand(("fio",), f"cannot resolve targets: {e}")]
    left = f"; left out (in system use): {', '.join(e['device'] for e in excluded)}" if excluded else ""
    if not devices:
        return [PlannedCommand(("fio",), f"no device to run on (targets: {params.targets}){left}")]
    writes = any(j.writes for j in params.jobs)
    note = ("writes to the raw devices: destroys their data" if writes else "read-only on the devices")
    argv = build_argv(params, output=output, devices=devices)
    rule = (f"; sibling rule: fio.bw within {params.sibling_tolerance:.0%} of the median"
            if params.sibling_tolerance is not None and len(devices) >= 3 else "")
    return [PlannedCommand(tuple(argv), f"{note}; {len(devices)} devices at once; "
                           f"about {fio.estimate_s(params):.0f} s{rule}{left}")]


def run(params: fio.FioParams, ctx: CheckContext) -> CheckOutput:
    """Run every job on all devices together; per-device metrics (fio.own_rules
    adds the sibling rule across devices)."""
    devices, excluded = resolve(params)
    if not devices:
        _nothing_to_run(params, ctx, excluded)
    with fio.check_device_targets(params, ctx, devices):  # the guard holds them while fio runs
        out = fio.output_path(ctx)
        ctx.progress(f"fio on {len(devices)} devices at once")
        extra = {"devices": [blockdev.describe(d) for d in devices], "excluded": excluded}
        result = fio.execute(params, ctx, out, build_argv(params, output=str(out), devices=devices),
                             ", ".join(devices), extra)
    metrics = tuple(relabel(m) for m in result.metrics)
    checked = CheckOutput(metrics, result.problems, result.details, summary(metrics))
    return fio_medium.flag(checked, fio_medium.device_problems(devices))


def relabel(m: Metric) -> Metric:
    """job=randread_4k@nvme0n1 -> job=randread_4k, device=nvme0n1."""
    job, sep, dev = str(m.labels.get("job", "")).partition(SEP)
    if not sep:
        return m
    return Metric(m.name, m.value, m.unit, {**m.labels, "job": job, "device": dev})


def summary(metrics: Sequence[Metric]) -> str:
    """Per job and direction: the slowest device and the spread."""
    groups: dict[tuple[str, str], list[Metric]] = {}
    for m in metrics:
        if m.name == "fio.bw":
            groups.setdefault((str(m.labels.get("job")), str(m.labels.get("rw"))), []).append(m)
    parts = []
    for (job, rw), ms in groups.items():
        lo, hi = min(ms, key=lambda m: m.value), max(ms, key=lambda m: m.value)
        parts.append(f"{job} {rw}: {len(ms)} devices {lo.value:.2f}-{hi.value:.2f} GB/s "
                     f"(slowest {lo.labels.get('device')})")
    return "; ".join(parts) or "no I/O measured"


def _nothing_to_run(params: fio.FioParams, ctx: CheckContext, excluded: list[dict[str, Any]]) -> NoReturn:
    if excluded:
        raise SkipCheck("no NVMe data drive: every NVMe namespace is in system use ("
                        + "; ".join(w for e in excluded for w in e["why"]) + ")")
    expected = ctx.hardware.get("nvme_count")
    if expected:
        raise HarnessError(f"profile expects {expected} NVMe devices, found none in /sys/class/block")
    raise SkipCheck("no NVMe devices")
