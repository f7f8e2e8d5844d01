"""Preset fio job sets, selectable by name in a suite (`preset: checkpoint`), for the fio kind.

Each preset is a list of ordinary fio jobs (README "Preset job sets" shows their fio options):

- checkpoint: one writer per GPU, each a sequential 1 MiB buffered write of `checkpoint_size`,
  fsync at the end (as torch.save then fsync does). fio counts the final fsync in the job's
  runtime, so fio.persist_time is the time until the checkpoint is durable and fio.bw its rate.
- small-files: `workers` readers, each over `files` files of `file_size`, one whole-file read per
  I/O, files picked at random, one file open at a time (open/read/close each: metadata-heavy);
  fio.iops of this job is files read per second. Needs a directory target.
- dataloader: `workers` readers of random `record_size` records (or sizes up to `record_max`)
  at queue depth `iodepth`, O_DIRECT: a training input pipeline; fio.iops is records per second.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import Field, field_validator

from harness.checks.base import Params
from harness.config.numbers import WholeSeconds
from harness.units import check_size

Preset = Literal["checkpoint", "small-files", "dataloader"]
NAMES: tuple[str, ...] = ("checkpoint", "small-files", "dataloader")
CHECKPOINT_CAP_S = 3600  # fio stops a checkpoint that has not persisted within this


class PresetOptions(Params):
    """Knobs of the presets; each preset uses the ones its description names."""

    checkpoint_size: Union[int, str] = Field("1G", description="checkpoint bytes per GPU")
    gpus: Optional[int] = Field(None, ge=1, le=64, description="checkpoint writers; default: the "
                                "profile's GPU count, else the GPUs found, else 1")
    workers: int = Field(8, ge=1, le=256, description="parallel readers (small-files, dataloader)")
    runtime: WholeSeconds = Field(10, ge=1, le=3600, description="seconds (small-files, dataloader)")
    file_size: Union[int, str] = Field("64k", description="small-files: size of each file")
    files: int = Field(1024, ge=1, le=1_000_000, description="small-files: files per worker")
    record_size: Union[int, str] = Field("128k", description="dataloader: record (read) size")
    record_max: Optional[Union[int, str]] = Field(
        None, description="dataloader: largest record; sizes are then random between the two")
    iodepth: int = Field(32, ge=1, le=4096, description="dataloader: reads in flight per worker")
    data_size: Optional[Union[int, str]] = Field(
        None, description="dataloader: bytes per worker (default: 256M files, or whole devices)")

    @field_validator("checkpoint_size", "file_size", "record_size", "record_max", "data_size")
    @classmethod
    def _valid_size(cls, v: Union[str, int, None]) -> Union[str, int, None]:
        return check_size(v)


def jobs(preset: str, opts: PresetOptions, gpus: int) -> list[dict[str, Any]]:
    """The fio jobs (as FioJob fields) of a preset; `gpus` sizes the checkpoint."""
    if preset == "checkpoint":
        return [{"name": "checkpoint", "rw": "write", "bs": "1M", "iodepth": 1, "numjobs": gpus,
                 "size": opts.checkpoint_size, "direct": False, "ioengine": "psync",
                 "end_fsync": True, "time_based": False, "runtime": CHECKPOINT_CAP_S}]
    if preset == "small-files":
        return [{"name": "small_files", "rw": "read", "bs": opts.file_size, "iodepth": 1,
                 "numjobs": opts.workers, "filesize": opts.file_size, "nrfiles": opts.files,
                 "openfiles": 1, "file_service_type": "random", "direct": True,
                 "ioengine": "psync", "runtime": opts.runtime, "time_based": True}]
    if preset == "dataloader":
        job: dict[str, Any] = {"name": "dataloader", "rw": "randread", "bs": opts.record_size,
                               "iodepth": opts.iodepth, "numjobs": opts.workers, "direct": True,
                               "ioengine": "libaio", "runtime": opts.runtime, "time_based": True}
        if opts.data_size is not None:
            job["size"] = opts.data_size
        if opts.record_max is not None:
            job["bs_max"] = opts.record_max
        return [job]
    raise ValueError(f"unknown preset {preset!r}; known: {', '.join(NAMES)}")


def gpu_count(opts: PresetOptions, hardware: Any, inventory: Any) -> int:
    """Checkpoint writers: the option, else the profile's GPU count, else GPUs found, else 1."""
    if opts.gpus:
        return opts.gpus
    try:
        expected = int(((hardware or {}).get("gpu") or {}).get("count") or 0)
    except (TypeError, ValueError, AttributeError):
        expected = 0
    found = len((inventory or {}).get("gpus") or [])
    return expected or found or 1
