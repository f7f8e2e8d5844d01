"""The gpu_bandwidth check kind with each engine.

nvbandwidth and bandwidthTest are absent here: scripts stand in for them at the process level
and print real captured output. The builtin engine runs for real (NumPy backend: host memory
standing in for GPUs) through its subprocess and parser.
"""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest
from judging import run_judged
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.gpu_bandwidth import KIND, GpuBandwidthParams
from harness.errors import ToolError
from harness.model import Outcome

DATA = Path(__file__).parents[1] / "data"
NVB = DATA / "nvbandwidth"
BY_TEST = {
    "device_to_host_memcpy_ce": NVB / "nvbandwidth_v0.10.0_8x_h100_device_to_host_memcpy_ce.txt",
    "device_to_device_memcpy_read_ce": NVB / "nvbandwidth_v0.10.0_8x_h100_d2d_memcpy_read_ce.txt",
    "device_to_device_latency_sm": NVB / "nvbandwidth_v0.10.0_8x_h100_device_to_device_latency_sm.txt",
}
H2D, D2H, WR = "host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_to_device_memcpy_write_ce"
A100_BWT = DATA / "cuda-samples" / "bandwidthTest_a100_sxm4_40gb_quick_pinned_GBps_tabs.txt"
H100S = {"gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3"} for i in range(8)]}


def executable(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fake_nvbandwidth(tmp_path: Path, rc: int = 0) -> Path:
    """Prints the captured output of the test named after -t; nothing (exit 1) for others."""
    cases = "\n".join(f'  {t}) cat "{p}" ;;' for t, p in BY_TEST.items())
    return executable(tmp_path / "nvbandwidth", f'printf "%s\\n" "$@" >> "{tmp_path}/argv"\n'
                      f'case "$2" in\n{cases}\n  *) exit 1 ;;\nesac\nexit {rc}\n')


def ctx_for(tmp_path: Path, inventory: dict | None = None) -> CheckContext:
    return CheckContext("bw", tmp_path / "run", 60, destructive=False, allow_destructive=False,
                        inventory=inventory or {}, log=logging.getLogger("t"))


def test_plan_one_command_per_test():
    p = GpuBandwidthParams(buffer_mib=512, samples=3)
    cmds = [c.argv for c in KIND.plan(p, {})]
    assert cmds[0] == ("nvbandwidth", "-t", "host_to_device_memcpy_ce", "-b", "512", "-i", "3")
    assert [c[2] for c in cmds] == ["host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
                                    "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce"]
    assert KIND.needs == frozenset({"gpu"})
    bwt = [c.argv for c in KIND.plan(GpuBandwidthParams(engine="bandwidthtest", memory="pageable"),
                                     {"gpus": [{"index": 0}, {"index": 1}]})]
    assert bwt == [("bandwidthTest", "--device=0", "--memory=pageable", "--mode=quick"),
                   ("bandwidthTest", "--device=1", "--memory=pageable", "--mode=quick")]
    (builtin,) = KIND.plan(GpuBandwidthParams(engine="builtin", buffer_mib=64, p2p=False), {})
    assert builtin.argv[1:] == ("-m", "harness.engines.copy", "--backend", "auto", "--size", str(64 * 2**20),
                                "--no-p2p")


def test_metric_specs_follow_the_engine():
    names = {e: set(KIND.metric_specs(GpuBandwidthParams(engine=e))) for e in ("nvbandwidth", "bandwidthtest",
                                                                               "builtin")}
    assert names["builtin"] == {"gpu.h2d_bw", "gpu.d2h_bw", "gpu.p2p_bw"}
    assert names["bandwidthtest"] == names["builtin"] | {"gpu.d2d_bw"}
    assert names["nvbandwidth"] == names["builtin"] | {"gpu.bw_sum", "gpu.p2p_lat", "gpu.host_lat"}


@pytest.mark.parametrize("kw, words", [
    ({"tests": ["h2d; rm -rf"]}, "not an nvbandwidth test name"),
    ({"tests": ["a_b_c", "a_b_c"]}, "listed twice"),
    ({"tests": []}, "at least 1 item"),
    ({"buffer_mib": 0}, "greater than or equal to 1"),
    ({"engine": "builtin", "tests": ["host_to_device_memcpy_ce"]}, "tests applies to engine nvbandwidth"),
    ({"engine": "nvbandwidth", "backend": "numpy"}, "backend applies to engine builtin"),
    ({"engine": "builtin", "binary": "/bin/true"}, "binary applies to engines nvbandwidth and bandwidthtest"),
    ({"engine": "nvbandwith"}, "Input should be 'nvbandwidth', 'bandwidthtest' or 'builtin'"),
])
def test_bad_params_are_refused(kw, words):
    with pytest.raises(ValidationError, match=words):
        GpuBandwidthParams.model_validate(kw)


def test_nvbandwidth_each_test_with_issue_metric_names_and_siblings(tmp_path):
    exe = fake_nvbandwidth(tmp_path)
    p = GpuBandwidthParams(binary=str(exe), tests=list(BY_TEST))
    ctx = ctx_for(tmp_path, H100S)
    out = run_judged(KIND, p, ctx)
    assert out.problems == ()
    assert len(out.metrics) == 9 + 57 + 56
    assert (tmp_path / "argv").read_text().split() == [x for t in BY_TEST for x in ("-t", t)]
    d2h = {m.labels["gpu"]: m.value for m in out.metrics if m.name == "gpu.d2h_bw"}
    assert d2h[4] == 55.25 and len(d2h) == 8
    p2p = {(m.labels["src"], m.labels["dst"]): m.value for m in out.metrics if m.name == "gpu.p2p_bw"}
    assert len(p2p) == 56 and p2p[("gpu7", "gpu0")] == 395.05
    lat = {m.labels["test"] for m in out.metrics if m.name == "gpu.p2p_lat"}
    assert lat == {"device_to_device_latency_sm"}
    assert [(e.metric, e.labels, e.outcome) for e in out.evaluations] == [
        ("gpu.d2h_bw", {"test": "device_to_host_memcpy_ce"}, Outcome.PASS),
        ("gpu.p2p_bw", {"test": "device_to_device_memcpy_read_ce"}, Outcome.PASS)]  # latency not compared
    assert out.summary == ("device_to_host_memcpy_ce min 55.2 GB/s (gpu2); "
                           "device_to_device_memcpy_read_ce min 395.1 GB/s (gpu7->gpu0)")
    assert out.details["engine"] == "nvbandwidth" and out.details["version"] == "v0.10.0"
    assert out.details["tests"]["device_to_host_memcpy_ce"] == {"cov": {"device_to_host_memcpy_ce": 0.0},
                                                                "not_measured": []}
    assert [Path(t.stdout_file).name for t in ctx.tool_runs] == [
        f"0{i}-nvbandwidth-{t}.stdout" for i, t in enumerate(BY_TEST, 1)]


def test_a_gpu_missing_from_a_host_copy_test_is_invalid(tmp_path):
    p = GpuBandwidthParams(binary=str(fake_nvbandwidth(tmp_path)), tests=["device_to_host_memcpy_ce"])
    nine = {"gpus": [{"index": i} for i in range(9)]}
    out = run_judged(KIND, p, ctx_for(tmp_path, nine))
    assert out.problems == ("gpu.d2h_bw (device_to_host_memcpy_ce): no result for GPU 8 of the 9 NVML sees",)


def test_a_test_with_no_output_is_a_tool_error(tmp_path):
    p = GpuBandwidthParams(binary=str(fake_nvbandwidth(tmp_path)), tests=["host_to_device_memcpy_sm"])
    with pytest.raises(ToolError, match=r"nvbandwidth -t host_to_device_memcpy_sm \(exit 1\): "
                       r"not nvbandwidth output \(no result matrix found\)"):
        run_judged(KIND, p, ctx_for(tmp_path))


def test_results_then_a_nonzero_exit_are_invalid(tmp_path):
    p = GpuBandwidthParams(binary=str(fake_nvbandwidth(tmp_path, rc=4)), tests=["device_to_host_memcpy_ce"])
    out = run_judged(KIND, p, ctx_for(tmp_path))
    assert len(out.metrics) == 9
    assert out.problems[0].startswith("nvbandwidth -t device_to_host_memcpy_ce exited with status 4")


def test_sibling_rule_can_be_switched_off(tmp_path):
    p = GpuBandwidthParams(binary=str(fake_nvbandwidth(tmp_path)), tests=["device_to_host_memcpy_ce"],
                           sibling_tolerance=None)
    assert run_judged(KIND, p, ctx_for(tmp_path)).evaluations == ()


def test_bandwidthtest_engine_runs_each_gpu(tmp_path):
    exe = executable(tmp_path / "bandwidthTest", f'echo "$@" >> "{tmp_path}/argv"\n'
                     f'[ "$CUDA_DEVICE_ORDER" = PCI_BUS_ID ] || exit 7\ncat "{A100_BWT}"\n')
    p = GpuBandwidthParams(engine="bandwidthtest", binary=str(exe))
    out = run_judged(KIND, p, ctx_for(tmp_path, {"gpus": [{"index": 0}, {"index": 1}]}))
    assert out.problems == ()
    assert (tmp_path / "argv").read_text().splitlines() == [
        "--device=0 --memory=pinned --mode=quick", "--device=1 --memory=pinned --mode=quick"]
    got = sorted((m.name, m.labels["gpu"], m.value) for m in out.metrics)
    assert got == [("gpu.d2d_bw", 0, 1157.5), ("gpu.d2d_bw", 1, 1157.5), ("gpu.d2h_bw", 0, 13.2),
                   ("gpu.d2h_bw", 1, 13.2), ("gpu.h2d_bw", 0, 12.3), ("gpu.h2d_bw", 1, 12.3)]
    assert {m.labels["size"] for m in out.metrics} == {32000000}
    assert out.summary.startswith("bandwidthTest min 12.3 GB/s (gpu0)")


def test_bandwidthtest_failure_is_invalid_and_names_the_gpu(tmp_path):
    failed = tmp_path / "failed.txt"
    failed.write_text(A100_BWT.read_text().replace("Result = PASS", "Result = FAIL"))
    exe = executable(tmp_path / "bandwidthTest", f'cat "{failed}"\nexit 1\n')
    out = run_judged(KIND, GpuBandwidthParams(engine="bandwidthtest", binary=str(exe)), ctx_for(tmp_path))
    assert out.problems[0] == "GPU 0: bandwidthTest reported Result = FAIL"
    assert out.problems[1].startswith("GPU 0: bandwidthTest --device=0 exited with status 1")


def test_builtin_engine_for_real_on_host_memory(tmp_path):
    ctx = ctx_for(tmp_path)
    p = GpuBandwidthParams(engine="builtin", backend="numpy", buffer_mib=1, samples=3)
    out = run_judged(KIND, p, ctx)
    assert out.problems == ()
    got = sorted((m.name, m.labels.get("gpu", m.labels.get("src")), m.labels["test"]) for m in out.metrics)
    assert got == [("gpu.d2h_bw", 0, D2H), ("gpu.d2h_bw", 1, D2H), ("gpu.h2d_bw", 0, H2D),
                   ("gpu.h2d_bw", 1, H2D), ("gpu.p2p_bw", "gpu0", WR), ("gpu.p2p_bw", "gpu1", WR)]
    assert all(m.value > 0 and m.unit == "GB/s" for m in out.metrics)
    # samples are trials, as nvbandwidth's -i (median reported), not the copies timed per trial
    d = out.details
    assert (d["backend"], d["size"], d["iterations"], d["trials"]) == ("numpy", 2**20, 16, 3)
    assert ctx.tool_runs[0].argv[-2:] == ("--trials", "3")
    assert ctx.tool_runs[0].argv[1:3] == ("-m", "harness.engines.copy") and ctx.tool_runs[0].rc == 0


def test_builtin_engine_without_a_gpu_backend_is_a_tool_error(tmp_path):
    pytest.importorskip("numpy")
    try:
        import cupy  # noqa: F401
        pytest.skip("cupy is installed")
    except ImportError:
        pass
    try:
        import torch  # noqa: F401
        pytest.skip("torch is installed")
    except ImportError:
        pass
    with pytest.raises(ToolError, match=r"builtin copy test \(exit 2\): ImportError: no GPU backend"):
        run_judged(KIND, GpuBandwidthParams(engine="builtin"), ctx_for(tmp_path))


def test_nvbandwidth_numbers_gpus_as_nvml_does_whatever_was_inherited(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # a scheduler's leftover: would hide and renumber GPUs
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    exe = executable(tmp_path / "nvbandwidth",
                     f'echo "$CUDA_DEVICE_ORDER $CUDA_VISIBLE_DEVICES" >> "{tmp_path}/env"\n'
                     f'cat "{BY_TEST[D2H]}"\n')
    inv = {"gpus": [{"index": i, "uuid": f"GPU-{i:04d}"} for i in range(8)]}
    run_judged(KIND, GpuBandwidthParams(binary=str(exe), tests=[D2H]), ctx_for(tmp_path, inv))
    want = ["PCI_BUS_ID", ",".join(f"GPU-{i:04d}" for i in range(8))]
    assert (tmp_path / "env").read_text().split() == want


def test_bandwidthtest_gives_cuda_its_own_number_when_a_gpu_has_no_uuid(tmp_path):
    # NVML's GPU 1 is lost (no UUID): CUDA sees GPUs 0 and 2 as devices 0 and 1
    exe = executable(tmp_path / "bandwidthTest", f'echo "$CUDA_VISIBLE_DEVICES $@" >> "{tmp_path}/argv"\n'
                     f'cat "{A100_BWT}"\n')
    inv = {"gpus": [{"index": 0, "uuid": "GPU-a"}, {"index": 1, "uuid": None}, {"index": 2, "uuid": "GPU-c"}]}
    p = GpuBandwidthParams(engine="bandwidthtest", binary=str(exe))
    out = run_judged(KIND, p, ctx_for(tmp_path, inv))
    assert (tmp_path / "argv").read_text().splitlines() == [
        "GPU-a,GPU-c --device=0 --memory=pinned --mode=quick",
        "GPU-a,GPU-c --device=1 --memory=pinned --mode=quick"]
    assert sorted({m.labels["gpu"] for m in out.metrics}) == [0, 2]
    assert any("GPU 1" in p for p in out.problems), out.problems
