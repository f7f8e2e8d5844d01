"""The fio kind's jobs: params, command lines, the raw-device opt-in checks and running fio.

Shared by the single-target kind (checks/fio) and the several-devices one (checks/fio/multi).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import Field, field_validator, model_validator

from harness import siblings
from harness.checks.base import CheckContext, CheckOutput, Params
from harness.checks.fio import presets as fio_presets
from harness.config.numbers import WholeSeconds
from harness.errors import GuardRefusal, ToolError
from harness.model import Metric
from harness.numfmt import fmt_bytes, fmt_duration, fmt_value, plural
from harness.parsers import fio as fio_parser
from harness.parsers.base import last_line as _last
from harness.platform import blockdev
from harness.units import GBPS, IOPS, SECONDS, check_size, parse_size

RwMode = Literal["read", "write", "randread", "randwrite", "rw", "readwrite", "randrw",
                 "trim", "randtrim", "trimwrite"]
Engine = Literal["libaio", "io_uring", "sync", "psync", "posixaio", "mmap"]
WRITING = frozenset({"write", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite"})
MIXED = frozenset({"rw", "readwrite", "randrw"})
TRIMMING = frozenset({"trim", "randtrim", "trimwrite"})
FILE_SIZE = "256M"  # per job file when the target is a directory and `size` is not given
SLACK_S = 30.0  # start-up, file layout and shutdown, on top of the jobs' runtimes
PER_JOB_SLACK_S = 10.0
TMPDIR = "<tmpdir>"
OUTPUT_NAME = "fio.json"
DESTRUCTIVE_HINT = ("raw-device writes need `destructive: true` in the suite and "
                    "--allow-destructive on the command line")


class FioJob(Params):
    """One fio job. Sizes take fio's suffixes: k, M, G are binary (4k = 4096 bytes)."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$", description="job name (label)")
    rw: RwMode = Field(description="fio rw mode")
    bs: Union[int, str] = Field("4k", description="block size, e.g. 4k, 1M or bytes")
    iodepth: int = Field(1, ge=1, le=4096)
    numjobs: int = Field(1, ge=1, le=256, description="parallel clones, reported together")
    size: Optional[Union[int, str]] = Field(
        None, description=f"bytes per job: default {FILE_SIZE} for files, whole device for devices")
    runtime: WholeSeconds = Field(5, ge=1, le=7 * 24 * 3600, description="seconds")
    direct: bool = Field(True, description="O_DIRECT, bypassing the page cache")
    ioengine: Engine = "libaio"
    rwmixread: Optional[int] = Field(None, ge=0, le=100, description="read share of rw/randrw, %")
    time_based: bool = Field(True, description="run for `runtime` even when `size` is done")
    ramp_time: Optional[WholeSeconds] = Field(None, ge=0, le=3600, description="seconds excluded from stats")
    end_fsync: bool = Field(False, description="fsync each file when the job's writes are done")
    bs_max: Optional[Union[int, str]] = Field(
        None, description="largest block size: sizes are then random from bs to bs_max (bsrange)")
    nrfiles: Optional[int] = Field(None, ge=1, le=1_000_000, description="files per job (directories)")
    filesize: Optional[Union[int, str]] = Field(None, description="size of each of the nrfiles files")
    openfiles: Optional[int] = Field(None, ge=1, le=1_000_000, description="files open at once")
    file_service_type: Optional[Literal["random", "roundrobin", "sequential"]] = Field(
        None, description="how the next file is chosen when a job has several")

    @field_validator("bs", "size", "bs_max", "filesize")
    @classmethod
    def _valid_size(cls, v: Optional[Union[str, int]]) -> Optional[Union[str, int]]:
        return check_size(v)

    @model_validator(mode="after")
    def _mix_only_for_mixed(self) -> FioJob:
        if self.rwmixread is not None and self.rw not in MIXED:
            raise ValueError(f"rwmixread applies only to rw, readwrite or randrw, not {self.rw}")
        if self.bs_max is not None and parse_size(self.bs_max) < parse_size(self.bs):
            raise ValueError(f"bs_max ({self.bs_max}) is below bs ({self.bs})")
        return self

    @property
    def files(self) -> bool:
        """Whether the job needs files of its own (a directory target)."""
        return self.nrfiles is not None or self.filesize is not None

    @property
    def writes(self) -> bool:
        return self.rw in WRITING


DEFAULT_JOBS = (
    FioJob(name="randread_4k", rw="randread", bs="4k", iodepth=32),
    FioJob(name="randwrite_4k", rw="randwrite", bs="4k", iodepth=32),
    FioJob(name="seqread_1m", rw="read", bs="1M", iodepth=8),
    FioJob(name="seqwrite_1m", rw="write", bs="1M", iodepth=8),
)


class FioParams(Params):
    """Where fio runs and which jobs, one after another."""

    target: Optional[str] = Field(
        None, description="directory (a fresh subdirectory is used and removed) or block device; "
        "default: a fresh temporary directory")
    targets: Optional[Union[Literal["all-nvme"], list[str]]] = Field(
        None, description="several block devices at once: `all-nvme` (every NVMe namespace the "
        "system does not use) or a list; each job runs on all of them together, one fio job "
        "per device; metrics get a `device` label")
    sibling_tolerance: Optional[float] = Field(
        0.15, gt=0, lt=1, description="with `targets`: a device more than this fraction below "
        "the median fio.bw of its siblings (3 or more) fails; null to turn off")
    jobs: list[FioJob] = Field(default_factory=lambda: list(DEFAULT_JOBS), min_length=1)
    preset: Optional[fio_presets.Preset] = Field(
        None, description="a named job set instead of `jobs`: checkpoint, small-files, dataloader")
    preset_options: fio_presets.PresetOptions = Field(
        default_factory=fio_presets.PresetOptions)  # type: ignore[arg-type]

    @model_validator(mode="before")
    @classmethod
    def _expand_preset(cls, data: Any) -> Any:
        """A preset fills `jobs` (with one checkpoint writer until the GPU count is known)."""
        if not isinstance(data, dict) or data.get("preset") is None:
            return data
        if "jobs" in data:
            raise ValueError("give either `preset` or `jobs`, not both")
        if data["preset"] not in fio_presets.NAMES:
            return data  # the field's own validation names the choices
        try:
            opts = fio_presets.PresetOptions.model_validate(data.get("preset_options") or {})
        except ValueError:
            return data  # reported by the preset_options field itself
        return {**data, "jobs": fio_presets.jobs(data["preset"], opts, opts.gpus or 1)}

    @field_validator("jobs")
    @classmethod
    def _unique_names(cls, v: list[FioJob]) -> list[FioJob]:
        seen: set[str] = set()
        for job in v:
            if job.name in seen:
                raise ValueError(f"duplicate job name {job.name!r}")
            seen.add(job.name)
        return v

    @field_validator("targets")
    @classmethod
    def _some_targets(cls, v: Optional[Union[str, list[str]]]) -> Optional[Union[str, list[str]]]:
        if isinstance(v, list):
            if not v:
                raise ValueError("targets: give at least one device, or all-nvme")
            if len(set(v)) != len(v):
                raise ValueError("targets: a device is listed twice")
        return v

    @model_validator(mode="after")
    def _one_kind_of_target(self) -> FioParams:
        if self.target is not None and self.targets is not None:
            raise ValueError("give either `target` or `targets`, not both")
        return self

    def for_gpus(self, gpus: int) -> FioParams:
        """The checkpoint preset re-sized to `gpus` writers (other params unchanged)."""
        if self.preset != "checkpoint" or self.preset_options.gpus:
            return self
        return self.model_copy(update={"jobs": [FioJob.model_validate(j) for j in fio_presets.jobs(
            self.preset, self.preset_options, gpus)]})


def budget_s(params: FioParams) -> float:
    """Expected wall time: the jobs' runtimes plus slack for layout and start-up."""
    return SLACK_S + sum(j.runtime + (j.ramp_time or 0) + PER_JOB_SLACK_S for j in params.jobs)


# What fio spends besides the jobs' runtimes, as measured on this project's machine (a VM's virtio
# disk, ext4 mounted with `discard`, fio 3.33; benchmarks/bench_estimates.py): defaults for this
# kind of disk, named in the dry run as assumed.
START_S = 0.3  # fio's own start-up and exit
PER_JOB_S = 0.4  # each job's start and teardown
LAYOUT_BPS = 200e6  # a job that reads a fresh file has fio write it whole first, buffered ...
LAYOUT_WRITE_S = 22e-6  # ... in the job's block size: 256 MiB laid out in 4k writes took 2.8 s, in 1M 1.4 s
RANDWRITE_IOPS = 10_000  # assumed random-write rate: how much of a fresh file a randwrite job writes
RANDWRITE_BPS = 300e6  # ... capped by this bandwidth for large blocks
FREE_S_PER_RUN = 0.1e-3  # a file written at random is freed a written stretch at a time: about 0.1 ms
# on an idle disk, 1-4 ms while another tenant's I/O queues with the discards (removal then dominates)
READING = frozenset({"read", "randread", "rw", "readwrite", "randrw"})


@dataclass(frozen=True)
class Estimate:
    """The parts of fio's likely wall time: the jobs themselves, laying out the files that reading
    jobs need, and removing files written at random (a fallocated file written in scattered
    blocks is freed stretch by stretch, slowly on a `discard` mount)."""

    jobs_s: float
    start_s: float
    layout_bytes: int = 0
    layout_s: float = 0.0
    scattered_files: int = 0
    removal_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.jobs_s + self.start_s + self.layout_s + self.removal_s

    def text(self) -> str:
        """'about 45 s: 18 s of jobs, 4.1 s laying out 512 MiB, 23 s removing 1 file written at
        random (assumed rates ...)' for the dry run."""
        parts = [f"{fmt_duration(self.jobs_s + self.start_s)} of jobs"]
        assumed = []
        if self.layout_bytes:
            parts.append(f"{fmt_duration(self.layout_s)} laying out {fmt_bytes(self.layout_bytes)}")
            assumed.append(f"layout {fmt_value(LAYOUT_BPS / 1e9, GBPS)}")
        if self.scattered_files:
            parts.append(f"{fmt_duration(self.removal_s)} removing {plural(self.scattered_files, 'file')} "
                         "written at random")
            assumed.append(f"random writes {fmt_value(RANDWRITE_IOPS, IOPS)}")
        why = f" (assumed for this kind of disk, idle: {', '.join(assumed)})" if assumed else ""
        return f"about {self.total_s:.0f} s: {', '.join(parts)}{why}"


def fresh_files(params: FioParams) -> bool:
    """Whether fio works on files it creates (a directory target) rather than existing devices."""
    if params.targets is not None:
        return False
    return params.target is None or not blockdev.is_block_device(params.target)


def _clone_bytes(job: FioJob) -> int:
    """Bytes of one clone's files in a directory."""
    if job.filesize is not None:
        return parse_size(job.filesize) * (job.nrfiles or 1)
    return parse_size(job.size if job.size is not None else FILE_SIZE)


def _scattered_runs(job: FioJob, clone_bytes: int) -> float:
    """Expected written stretches in a fresh file a randwrite clone leaves: fio visits each block
    once per pass (its random map), so a fraction f of the B blocks is written, in about
    B f (1 - f) stretches; a file written whole (f = 1) is one stretch again."""
    bs = parse_size(job.bs)
    blocks = max(1, clone_bytes // bs)
    rate = min(RANDWRITE_IOPS, RANDWRITE_BPS / bs) / job.numjobs
    written = blocks if not job.time_based else (job.runtime + (job.ramp_time or 0)) * rate
    f = min(1.0, written / blocks)
    return blocks * f * (1 - f)


def estimate(params: FioParams, *, files: bool) -> Estimate:
    """Likely wall time of the jobs, one after another; `files`: in a fresh directory (layout and
    removal count), else on devices (nothing is laid out or removed).

    A size-bound job (time_based false) is guessed at 1 GB/s, capped by its runtime.
    """
    jobs_s, layout_bytes, layout_s, scattered, removal_s = 0.0, 0, 0.0, 0, 0.0
    for j in params.jobs:
        run_s = float(j.runtime)
        if not j.time_based:
            size = parse_size(j.size if j.size is not None else FILE_SIZE) * j.numjobs
            run_s = min(run_s, size / 1e9)
        jobs_s += run_s + (j.ramp_time or 0) + PER_JOB_S
        if not files:
            continue
        each = _clone_bytes(j)
        if j.rw in READING:
            layout_bytes += each * j.numjobs
            layout_s += j.numjobs * (each / LAYOUT_BPS + each / parse_size(j.bs) * LAYOUT_WRITE_S)
        elif j.rw == "randwrite":
            runs = _scattered_runs(j, each)
            if runs >= 1:
                scattered += j.numjobs
                removal_s += j.numjobs * runs * FREE_S_PER_RUN
    return Estimate(jobs_s, START_S, layout_bytes, layout_s, scattered, removal_s)


def estimate_s(params: FioParams) -> float:
    """Likely wall time for the progress display and the dry run (estimate's total)."""
    return estimate(params, files=fresh_files(params)).total_s


def escape(path: str) -> str:
    return path.replace(":", "\\:")  # fio splits filename/directory lists on ':'


def build_argv(params: FioParams, *, output: str, directory: Optional[str] = None,
               device: Optional[str] = None) -> list[str]:
    """fio's argv for these jobs against a directory or a device, JSON to `output`."""
    argv = ["fio", "--output-format=json", f"--output={output}", "--group_reporting"]
    if device is not None:
        argv.append(f"--filename={escape(device)}")
        if not any(j.writes for j in params.jobs):
            argv.append("--readonly")
    elif directory is not None:
        # fio removes each job's files when the job is done: on a `discard` mount freeing a large
        # file takes a while, which is then part of fio's run (bare or not), and the files of a
        # long job list do not pile up; never on a device (it would unlink the device node)
        argv += [f"--directory={escape(directory)}", "--unlink=1"]
    for job in params.jobs:
        argv += [f"--name={job.name}", "--stonewall", *job_options(job, device=device is not None)]
    return argv


def job_options(job: FioJob, *, device: bool) -> list[str]:
    """One job's fio options after --name (sizes in bytes); `device`: whole device by default."""
    size = job.size if job.size is not None else (None if device or job.files else FILE_SIZE)
    argv = [f"--rw={job.rw}", f"--bs={parse_size(job.bs)}", f"--iodepth={job.iodepth}",
            f"--numjobs={job.numjobs}", f"--ioengine={job.ioengine}",
            f"--direct={int(job.direct)}", f"--runtime={job.runtime}"]
    if size is not None:
        argv.append(f"--size={parse_size(size)}")
    if job.time_based:
        argv.append("--time_based")
    if job.ramp_time is not None:
        argv.append(f"--ramp_time={job.ramp_time}")
    if job.rwmixread is not None:
        argv.append(f"--rwmixread={job.rwmixread}")
    if job.bs_max is not None:
        argv.append(f"--bsrange={parse_size(job.bs)}-{parse_size(job.bs_max)}")
    for key in ("nrfiles", "openfiles", "file_service_type"):
        if getattr(job, key) is not None:
            argv.append(f"--{key}={getattr(job, key)}")
    if job.filesize is not None:
        argv.append(f"--filesize={parse_size(job.filesize)}")
    if job.end_fsync:
        argv.append("--end_fsync=1")
    return argv


def own_rules(params: FioParams) -> list[siblings.SiblingRule]:
    """With `targets`: the sibling rule on fio.bw across devices (judged by compare.judge,
    listed by --dry-run)."""
    if params.targets is None or params.sibling_tolerance is None:
        return []
    return [siblings.SiblingRule("fio.bw", ("device",), params.sibling_tolerance)]


@contextmanager
def check_device_targets(params: FioParams, ctx: CheckContext, devices: Sequence[str]) -> Iterator[None]:
    """Refuse before anything runs: file-only jobs, or writes without both opt-ins and the guard.

    Writing jobs run inside the block while the guard holds every device exclusively
    (blockdev.claim), so nothing can mount or mkfs one meanwhile."""
    needs_files = [j.name for j in params.jobs if j.files]
    if needs_files:
        raise ToolError(f"fio jobs {', '.join(needs_files)} use files of their own (nrfiles/"
                        "filesize, e.g. preset small-files), which needs a directory target")
    writers = [j.name for j in params.jobs if j.writes]
    if not writers:
        yield
        return
    shown = ", ".join(devices)
    missing = [half for half, ok in (("`destructive: true` in the suite", ctx.destructive),
                                     ("--allow-destructive", ctx.allow_destructive)) if not ok]
    if missing:
        raise GuardRefusal(f"refusing to write to {shown} (jobs {', '.join(writers)}): "
                           f"missing {' and '.join(missing)}; {DESTRUCTIVE_HINT}")
    with ExitStack() as held:
        refusals = []
        for dev in devices:
            try:
                held.enter_context(blockdev.claim(dev))
            except GuardRefusal as e:
                refusals.append(str(e))
        if refusals:  # one refused device stops them all: nothing has been written yet
            raise GuardRefusal("; ".join(refusals))
        yield


def output_path(ctx: CheckContext) -> Path:
    """Where fio writes its JSON: raw/<check>/fio.json (fio-N.json for repeat N), never stale."""
    ctx.raw_dir.mkdir(parents=True, exist_ok=True)
    n = len(ctx.tool_runs) + 1
    out = ctx.raw_dir / (OUTPUT_NAME if n == 1 else f"fio-{n}.json")
    out.unlink(missing_ok=True)
    return out


def execute(params: FioParams, ctx: CheckContext, out: Path, argv: list[str], target: str,
             extra: Mapping[str, Any]) -> CheckOutput:
    ctx.progress(f"fio: {len(params.jobs)} jobs, about {estimate_s(params):.0f} s")
    res = ctx.run_tool(argv, name="fio", check_rc=False)  # a job error still leaves JSON to read
    if res.interrupted:
        raise ToolError("fio: interrupted; its process group was killed", argv=res.argv, rc=res.rc)
    try:
        text = out.read_text(errors="replace")
    except OSError:
        text = ""
    parsed = fio_parser.parse(text)
    rc = res.rc
    how = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exited with status {rc}"
    if rc != 0 and not parsed.details:  # no fio JSON at all: fio itself failed
        raise ToolError(f"fio: {how}: {_last(res.tail(600)) or 'no JSON output'}",
                        argv=res.argv, rc=res.rc, output_tail=res.tail())
    problems = list(parsed.problems)
    if rc != 0:
        problems.append(f"fio {how}: {_last(res.tail(600))}")
    if any("error 22" in p for p in problems) and any(j.direct for j in params.jobs):
        problems.append("error 22 with direct: true often means the file system has no O_DIRECT; "
                        "set direct: false or use another target")
    persisted, short = persist_times(params, text)
    problems += short
    details = {"target": target, "fio_version": parsed.details.get("fio_version"), **extra}
    metrics = (*parsed.metrics, *persisted)
    return CheckOutput(metrics, tuple(problems), details, _summary(metrics))


def persist_times(params: FioParams, text: str) -> tuple[list[Metric], list[str]]:
    """fio.persist_time for size-bound write jobs with end_fsync (checkpoints), and shortfalls.

    A job named `name@device` (several targets) is matched to its job `name`.
    """
    by_name = {j.name: j for j in params.jobs}
    metrics: list[Metric] = []
    problems: list[str] = []
    for (name, rw), (runtime_s, moved) in fio_parser.totals(text).items():
        job = by_name.get(name.split("@", 1)[0])
        if job is None or rw != "write" or not job.end_fsync or job.time_based:
            continue
        if job.size is not None and moved < parse_size(job.size) * job.numjobs:
            want = parse_size(job.size) * job.numjobs
            problems.append(f"job {name}: wrote {fmt_bytes(moved)} of {fmt_bytes(want)} within "
                            f"its {job.runtime} s limit; no persist time")
            continue
        metrics.append(Metric("fio.persist_time", runtime_s, SECONDS, {"job": name, "rw": rw}))
    return metrics, problems




def _summary(metrics: Sequence[Any]) -> str:
    def by(name: str) -> dict[tuple[Any, Any], float]:
        return {(m.labels.get("job"), m.labels.get("rw")): m.value for m in metrics if m.name == name}

    bw, iops, persist = by("fio.bw"), by("fio.iops"), by("fio.persist_time")
    parts = [f"{job} {rw} {fmt_value(v, GBPS)} {fmt_value(iops.get((job, rw), 0), IOPS)}"
             + (f", durable after {fmt_duration(persist[(job, rw)])}" if (job, rw) in persist else "")
             for (job, rw), v in bw.items()]
    return "; ".join(parts) or "no I/O measured"
