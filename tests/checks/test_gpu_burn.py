"""The gpu_burn kind's run path without GPUs: tiny stand-in executables print REAL captured
gpu_burn / dcgmi output (tests/data), so everything after the subprocess is the real code."""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from judging import run_judged
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.gpu_burn import (
    KIND,
    GpuBurnParams,
    _burn_verdicts,
    _cut_off,
    build_argv,
    resolved,
    safe_kernel,
)
from harness.errors import ToolError, ToolMissing, ToolTimeout
from harness.model import Outcome, ToolRun
from harness.parsers import burnlog

DATA = Path(__file__).parents[1] / "data"


def stand_in(path: Path, sample: str | None, rc: int = 0, sleep: float = 0.0) -> Path:
    """An executable that prints a captured output file (or nothing) and exits with rc."""
    cat = f'cat "{DATA / sample}"\n' if sample else ""
    path.write_text(f"#!/bin/sh\nsleep {sleep}\n{cat}exit {rc}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def ctx(tmp_path: Path, gpus: int) -> CheckContext:
    inv = {"gpus": [{"index": i, "name": "NVIDIA H200"} for i in range(gpus)]}
    return CheckContext("burn", tmp_path, 60, False, False, inv, logging.getLogger("t"))


def burn(tmp_path: Path, sample: str | None, gpus: int, rc: int = 0, **kw):
    exe = stand_in(tmp_path / "gpu_burn", f"gpu-burn/{sample}" if sample else None, rc)
    return run_judged(KIND, GpuBurnParams(binary=str(exe), duration=10, **kw), ctx(tmp_path, gpus))


def test_ok_run_gives_metrics_and_one_passing_verdict(tmp_path: Path):
    out = burn(tmp_path, "gpu_burn_k80_2gpu_doubles_ok_interleaved_child_output.txt", 2)
    assert out.problems == ()
    assert {(m.name, m.labels["gpu"]): m.value for m in out.metrics if m.name == "gpu_burn.tflops"} == {
        ("gpu_burn.tflops", 0): 0.735, ("gpu_burn.tflops", 1): 0.786}
    (ev,) = out.evaluations  # 2 GPUs: too few siblings for the sibling rule
    assert ev.outcome is Outcome.PASS and ev.message == "all 2 GPUs OK, no computation errors"
    assert out.summary == "gpu_burn 10 s: 2 of 2 GPUs OK; 0.735-0.786 TFLOPS (median 0.760)"
    assert out.details["engine"] == "gpu-burn" and out.details["tested"] == 2
    raw = sorted(p.name for p in (tmp_path / "raw" / "burn").iterdir())
    assert raw == ["01-gpu-burn.stderr", "01-gpu-burn.stdout"]


def test_faulty_gpus_fail_with_their_error_counts_and_sibling_rule_runs(tmp_path: Path):
    out = burn(tmp_path, "gpu_burn_16gpu_all_FAULTY_negative_error_counts_tail.txt", 16)
    assert out.problems == ()  # complete run: a hardware verdict, not an invalid run
    faulty = [e for e in out.evaluations if e.metric == "gpu_burn.ok"]
    assert len(faulty) == 16 and {e.outcome for e in faulty} == {Outcome.FAIL}
    assert faulty[1].message == "GPU 1: FAULTY (3,770,679,296 computation errors)"
    # GPU 0's errors were counted before this tail of the output: FAULTY all the same
    assert faulty[0].message == "GPU 0: FAULTY (computation errors, not in the output kept)"
    (sib,) = [e for e in out.evaluations if e.metric == "gpu_burn.tflops"]
    assert sib.outcome is Outcome.PASS and sib.source == "sibling rule"  # 6.31..6.66 TFLOPS: all within 5%


def test_slow_sibling_fails(tmp_path: Path):
    out = burn(tmp_path, "gpu_burn_16gpu_all_FAULTY_negative_error_counts_tail.txt", 16,
               sibling_tolerance=0.02)
    slow = [e for e in out.evaluations if e.metric == "gpu_burn.tflops" and e.outcome is Outcome.FAIL]
    assert [e.labels["gpu"] for e in slow] == [0]  # 6.311 vs median 6.4555: 2.2% below


def test_ok_without_work_is_an_invalid_run(tmp_path: Path):
    out = burn(tmp_path, "gpu_burn_rtx_a2000_1gpu_no_progress_lines_but_OK.txt", 1)
    assert out.problems == ("GPU 0: reported OK but processed nothing (no progress lines at all)",)
    assert out.evaluations == ()


def test_every_gpu_nvml_sees_must_be_reported(tmp_path: Path):
    out = burn(tmp_path, "gpu_burn_k80_2gpu_doubles_ok_interleaved_child_output.txt", 8)
    assert out.problems == ("gpu-burn reported 2 of the 8 GPUs NVML sees; missing GPU 2, 3, 4, 5, 6, 7",)


def test_crash_with_exit_code_is_invalid_and_tool_without_output_is_an_error(tmp_path: Path):
    out = burn(tmp_path, "gpu_burn_8x_titan_rtx_no_cuda_devices_crash.txt", 8, rc=19)
    assert "gpu_burn found no CUDA devices" in out.problems
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ToolError, match=r"gpu-burn: exit 1: not gpu_burn output"):
        burn(empty, None, 1, rc=1)


def test_missing_binary_is_an_environment_error(tmp_path: Path):
    with pytest.raises(ToolError, match="not found"):
        run_judged(KIND, GpuBurnParams(binary=str(tmp_path / "nope" / "gpu_burn")), ctx(tmp_path, 1))


def test_argv(tmp_path: Path):
    exe = stand_in(tmp_path / "gpu_burn", None)
    (tmp_path / "compare.ptx").write_text("")
    p = GpuBurnParams(binary=str(exe), duration=600, doubles=True, tensor_cores=True, memory="90%")
    assert build_argv(p) == [str(exe), "-d", "-tc", "-m90%", "-c", str(tmp_path / "compare.ptx"), "600"]
    assert build_argv(GpuBurnParams(engine="dcgm", dcgm_level=2)) == ["dcgmi", "diag", "-r", "2", "-j"]
    assert build_argv(GpuBurnParams()) == ["gpu_burn", "60"]
    with pytest.raises(ValidationError, match="memory must be a percentage"):
        GpuBurnParams(memory="lots")
    with pytest.raises(ValidationError):
        GpuBurnParams(engine="furmark")


def test_metric_specs_follow_the_engine():
    burn_specs = KIND.metric_specs(GpuBurnParams())
    dcgm_specs = KIND.metric_specs(GpuBurnParams(engine="dcgm"))
    assert "gpu_burn.tflops" in burn_specs and "dcgm.result" not in burn_specs
    assert "dcgm.result" in dcgm_specs and "gpu_burn.tflops" not in dcgm_specs
    assert "gpu.throttle_pct" in burn_specs and "gpu.throttle_pct" in dcgm_specs


# ---------------------------------------------------------------- dcgm engine

def dcgm(tmp_path: Path, monkeypatch, sample: str, gpus: int, level: int = 3, rc: int = 0):
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    stand_in(bindir / "dcgmi", f"dcgmi/{sample}", rc)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return run_judged(KIND, GpuBurnParams(engine="dcgm", dcgm_level=level), ctx(tmp_path, gpus))


def test_dcgm_json_pass(tmp_path: Path, monkeypatch):
    out = dcgm(tmp_path, monkeypatch, "diag_r3_json_tesla_t4.json", 1)
    assert out.problems == ()
    (ev,) = out.evaluations
    assert ev.outcome is Outcome.PASS and ev.message == "all 15 DCGM test results passed"
    assert out.summary == "dcgmi diag -r 3: 15 of 15 passed"


def test_dcgm_persistence_mode_off_is_an_environment_error_not_a_faulty_gpu(tmp_path: Path, monkeypatch):
    out = dcgm(tmp_path, monkeypatch, "diag_r4_table_rtx2060s_persistence_fail_memtest_pass.txt", 1, level=4,
               rc=226)
    assert out.problems == ()
    assert not [e for e in out.evaluations if e.outcome is Outcome.FAIL]
    (err,) = [e for e in out.evaluations if e.outcome is Outcome.ERROR]
    assert err.message.startswith("not a hardware verdict: Persistence Mode: Fail: Persistence mode for "
                                  "GPU 0 is currently disabled.")
    from harness.compare.judge import status_of
    from harness.model import Status
    assert status_of(out.evaluations) is Status.ERRORED


def test_dcgm4_test_failing_above_passing_gpu_rows_does_not_pass(tmp_path: Path, monkeypatch):
    out = dcgm(tmp_path, monkeypatch, "diag_r2_table_dcgm4.4.1_8x_b200_pcie_fail_internal_error_in_slurm.txt",
               8, level=2)
    (err,) = [e for e in out.evaluations if e.outcome is Outcome.ERROR]
    assert "pcie: Fail: There was an internal error during the test" in err.message
    assert not [e for e in out.evaluations if e.outcome is Outcome.FAIL]


def test_dcgm_that_skipped_all_hardware_tests_is_invalid(tmp_path: Path, monkeypatch):
    out = dcgm(tmp_path, monkeypatch, "diag_r3_table_2x_rtx_pro_6000_blackwell_skips_doubled.txt", 2)
    assert out.problems == ("dcgmi diag -r 3 skipped every hardware, integration and stress test: "
                            "no GPU was exercised",)


def test_dcgm_per_gpu_coverage(tmp_path: Path, monkeypatch):
    out = dcgm(tmp_path, monkeypatch, "diag_r3_table_dcgm4.0_4gpu_per_gpu_rows_nvidia_docs.txt", 8)
    assert out.problems == ("dcgm reported 4 of the 8 GPUs NVML sees; missing GPU 4, 5, 6, 7",)


def test_cuda_numbers_gpus_like_nvml_and_compare_kernel_is_found_beside_a_binary_on_path(tmp_path: Path,
                                                                                          monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "gpu_burn"
    sample = DATA / "gpu-burn" / "gpu_burn_k80_2gpu_doubles_ok_interleaved_child_output.txt"
    exe.write_text(f'#!/bin/sh\n[ "$CUDA_DEVICE_ORDER" = PCI_BUS_ID ] || exit 3\ncat "{sample}"\n')
    exe.chmod(0o755)
    (bindir / "compare.ptx").write_text("")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    params = GpuBurnParams(duration=10)
    assert build_argv(params) == ["gpu_burn", "-c", str(bindir / "compare.ptx"), "10"]
    out = run_judged(KIND, params, ctx(tmp_path, 2))
    assert out.problems == () and len([m for m in out.metrics if m.name == "gpu_burn.ok"]) == 2


def test_a_current_gpu_burn_build_gets_its_compare_fatbin(tmp_path: Path, monkeypatch):
    # wilicc/gpu-burn since dfc3042 (PR #148): the Makefile emits compare.fatbin and the binary's default
    # COMPARE_KERNEL is "compare.fatbin"; it is preferred to a stale compare.ptx beside it
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "gpu_burn").write_text("#!/bin/sh\n")
    (bindir / "gpu_burn").chmod(0o755)
    (bindir / "compare.fatbin").write_bytes(b"\x50\xed\x55\xba")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    assert build_argv(GpuBurnParams(duration=10)) == ["gpu_burn", "-c", str(bindir / "compare.fatbin"), "10"]
    (bindir / "compare.ptx").write_text("// an older build's kernel\n")
    assert build_argv(GpuBurnParams(duration=10))[2] == str(bindir / "compare.fatbin")
    (bindir / "compare.fatbin").unlink()
    assert build_argv(GpuBurnParams(duration=10))[2] == str(bindir / "compare.ptx")


def test_a_fatbin_behind_a_switch_holding_path_keeps_its_name(tmp_path: Path):
    kdir = tmp_path / "burn-dev"
    kdir.mkdir()
    (kdir / "compare.fatbin").write_bytes(b"\x50\xed\x55\xba")
    link, tmp = safe_kernel(str(kdir / "compare.fatbin"))
    try:
        assert Path(link).name == "compare.fatbin" and Path(link).resolve() == (kdir / "compare.fatbin")
    finally:
        shutil.rmtree(str(tmp))


def test_a_gpu_without_a_uuid_is_left_out_of_cuda_and_coverage_names_it_not_the_last(tmp_path: Path):
    # NVML counts 3 GPUs but cannot name GPU 1 (lost): CUDA is given GPUs 0 and 2 by UUID, so CUDA's
    # device 1 is NVML's GPU 2; the burn's results land on GPU 0 and 2, and GPU 1 is the one missing
    sample = DATA / "gpu-burn" / "gpu_burn_k80_2gpu_doubles_ok_interleaved_child_output.txt"
    exe = tmp_path / "gpu_burn"
    exe.write_text(f'#!/bin/sh\n[ "$CUDA_VISIBLE_DEVICES" = GPU-aaaa,GPU-cccc ] || exit 3\ncat "{sample}"\n')
    exe.chmod(0o755)
    inv = {"gpus": [{"index": 0, "uuid": "GPU-aaaa"}, {"index": 1, "uuid": None, "error": "GPU is lost"},
                    {"index": 2, "uuid": "GPU-cccc"}]}
    c = CheckContext("burn", tmp_path, 60, False, False, inv, logging.getLogger("t"))
    out = KIND.run(GpuBurnParams(binary=str(exe), duration=10), c)
    assert out.problems == ("gpu-burn reported 2 of the 3 GPUs NVML sees; missing GPU 1",)
    assert sorted({m.labels["gpu"] for m in out.metrics if m.name == "gpu_burn.ok"}) == [0, 2]


# ---------------------------------------------------------------- engine auto

def fake_package(root: Path, name: str) -> None:
    """A package directory that importlib can find (auto only looks, never imports)."""
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("raise ImportError('a stand-in: never imported')\n")
    importlib.invalidate_caches()  # a new directory: the finders' listings are stale


def test_auto_picks_builtin_with_pytorch_else_gpu_burn_else_a_clear_error(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    for name in ("torch", "cupy"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    pkgs = tmp_path / "site"
    monkeypatch.syspath_prepend(str(pkgs))
    auto = GpuBurnParams(engine="auto", dtype="bf16", duration=10)
    if importlib.util.find_spec("torch") is None:
        with pytest.raises(ToolMissing, match=r"builtin bf16 burn needs PyTorch .*gpu_burn on PATH"):
            resolved(auto)
        (plan,) = KIND.plan(auto, {})
        assert "harness.engines.burn" in " ".join(plan.argv) and "no burn engine here" in plan.note
        (tmp_path / "bin").mkdir()
        stand_in(tmp_path / "bin" / "gpu_burn", None)
        assert resolved(auto).engine == "gpu-burn"
        fake_package(pkgs, "cupy")  # CuPy has no bf16: still gpu_burn for bf16, builtin for fp16
        assert resolved(auto).engine == "gpu-burn"
        assert resolved(auto.model_copy(update={"dtype": "fp16"})).engine == "builtin"
        fake_package(pkgs, "torch")
    assert resolved(auto).engine == "builtin"
    assert resolved(GpuBurnParams(engine="dcgm")).engine == "dcgm"


def test_auto_runs_gpu_burn_when_that_is_what_is_installed(tmp_path: Path, monkeypatch):
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("PyTorch is installed: auto picks the builtin engine")
    sample = "gpu-burn/gpu_burn_k80_2gpu_doubles_ok_interleaved_child_output.txt"
    exe = stand_in(tmp_path / "gpu_burn", sample)
    out = run_judged(KIND, GpuBurnParams(engine="auto", binary=str(exe), duration=10), ctx(tmp_path, 2))
    assert out.details["engine"] == "gpu-burn" and out.problems == ()
    assert out.summary.startswith("gpu_burn 10 s: 2 of 2 GPUs OK")


# ---------------------------------------------------------------- argv safety and GPU numbering (#21)

def recording_gpu_burn(path: Path, record: Path) -> Path:
    """A gpu_burn stand-in that records its arguments and env, then prints a real OK run of 2 GPUs."""
    sample = DATA / "gpu-burn" / "gpu_burn_k80_2gpu_doubles_ok_interleaved_child_output.txt"
    path.write_text(f'#!/bin/sh\nfor a in "$@"; do echo "$a" >> "{record}"; done\n'
                    f'echo "ENV $CUDA_DEVICE_ORDER $CUDA_VISIBLE_DEVICES" >> "{record}"\ncat "{sample}"\n')
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("folder", ["burn-dev", "x-long", "gpu-help", "nv-tc"])
def test_a_compare_kernel_path_holding_a_gpu_burn_switch_never_reaches_its_argv(tmp_path: Path, folder):
    kdir = tmp_path / folder
    kdir.mkdir()
    (kdir / "compare.ptx").write_text("// ptx\n")
    record = tmp_path / "argv.txt"
    exe = recording_gpu_burn(tmp_path / "gpu_burn", record)
    out = KIND.run(GpuBurnParams(binary=str(exe), duration=10, compare_kernel=str(kdir / "compare.ptx")),
                   ctx(tmp_path, 2))
    args = record.read_text().splitlines()[:-1]
    assert args[0] == "-c" and args[-1] == "10"
    # gpu_burn tests every argument for these substrings (gpu_burn-drv.cpp main())
    assert not [a for a in args if any(s in a for s in ("-h", "-l", "-d", "-tc"))], args
    assert Path(args[1]).name == "compare.ptx"
    assert not Path(args[1]).exists()  # the private link is removed after the run
    assert out.problems == ()


def test_gpus_are_numbered_as_nvml_does_whatever_cuda_visible_devices_was(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")  # inherited from a scheduler: would renumber
    record = tmp_path / "argv.txt"
    exe = recording_gpu_burn(tmp_path / "gpu_burn", record)
    inv = {"gpus": [{"index": i, "uuid": f"GPU-{i}aaa", "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0"}
                    for i in range(2)]}
    c = CheckContext("burn", tmp_path, 60, False, False, inv, logging.getLogger("t"))
    KIND.run(GpuBurnParams(binary=str(exe), duration=10), c)
    assert record.read_text().splitlines()[-1] == "ENV PCI_BUS_ID GPU-0aaa,GPU-1aaa"


def test_an_engine_whose_cuda_order_differs_from_nvml_is_an_invalid_run():
    from harness.checks.gpu_identity import cuda_order_problems

    gpus = [{"pci_bus_id": "00000000:18:00.0"}, {"pci_bus_id": "00000000:2A:00.0"}]
    assert cuda_order_problems(["0000:18:00.0", "0000:2a:00.0"], gpus) == []
    (p,) = cuda_order_problems(["0000:2a:00.0", "0000:18:00.0", None], gpus)[:1]
    assert p.startswith("CUDA device 0 is the GPU at 0000:2a:00.0, but NVML's GPU 0 is at 00000000:18:00.0")


def test_a_hung_gpu_and_a_faulty_sibling_both_fail_by_name_in_an_incomplete_run():
    """The issue's case: GPU 2 with 3 computation errors plus GPU 3 hung. Before: the parse was
    invalid, so no finding at all and the node ended ERRORED (exit 3, never drained)."""
    def result(gpu: int, errors: int = 0) -> str:
        return (f'{{"event": "result", "gpu": {gpu}, "iterations": 100, "verified": 10, "errors": {errors}, '
                f'"tflops": 700.0, "digest": "aa", "name": "NVIDIA H200"}}\n')

    text = ('{"event": "start", "backend": "torch", "dtype": "bf16", "devices": [0, 1, 2, 3]}\n'
            + result(0) + result(1) + result(2, errors=3)
            + '{"event": "error", "gpu": 3, "message": "hung: no result 630 s after it began burning; '
              'its process was killed (the other GPUs\' results are kept)"}\n{"event": "done"}\n')
    parsed = burnlog.parse(text)
    assert not parsed.valid
    found = _burn_verdicts(parsed, "builtin", parsed.details["faults"],
                           {3: "GPU 3 (00000000:4B:00.0)", 2: "GPU 2 (00000000:3A:00.0)"})
    assert [(f.labels["gpu"], f.outcome, f.message) for f in found] == [
        (2, Outcome.FAIL, "GPU 2 (00000000:3A:00.0): products differ from the first (3 computation errors)"),
        (3, Outcome.FAIL, "GPU 3 (00000000:4B:00.0): did not finish the burn: hung: no result 630 s after it "
                          "began burning; its process was killed (the other GPUs' results are kept)")]


def test_every_gpu_burn_process_dying_names_no_gpu(tmp_path: Path):
    """All processes died at start ("No clients are alive!"): gpu_burn or the environment failed, not
    one GPU; nothing is named and the check stays ERRORED (real T4 output)."""
    out = burn(tmp_path, "gpu_burn_t4_init_error_DIED_no_clients_alive.txt", 1, rc=1)
    assert out.problems and out.findings == () and out.details.get("dead") is None


def test_the_builtin_burns_outer_timeout_keeps_the_results_and_names_the_silent_gpus(tmp_path: Path):
    """Before: a ToolTimeout threw away every GPU's results and named no GPU (ERRORED)."""
    c = ctx(tmp_path, 3)
    raw = tmp_path / "raw" / "burn"
    raw.mkdir(parents=True)
    (raw / "01-builtin.stdout").write_text(
        '{"event": "start", "backend": "torch", "dtype": "bf16", "devices": [0, 1, 2]}\n'
        '{"event": "result", "gpu": 0, "iterations": 100, "verified": 10, "errors": 0, "tflops": 700.0}\n'
        '{"event": "error", "gpu": 2, "message": "RuntimeError: CUDA error: an illegal memory access"}\n')
    c.tool_runs.append(ToolRun(("python",), None, 870.0, "raw/burn/01-builtin.stdout", "raw/burn/x", True))
    parsed = _cut_off(c, ToolTimeout("python -m harness.engines.burn: timed out after 870 s"))
    assert parsed.details["dead"] == {
        "1": "hung: no result when the burn's outer bound of 870 s ran out; the engine was killed",
        "2": "RuntimeError: CUDA error: an illegal memory access"}
    assert [m.value for m in parsed.metrics if m.name == "gpu_burn.ok"] == [1.0, 0.0, 0.0]
