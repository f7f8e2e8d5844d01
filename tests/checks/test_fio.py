"""The fio check kind with the real fio: params, plan, run, raw output and clean-up."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.fio import KIND
from harness.checks.fio.jobs import DEFAULT_JOBS, FioParams, budget_s, build_argv
from harness.errors import HarnessError, ToolError, ToolTimeout

pytestmark = pytest.mark.skipif(shutil.which("fio") is None and os.environ.get("CI") != "true",
                                reason="fio not installed (apt-get install fio)")

QUICK = [dict(j.model_dump(exclude_none=True), runtime=1, size="16M") for j in DEFAULT_JOBS]
UNITS = {"fio.iops": "IOPS", "fio.bw": "GB/s", "fio.clat_mean": "us", "fio.clat_p50": "us",
         "fio.clat_p99": "us", "fio.clat_p999": "us"}
DIRECTION = {"randread_4k": "read", "randwrite_4k": "write", "seqread_1m": "read",
             "seqwrite_1m": "write"}


def ctx_for(run_dir: Path, timeout_s: float = 60, **kw) -> CheckContext:
    kw.setdefault("destructive", False)
    kw.setdefault("allow_destructive", False)
    return CheckContext("fio", run_dir, timeout_s, inventory={}, log=logging.getLogger("t"), **kw)


def params(**kw) -> FioParams:
    kw.setdefault("jobs", QUICK)
    return FioParams.model_validate(kw)


# --- params and plan (no fio run) ---------------------------------------------------------

def test_defaults_are_the_four_quick_jobs():
    p = FioParams()
    assert p.target is None
    assert [(j.name, j.rw, j.bs, j.iodepth, j.runtime, j.direct, j.ioengine) for j in p.jobs] == [
        ("randread_4k", "randread", "4k", 32, 5, True, "libaio"),
        ("randwrite_4k", "randwrite", "4k", 32, 5, True, "libaio"),
        ("seqread_1m", "read", "1M", 8, 5, True, "libaio"),
        ("seqwrite_1m", "write", "1M", 8, 5, True, "libaio"),
    ]
    assert budget_s(p) >= 20


@pytest.mark.parametrize("job, words", [
    ({"name": "a", "rw": "randread", "bs": "4q"}, "not a size: '4q'"),
    ({"name": "a", "rw": "randread", "bs": 0}, "positive"),
    ({"name": "a", "rw": "randread", "iodepth": 0}, "greater than or equal to 1"),
    ({"name": "a", "rw": "randread", "rwmixread": 70}, "rwmixread applies only"),
    ({"name": "a", "rw": "scribble"}, "Input should be"),
    ({"name": "a", "rw": "read", "ioengine": "windowsaio"}, "Input should be"),
    ({"name": "a b", "rw": "read"}, "pattern"),
    ({"name": "a", "rw": "read", "colour": "red"}, "Extra inputs"),
])
def test_bad_job_params_are_rejected(job, words):
    with pytest.raises(ValidationError, match=words):
        FioParams.model_validate({"jobs": [job]})


def test_duplicate_job_names_are_rejected():
    with pytest.raises(ValidationError, match="duplicate job name"):
        FioParams.model_validate({"jobs": [{"name": "a", "rw": "read"}, {"name": "a", "rw": "write"}]})


def test_plan_is_one_fio_command_with_output_and_stonewalls():
    (cmd,) = KIND.plan(FioParams(), {})
    argv = list(cmd.argv)
    assert argv[:6] == ["fio", "--output-format=json", "--output=<raw_dir>/fio.json",
                        "--group_reporting", "--directory=<tmpdir>", "--unlink=1"]
    assert argv.count("--stonewall") == 4 and argv.count("--time_based") == 4
    i = argv.index("--name=randread_4k")
    assert argv[i:i + 10] == ["--name=randread_4k", "--stonewall", "--rw=randread", "--bs=4096",
                              "--iodepth=32", "--numjobs=1", "--ioengine=libaio", "--direct=1",
                              "--runtime=5", f"--size={256 * 1024 * 1024}"]
    assert "--readonly" not in argv


def test_plan_in_a_directory_and_mixed_job_options(tmp_path):
    p = params(target=str(tmp_path), jobs=[{"name": "mix", "rw": "randrw", "rwmixread": 70,
                                            "ramp_time": 2, "time_based": False, "numjobs": 4}])
    (cmd,) = KIND.plan(p, {})
    assert f"--directory={tmp_path}/<tmpdir>" in cmd.argv
    assert {"--rwmixread=70", "--ramp_time=2", "--numjobs=4"} <= set(cmd.argv)
    assert "--time_based" not in cmd.argv


def test_device_argv_is_readonly_only_for_read_jobs():
    reads = params(jobs=[{"name": "r", "rw": "randread"}])
    writes = params(jobs=[{"name": "r", "rw": "randread"}, {"name": "w", "rw": "write"}])
    ro = build_argv(reads, output="o.json", device="/dev/x:1")
    rw = build_argv(writes, output="o.json", device="/dev/x:1")
    assert "--readonly" in ro and "--readonly" not in rw
    assert "--filename=/dev/x\\:1" in ro  # ':' separates fio file names; it must be escaped
    assert not any(a.startswith("--size") for a in ro)  # whole device unless size is given
    assert "--unlink=1" not in ro + rw  # fio would unlink the device node itself


# --- real runs ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    target = tmp_path_factory.mktemp("target")
    ctx = ctx_for(run_dir)
    out = KIND.run(params(target=str(target)), ctx)
    return out, ctx, run_dir, target


def test_run_produces_every_metric_with_units_and_labels(quick_run):
    out, _ctx, _run_dir, _target = quick_run
    assert out.problems == ()
    got = {(m.name, m.labels["job"], m.labels["rw"]) for m in out.metrics}
    want = {(name, job, rw) for job, rw in DIRECTION.items() for name in UNITS}
    assert got == want
    for m in out.metrics:
        assert m.unit == UNITS[m.name]
        assert set(m.labels) == {"job", "rw"}
        assert m.value > 0
    assert set(KIND.metrics) == set(UNITS) | {"fio.persist_time"}  # checkpoint jobs only
    assert out.details["fio_version"].startswith("fio-3")
    assert "randread_4k read" in out.summary and re.search(r"[kMG]B/s", out.summary)  # scaled by speed


def test_run_keeps_raw_output_under_the_run_dir(quick_run):
    _out, ctx, run_dir, _target = quick_run
    (tool,) = ctx.tool_runs
    raw = run_dir / "raw" / "fio" / "fio.json"
    assert f"--output={raw}" in tool.argv and tool.argv[0] == "fio"
    assert tool.rc == 0
    assert json.loads(raw.read_text())["fio version"].startswith("fio-3")
    assert (run_dir / tool.stdout_file).is_file() and (run_dir / tool.stderr_file).is_file()


def test_run_cleans_its_files_from_the_target(quick_run):
    _out, ctx, _run_dir, target = quick_run
    assert list(target.iterdir()) == []
    assert "--unlink=1" in ctx.tool_runs[0].argv  # fio removes its own files first
    directory = next(a for a in ctx.tool_runs[0].argv if a.startswith("--directory="))
    assert Path(directory.split("=", 1)[1]).parent == target


def test_default_target_is_a_fresh_tmpdir_removed_afterwards(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    ctx = ctx_for(tmp_path / "run")
    out = KIND.run(params(jobs=[{"name": "r", "rw": "randread", "runtime": 1, "size": "16M"}]), ctx)
    assert {m.name for m in out.metrics} == set(UNITS)
    assert list(tmp.iterdir()) == []
    assert f"--directory={tmp}/harness-fio-" in " ".join(ctx.tool_runs[0].argv)


def test_missing_target_directory_is_a_clear_error(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(ToolError, match=f"fio target {missing} does not exist"):
        KIND.run(params(target=str(missing)), ctx_for(tmp_path / "run"))
    assert not missing.exists()


def test_target_that_is_a_regular_file_is_an_error(tmp_path):
    f = tmp_path / "file"
    f.write_text("keep me")
    with pytest.raises(HarnessError, match="neither a directory nor a block device"):
        KIND.run(params(target=str(f)), ctx_for(tmp_path / "run"))
    assert f.read_text() == "keep me"


def test_trim_on_files_is_an_error(tmp_path):
    with pytest.raises(ToolError, match="needs a block device"):
        KIND.run(params(target=str(tmp_path), jobs=[{"name": "t", "rw": "randtrim"}]),
                 ctx_for(tmp_path / "run"))
    assert list(tmp_path.iterdir()) == []


def test_files_removed_after_a_timeout(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    ctx = ctx_for(tmp_path / "run", timeout_s=1.5)
    job = {"name": "slow", "rw": "randwrite", "runtime": 30, "size": "16M"}
    with pytest.raises(ToolTimeout, match="timed out"):
        KIND.run(params(target=str(target), jobs=[job]), ctx)
    assert ctx.tool_runs[0].timed_out
    assert list(target.iterdir()) == []


class Interrupted(HarnessError):
    """Stands for whatever stops a run mid-tool (a signal handler's exception)."""


class InterruptedContext(CheckContext):
    """A context whose tool run is interrupted after fio has laid out its files."""

    def run_tool(self, argv, **kw):
        super().run_tool(argv, **kw)
        directory = Path(next(a for a in argv if a.startswith("--directory=")).split("=", 1)[1])
        (directory / "w.0.0").write_bytes(b"x" * 4096)  # as a fio killed before it unlinked its file
        raise Interrupted(15)


def test_files_removed_after_an_interrupt(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    ctx = InterruptedContext("fio", tmp_path / "run", 60, False, False, {}, logging.getLogger("t"))
    job = {"name": "w", "rw": "write", "runtime": 1, "size": "16M"}
    with pytest.raises(Interrupted):
        KIND.run(params(target=str(target), jobs=[job]), ctx)
    assert list(target.iterdir()) == []


def test_job_error_inside_fio_json_is_a_problem_not_a_metric(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    job = {"name": "r", "rw": "read", "runtime": 1, "size": "16M", "bs": "3"}  # 3 B with O_DIRECT
    out = KIND.run(params(target=str(target), jobs=[job]), ctx_for(tmp_path / "run"))
    assert out.metrics == ()
    assert out.problems[0] == "job r: error 22 (Invalid argument)"
    assert any(p.startswith("fio exited with status 1") for p in out.problems)
    assert any("O_DIRECT" in p for p in out.problems)
    assert list(target.iterdir()) == []


class BadOptionContext(CheckContext):
    """Hands fio an option it does not know, so fio exits before writing any JSON."""

    def run_tool(self, argv, **kw):
        return super().run_tool([*argv, "--no-such-option=1"], **kw)


def test_fio_failure_without_json_is_a_tool_error(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    ctx = BadOptionContext("fio", tmp_path / "run", 60, False, False, {}, logging.getLogger("t"))
    with pytest.raises(ToolError, match=r"fio: exited with status 1: .*unrecognized option") as err:
        KIND.run(params(target=str(target)), ctx)
    assert err.value.rc == 1 and err.value.argv[0] == "fio"
    assert list(target.iterdir()) == []


def test_repeated_runs_keep_every_raw_output(tmp_path):
    ctx = ctx_for(tmp_path / "run")
    p = params(target=str(tmp_path), jobs=[{"name": "r", "rw": "read", "runtime": 1, "size": "16M"}])
    KIND.run(p, ctx)
    KIND.run(p, ctx)
    raw = tmp_path / "run" / "raw" / "fio"
    assert {"fio.json", "fio-2.json"} <= {f.name for f in raw.iterdir()}
    assert [a for a in ctx.tool_runs[1].argv if a.startswith("--output=")] == [f"--output={raw}/fio-2.json"]
