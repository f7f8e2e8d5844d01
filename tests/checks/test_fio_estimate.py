"""fio's time estimate counts what fio spends besides the jobs (issue #28: smoke said "about 20 s"
and took 45-50 s): laying out the fresh files that reading jobs need, removing files written at
random, start-up; nothing of that on devices. Asserted part by part, never timed; the real
times are benchmarks/bench_estimates.py's."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from clihelp import harness, write

from harness.checks.fio import KIND
from harness.checks.fio.jobs import (
    FREE_S_PER_RUN,
    LAYOUT_BPS,
    LAYOUT_WRITE_S,
    PER_JOB_S,
    START_S,
    FioParams,
    estimate,
    estimate_s,
    fresh_files,
)

MIB = 1024 ** 2


def one(**job: object) -> FioParams:
    return FioParams.model_validate({"jobs": [{"name": "j", "runtime": 4, **job}]})


def test_a_reading_job_lays_its_fresh_file_out_in_proportion_to_its_size():
    small = estimate(one(rw="randread", bs="1M", size="256M"), files=True)
    large = estimate(one(rw="randread", bs="1M", size="1G"), files=True)
    assert small.layout_bytes == 256 * MIB and large.layout_bytes == 1024 * MIB
    assert large.layout_s == pytest.approx(4 * small.layout_s)
    assert small.layout_s == pytest.approx(256 * MIB / LAYOUT_BPS + 256 * LAYOUT_WRITE_S)
    # fio lays out in the job's block size: the same file in 4k writes costs a syscall a block more
    four_k = estimate(one(rw="randread", bs="4k", size="256M"), files=True)
    assert four_k.layout_s == pytest.approx(256 * MIB / LAYOUT_BPS + 65536 * LAYOUT_WRITE_S)
    clones = estimate(one(rw="read", bs="1M", size="256M", numjobs=4), files=True)
    assert clones.layout_bytes == 4 * 256 * MIB and clones.layout_s == pytest.approx(4 * small.layout_s)
    assert small.total_s == pytest.approx(4 + PER_JOB_S + START_S + small.layout_s)


def test_an_existing_device_is_neither_laid_out_nor_removed():
    for rw in ("randread", "randwrite"):
        on_device = estimate(one(rw=rw, size="1G"), files=False)
        assert on_device.layout_bytes == 0 and on_device.layout_s == 0
        assert on_device.scattered_files == 0 and on_device.removal_s == 0
        assert on_device.total_s == pytest.approx(4 + PER_JOB_S + START_S)
    assert not fresh_files(FioParams.model_validate({"targets": ["/dev/nvme0n1"]}))
    assert fresh_files(FioParams()) and fresh_files(FioParams(target="/tmp"))


def test_a_file_written_at_random_counts_its_removal_and_other_writes_do_not():
    # fio fallocates a writer's fresh file without laying it out; a randwrite job writes a
    # fraction f of its B blocks (once each, fio's random map), freed later in ~B f (1 - f) stretches
    rand = estimate(one(rw="randwrite", bs="4k", size="256M"), files=True)
    assert rand.layout_bytes == 0 and rand.scattered_files == 1
    blocks = 65536
    f = 4 * 10_000 / blocks
    assert rand.removal_s == pytest.approx(blocks * f * (1 - f) * FREE_S_PER_RUN)
    assert rand.total_s == pytest.approx(4 + PER_JOB_S + START_S + rand.removal_s)
    seq = estimate(one(rw="write", bs="1M", size="256M"), files=True)
    assert (seq.layout_bytes, seq.scattered_files, seq.removal_s) == (0, 0, 0)
    laid_out = estimate(one(rw="randrw", bs="4k", size="256M"), files=True)
    assert laid_out.layout_bytes == 256 * MIB and laid_out.removal_s == 0  # written whole first
    whole = estimate(one(rw="randwrite", bs="4k", size="16M", runtime=60), files=True)
    assert whole.removal_s == 0  # a pass over every block leaves the file in one piece
    size_bound = estimate(one(rw="randwrite", bs="4k", size="256M", time_based=False), files=True)
    assert size_bound.removal_s == 0


def test_the_default_target_counts_layout_and_removal():
    p = FioParams()  # a fresh temporary directory, the four default jobs
    est = estimate(p, files=True)
    assert est.layout_bytes == 2 * 256 * MIB and est.scattered_files == 1
    assert estimate_s(p) == pytest.approx(est.total_s)
    assert estimate_s(p) > sum(j.runtime for j in p.jobs) + est.layout_s + est.removal_s


SUITE = """\
name: est
checks:
  - id: inventory
    kind: inventory
  - id: fio
    kind: fio
    repeat: 2
    params:
      jobs:
        - {name: big_read, rw: randread, bs: 1M, iodepth: 4, size: 1G, runtime: 1}
        - {name: scattered, rw: randwrite, bs: 4k, iodepth: 4, size: 64M, runtime: 1}
"""


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_the_dry_run_states_each_part_and_the_total(tmp_path: Path):
    # before: "about 2 s" for a 1 GiB layout and a scattered file, and no total
    r = harness("run", str(write(tmp_path / "est.yaml", SUITE)), "--dry-run", "--profile", "generic")
    assert r.returncode == 0, r.stdout + r.stderr
    note = re.search(r"# files in a fresh directory, removed afterwards; (.*)$", r.stdout, re.M)
    assert note, r.stdout
    params = FioParams.model_validate({"jobs": [
        {"name": "big_read", "rw": "randread", "bs": "1M", "iodepth": 4, "size": "1G", "runtime": 1},
        {"name": "scattered", "rw": "randwrite", "bs": "4k", "iodepth": 4, "size": "64M", "runtime": 1}]})
    est = estimate(params, files=True)
    assert note.group(1).startswith(f"about {est.total_s:.0f} s: ")
    assert "laying out 1 GiB" in note.group(1) and "removing 1 file written at random" in note.group(1)
    assert "assumed for this kind of disk, idle: layout 200 MB/s, random writes 10,000 IOPS" in note.group(1)
    total = re.search(r"^time +about (\d+) s in all$", r.stdout, re.M)
    assert total, r.stdout
    assert int(total.group(1)) == round(2 * est.total_s + 0.5)  # repeat 2, and the inventory's 0.5 s
    assert KIND.hooks.estimate_s is not None and KIND.hooks.estimate_s(params) == pytest.approx(est.total_s)
