"""The nccl check kind: params, command lines, and run+parse through real processes.

No NCCL here: a tiny executable stands in for each nccl-tests binary and prints a real
captured output from tests/data/nccl-tests. That proves our side (argv, environment, launcher
template, raw output, parse, errors); the numbers are the captured run's.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.nccl import KIND, NcclParams, build_argv, effective_env, layout
from harness.compare.judge import judge
from harness.errors import ToolError, ToolMissing

DATA = Path(__file__).parents[1] / "data" / "nccl-tests"
H100 = DATA / "all_reduce_h100_2node_16rank_oci.txt"
EIGHT_GPUS = {"gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3"} for i in range(8)]}


def fake(bin_dir: Path, name: str, sample: Path, rc: int = 0) -> Path:
    """An executable `name` that records its argv and NCCL_* environment, prints `sample`, exits rc."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    rec = bin_dir / f"{name}.argv"
    path.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{rec}"\nenv | grep "^NCCL_" | sort > "{rec}.env"\n'
                    f'cat "{sample}"\nexit {rc}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def recorded(bin_dir: Path, name: str) -> list[str]:
    return (bin_dir / f"{name}.argv").read_text().splitlines()


def ctx_for(tmp_path: Path, inventory=None, timeout_s: float = 30) -> CheckContext:
    return CheckContext("nccl", tmp_path / "run", timeout_s, destructive=False, allow_destructive=False,
                        inventory=inventory if inventory is not None else EIGHT_GPUS,
                        log=logging.getLogger("t"))


def params(**kw) -> NcclParams:
    return NcclParams.model_validate(kw)


# --- params and command lines -------------------------------------------------------------

def test_defaults_single_process_on_every_gpu():
    p = NcclParams()
    assert layout(p, EIGHT_GPUS) == (1, 8)
    (cmd,) = KIND.plan(p, EIGHT_GPUS)
    assert list(cmd.argv) == ["all_reduce_perf", "-b", "8", "-e", "17179869184", "-f", "2", "-g", "8",
                              "-n", "20", "-w", "5", "-c", "1"]
    assert cmd.note == "1 process(es) x 8 GPU(s)"
    assert KIND.needs == frozenset({"gpu"})


def test_launcher_template_one_rank_per_gpu():
    p = params(ops=["all_reduce", "all_gather"], launcher=["mpirun", "-np", "{nranks}",
               "--map-by", "ppr:{nranks}:node", "--allow-run-as-root"], minbytes="1G", maxbytes="16G",
               datatype="bfloat16", env={"NCCL_DEBUG": "WARN"}, check=False)
    cmds = KIND.plan(p, EIGHT_GPUS)
    assert [c.argv[:7] for c in cmds] == [
        ("mpirun", "-np", "8", "--map-by", "ppr:8:node", "--allow-run-as-root", f"{op}_perf")
        for op in ("all_reduce", "all_gather")]
    argv = list(cmds[0].argv)
    assert argv[argv.index("-b"):] == ["-b", "1073741824", "-e", "17179869184", "-f", "2", "-g", "1",
                                       "-n", "20", "-w", "5", "-c", "0", "-d", "bfloat16"]
    assert cmds[0].note == "8 process(es) x 1 GPU(s); env NCCL_DEBUG=WARN"


def test_explicit_ranks_and_gpus_per_rank_with_srun():
    p = params(launcher=["srun", "--ntasks={nranks}", "--gpus-per-task={gpus_per_rank}"], nranks=16,
               ngpus=1, bin_dir="/opt/nccl-tests/build")
    argv = build_argv(p, "all_reduce", *layout(p, {}))
    assert argv[:4] == ["srun", "--ntasks=16", "--gpus-per-task=1", "/opt/nccl-tests/build/all_reduce_perf"]


@pytest.mark.parametrize("kw, words", [
    ({"launcher": ["mpirun", "-np", "{hosts}"]}, "unknown placeholder '{hosts}'"),
    ({"launcher": ["sh", "-c", "echo {"]}, "unknown placeholder '{'"),
    ({"launcher": []}, "at least 1 item"),
    ({"env": {"nccl debug": "1"}}, "not environment variable names"),
    ({"ops": ["all_reduce", "all_reduce"]}, "listed twice"),
    ({"ops": ["allreduce"]}, "Input should be"),
    ({"maxbytes": "16Q"}, "not a size"),
    ({"minbytes": 0}, "positive"),
    ({"stepfactor": 1}, "greater than or equal to 2"),
    ({"datatype": "float; rm"}, "pattern"),
    ({"iters": 5, "colour": "red"}, "Extra inputs"),
])
def test_bad_params_are_refused(kw, words):
    with pytest.raises(ValidationError, match=words):
        NcclParams.model_validate(kw)


def test_effective_env_records_inherited_nccl_variables(monkeypatch):
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0,mlx5_1")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    env = effective_env(params(env={"NCCL_DEBUG": "WARN"}))
    assert env["NCCL_IB_HCA"] == "mlx5_0,mlx5_1" and env["NCCL_DEBUG"] == "WARN"


# --- run through real processes -----------------------------------------------------------

def test_run_parses_the_binary_output_and_keeps_raw_output(tmp_path):
    bins = tmp_path / "bin"
    fake(bins, "all_reduce_perf", H100)
    ctx = ctx_for(tmp_path)
    out = KIND.run(params(bin_dir=str(bins), minbytes="1G", env={"NCCL_DEBUG": "WARN"}), ctx)
    assert out.problems == ()
    assert len(out.metrics) == 42 and {m.labels["op"] for m in out.metrics} == {"all_reduce"}
    busbw = {m.labels["size"]: m.value for m in out.metrics
             if m.name == "nccl.busbw" and m.labels["placement"] == "out-of-place"}
    assert busbw[17179869184] == 464.57
    assert out.summary == "all_reduce 464.6 GB/s busbw at 16 GiB"
    assert recorded(bins, "all_reduce_perf") == ["-b", "1073741824", "-e", "17179869184", "-f", "2",
                                                 "-g", "8", "-n", "20", "-w", "5", "-c", "1"]
    assert (bins / "all_reduce_perf.argv.env").read_text() == "NCCL_DEBUG=WARN\n"
    assert out.details["env"]["NCCL_DEBUG"] == "WARN"
    assert out.details["processes"] == 1 and out.details["gpus_per_process"] == 8
    assert out.details["tests"][0]["ranks"] == 16
    (tool,) = ctx.tool_runs
    assert tool.rc == 0 and (ctx.run_dir / tool.stdout_file).read_text() == H100.read_text()


def test_each_op_runs_its_own_binary_through_the_launcher(tmp_path):
    bins = tmp_path / "bin"
    fake(bins, "all_reduce_perf", H100)
    fake(bins, "all_gather_perf", DATA / "all_gather_gb10_dgxspark_2node_with_mpirun_noise.txt")
    launcher = bins / "fake-mpirun"  # drops "-np N" and runs the rest, as mpirun would per rank
    launcher.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{bins}/launcher.argv"\nshift 2\nexec "$@"\n')
    launcher.chmod(0o755)
    p = params(ops=["all_reduce", "all_gather"], bin_dir=str(bins),
               launcher=[str(launcher), "-np", "{nranks}"])
    ctx = ctx_for(tmp_path)
    out = KIND.run(p, ctx)
    assert {m.labels["op"] for m in out.metrics} == {"all_reduce", "all_gather"}
    assert len(out.metrics) == 42 + 26 and out.problems == ()
    assert recorded(bins, "all_gather_perf")[recorded(bins, "all_gather_perf").index("-g") + 1] == "1"
    launched = (bins / "launcher.argv").read_text().splitlines()
    assert launched[:3] == ["-np", "8", str(bins / "all_gather_perf")]
    assert [Path(t.argv[0]).name for t in ctx.tool_runs] == ["fake-mpirun", "fake-mpirun"]


def test_wrong_results_fail_the_check_naming_the_size(tmp_path):
    bins = tmp_path / "bin"
    fake(bins, "all_reduce_perf", DATA / "all_reduce_rtx3090_2node_2rank_wrong_FAILED.txt")
    out = KIND.run(params(bin_dir=str(bins)), ctx_for(tmp_path))
    assert out.problems == ("all_reduce: #wrong > 0 in 54 results (first: 8 B out-of-place: 4)",
                            "all_reduce: Out of bounds values : 108 FAILED")
    # ... and a failure of the hardware, not an error of the harness: the runner judges it FAILED
    (bad,) = out.findings
    assert bad.outcome.value == "fail" and bad.labels["size"] == 8 and bad.measured == 4
    assert bad.message == ("all_reduce: wrong results in 54 of the table's rows (first: 8 B out-of-place, "
                           "4 wrong elements): data corrupted between the GPUs")
    assert judge((), out.metrics, out.findings).status.value == "failed"


def test_a_failed_run_without_rows_is_a_tool_error(tmp_path):
    bins = tmp_path / "bin"
    fake(bins, "all_reduce_perf", DATA / "all_reduce_rtx5090_2gpu_test_nccl_failure.txt", rc=1)
    with pytest.raises(ToolError, match=r"all_reduce_perf \(exit 1\): all_reduce: no result rows; "
                       r"nccl-tests reported a failure: GENOA-06: Test NCCL failure common.cu:392") as e:
        KIND.run(params(bin_dir=str(bins)), ctx_for(tmp_path))
    assert e.value.rc == 1


def test_rows_then_a_nonzero_exit_is_invalid(tmp_path):
    bins = tmp_path / "bin"
    fake(bins, "all_reduce_perf", H100, rc=3)
    out = KIND.run(params(bin_dir=str(bins)), ctx_for(tmp_path))
    assert len(out.metrics) == 42
    assert out.problems[-1].startswith("all_reduce_perf exited with status 3")


def test_missing_binary_is_a_tool_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ToolMissing, match="all_reduce_perf not found"):
        KIND.run(params(bin_dir=str(tmp_path / "empty")), ctx_for(tmp_path))


def test_fake_binaries_are_not_left_running(tmp_path):
    bins = tmp_path / "bin"
    hang = bins / "all_reduce_perf"
    bins.mkdir()
    hang.write_text(f'#!/bin/sh\necho $$ > "{bins}/pid"\nexec sleep 60\n')
    hang.chmod(0o755)
    with pytest.raises(ToolError, match="timed out"):
        KIND.run(params(bin_dir=str(bins)), ctx_for(tmp_path, timeout_s=1))
    pid = int((bins / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_an_inherited_partial_allocation_does_not_reach_the_single_process_run(tmp_path, monkeypatch):
    # a Slurm or Kubernetes allocation left CUDA_VISIBLE_DEVICES=0,1,2,3 in the harness's environment;
    # -g 8 over NVML's 8 GPUs needs all 8 visible, by UUID, in NVML's (bus) order
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    bins = tmp_path / "bin"
    path = fake(bins, "all_reduce_perf", H100)
    path.write_text(path.read_text().replace('env | grep "^NCCL_"', 'env | grep "^NCCL_\\|^CUDA_"'))
    inv = {"gpus": [{"index": i, "uuid": f"GPU-{i:08x}-fake"} for i in range(8)]}
    inv["gpus"][5]["uuid"] = None  # NVML counts it but cannot name it: not given to CUDA
    out = KIND.run(params(bin_dir=str(bins), minbytes="1G"), ctx_for(tmp_path, inv))
    env = dict(ln.split("=", 1) for ln in (bins / "all_reduce_perf.argv.env").read_text().splitlines())
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(f"GPU-{i:08x}-fake" for i in range(8) if i != 5)
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert recorded(bins, "all_reduce_perf")[recorded(bins, "all_reduce_perf").index("-g") + 1] == "7"
    assert out.details["env"]["CUDA_VISIBLE_DEVICES"].startswith("GPU-00000000-fake,")
