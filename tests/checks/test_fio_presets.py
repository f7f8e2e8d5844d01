"""The fio presets (checkpoint, small-files, dataloader): their jobs and argv, and real short runs."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.fio import KIND
from harness.checks.fio import presets as fio_presets
from harness.checks.fio.jobs import PER_JOB_S, START_S, FioParams, build_argv, estimate_s, persist_times
from harness.parsers import fio as fio_parser

pytestmark = pytest.mark.skipif(shutil.which("fio") is None and os.environ.get("CI") != "true",
                                reason="fio not installed (apt-get install fio)")
DATA = Path(__file__).parents[1] / "data" / "fio"


def ctx(run_dir: Path, **kw) -> CheckContext:
    return CheckContext("fio", run_dir, 120, False, False, kw.pop("inventory", {}),
                        logging.getLogger("t"), **kw)


def argv_of(params: FioParams, **kw) -> list[str]:
    return build_argv(params, output="o.json", directory="/d", **kw)


def test_checkpoint_is_one_buffered_sequential_writer_per_gpu_with_a_final_fsync():
    p = FioParams.model_validate({"preset": "checkpoint", "preset_options": {"checkpoint_size": "2G"}})
    (job,) = p.jobs
    assert (job.name, job.rw, job.bs, job.numjobs, job.direct, job.end_fsync, job.time_based) == (
        "checkpoint", "write", "1M", 1, False, True, False)
    argv = argv_of(p.for_gpus(8))
    assert {"--numjobs=8", "--end_fsync=1", "--direct=0", "--ioengine=psync", "--bs=1048576",
            f"--size={2 * 1024 ** 3}", f"--runtime={fio_presets.CHECKPOINT_CAP_S}"} <= set(argv)
    assert "--time_based" not in argv
    assert p.for_gpus(8).jobs[0].numjobs == 8 and p.jobs[0].numjobs == 1  # params stay frozen
    fixed = FioParams.model_validate({"preset": "checkpoint", "preset_options": {"gpus": 2}})
    assert fixed.for_gpus(8).jobs[0].numjobs == 2  # an explicit count wins
    # size-bound at an assumed 1 GB/s, written sequentially: nothing laid out, nothing scattered
    assert estimate_s(p.for_gpus(8)) == pytest.approx(8 * 2 * 1024 ** 3 / 1e9 + PER_JOB_S + START_S)


def test_small_files_reads_whole_files_one_open_at_a_time():
    p = FioParams.model_validate({"preset": "small-files", "preset_options": {
        "workers": 16, "files": 500, "file_size": "128k", "runtime": 30}})
    argv = argv_of(p)
    assert {"--rw=read", "--bs=131072", "--filesize=131072", "--nrfiles=500", "--openfiles=1",
            "--file_service_type=random", "--numjobs=16", "--direct=1", "--runtime=30",
            "--time_based"} <= set(argv)
    assert not any(a.startswith("--size=") for a in argv)  # nrfiles x filesize per worker


def test_dataloader_random_records_at_queue_depth():
    p = FioParams.model_validate({"preset": "dataloader"})
    argv = argv_of(p)
    assert {"--rw=randread", "--bs=131072", "--iodepth=32", "--numjobs=8", "--ioengine=libaio",
            "--direct=1", f"--size={256 * 1024 ** 2}"} <= set(argv)
    ranged = FioParams.model_validate({"preset": "dataloader", "preset_options": {
        "record_size": "64k", "record_max": "4M"}})
    assert "--bsrange=65536-4194304" in argv_of(ranged)
    assert not any(a.startswith("--size=") for a in build_argv(p, output="o", device="/dev/x"))


@pytest.mark.parametrize("params, words", [
    ({"preset": "checkpoint", "jobs": [{"name": "a", "rw": "read"}]}, "either `preset` or `jobs`"),
    ({"preset": "burst"}, "Input should be 'checkpoint', 'small-files' or 'dataloader'"),
    ({"preset": "checkpoint", "preset_options": {"checkpoint_size": "lots"}}, "not a size"),
    ({"preset": "dataloader", "preset_options": {"workers": 0}}, "greater than or equal to 1"),
    ({"preset": "dataloader", "preset_options": {"record_size": "1M", "record_max": "64k"}},
     "bs_max \\(64k\\) is below bs \\(1M\\)"),
])
def test_bad_preset_params(params, words):
    with pytest.raises(ValidationError, match=words):
        FioParams.model_validate(params)


def test_gpu_count_comes_from_the_option_then_the_profile_then_the_node():
    opts = fio_presets.PresetOptions()
    assert fio_presets.gpu_count(opts, {"gpu": {"count": 8}}, {"gpus": [{}] * 4}) == 8
    assert fio_presets.gpu_count(opts, {"gpu": {"count": 0}}, {"gpus": [{}] * 4}) == 4
    assert fio_presets.gpu_count(opts, {}, {}) == 1
    assert fio_presets.gpu_count(fio_presets.PresetOptions(gpus=2), {"gpu": {"count": 8}}, {}) == 2


def test_persist_time_on_real_fio_output():
    # fio 3.33 output captured here: a time-based write job is not a checkpoint, so nothing
    text = (DATA / "fio3.33_jsonplus_seqread_seqwrite_stonewall.json").read_text()
    p = FioParams.model_validate({"jobs": [{"name": "seqwrite_1m", "rw": "write", "end_fsync": True}]})
    assert persist_times(p, text) == ([], [])
    assert fio_parser.totals(text)[("seqwrite_1m", "write")] == (1.003, 3832545280.0)
    size_bound = FioParams.model_validate({"jobs": [{"name": "seqwrite_1m", "rw": "write", "end_fsync": True,
                                                     "time_based": False, "size": "8G"}]})
    metrics, problems = persist_times(size_bound, text)
    assert metrics == [] and problems == [
        "job seqwrite_1m: wrote 3.57 GiB of 8 GiB within its 5 s limit; no persist time"]


# --- real short runs in a temporary directory ---------------------------------------------------

def test_checkpoint_run_reports_time_to_persist(tmp_path):
    p = FioParams.model_validate({"target": str(tmp_path), "preset": "checkpoint",
                                  "preset_options": {"checkpoint_size": "16M"}})
    c = ctx(tmp_path / "run", hardware={"gpu": {"count": 2}})
    out = KIND.run(p, c)
    assert out.problems == ()
    got = {m.name: m for m in out.metrics if m.labels["job"] == "checkpoint"}
    t, bw = got["fio.persist_time"], got["fio.bw"]
    assert t.unit == "s" and t.labels == {"job": "checkpoint", "rw": "write"} and t.value > 0
    assert bw.value == pytest.approx(2 * 16 * 1024 ** 2 / 1e9 / t.value, rel=0.02)  # 2 writers x 16 MiB
    assert "--numjobs=2" in c.tool_runs[0].argv and "--end_fsync=1" in c.tool_runs[0].argv
    assert out.details["filesystem"]["mount_point"] and out.details["filesystem"]["type"]
    assert not list(tmp_path.glob("harness-fio-*"))  # its files are gone


def test_small_files_and_dataloader_runs(tmp_path):
    for preset, opts in (("small-files", {"workers": 2, "files": 20, "runtime": 1}),
                         ("dataloader", {"workers": 2, "runtime": 1, "data_size": "8M",
                                         "iodepth": 4, "record_max": "256k"})):
        p = FioParams.model_validate({"target": str(tmp_path), "preset": preset, "preset_options": opts})
        out = KIND.run(p, ctx(tmp_path / preset))
        assert out.problems == (), preset
        iops = [m for m in out.metrics if m.name == "fio.iops"]
        assert len(iops) == 1 and iops[0].value > 0 and iops[0].labels["rw"] == "read"
