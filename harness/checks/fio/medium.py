"""The fio kind's check that storage measured is storage, not memory (pure but for the reads named).

A target on tmpfs, ramfs, zram, a RAM disk, an overlay whose upper layer is in memory, or a loop
device over such a file measures RAM: 394,000 IOPS on a tmpfs pass any NVMe expectation. So does a
buffered job (direct: false) whose working set fits in the page cache: it reads back what it just
wrote, from memory. Either makes the run invalid for storage expectations (the check errors, the
numbers are kept). A buffered write that ends in an fsync (end_fsync, the checkpoint preset) is
timed to durable storage and is not flagged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Optional

from harness.checks.base import CheckOutput
from harness.platform import storage
from harness.units import parse_size

if TYPE_CHECKING:
    from harness.checks.fio.jobs import FioJob

MEMORY = "measured memory, not storage"


def working_set(job: FioJob, default_size: str) -> int:
    """Bytes a job touches on a directory target: size (or nrfiles x filesize) x numjobs."""
    if job.size is not None:
        per_job = parse_size(job.size)
    elif job.filesize is not None:
        per_job = parse_size(job.filesize) * (job.nrfiles or 1)
    else:
        per_job = parse_size(default_size)
    return per_job * job.numjobs


def cached_jobs(jobs: Sequence[FioJob], available: Optional[int], default_size: str) -> list[str]:
    """Problems for buffered jobs whose working set fits in the page cache (pure)."""
    if available is None:
        return []
    out = []
    for job in jobs:
        if job.direct or (job.writes and job.end_fsync):
            continue
        size = working_set(job, default_size)
        if size <= available:
            out.append(f"{MEMORY}: job {job.name} is buffered (direct: false) and its working set "
                       f"({size / 2**20:,.0f} MiB) fits in the page cache ({available / 2**30:,.1f} GiB "
                       "available); set direct: true, or a size larger than the memory")
    return out


def directory_problems(jobs: Sequence[FioJob], directory: str, default_size: str) -> list[str]:
    """Why fio in `directory` measures memory: the file system, then each cached job."""
    where = storage.in_memory(directory)
    out = [f"{MEMORY} (target on {where})"] if where else []
    return out + cached_jobs(jobs, storage.mem_available(), default_size)


def device_problems(devices: Sequence[str]) -> list[str]:
    """Why fio on these block devices measures memory (zram, RAM disks, loops over tmpfs files)."""
    out = []
    for dev in devices:
        where = storage.device_in_memory(dev)
        if where:
            out.append(f"{MEMORY} (target {dev} is {where})")
    return out


def flag(result: CheckOutput, problems: Sequence[str]) -> CheckOutput:
    """The result with these problems added (the run is then invalid) and named in the details."""
    if not problems:
        return result
    return replace(result, problems=(*problems, *result.problems),
                   details={**result.details, "measured_memory": list(problems)})
