"""The pure gpu_burn parser on every real sample in tests/data/gpu-burn, plus the documented edges.

Expected numbers are read off the files by hand: Gflop/s / 1000 -> TFLOPS, the last proc'd
count -> iterations, the highest temps entry -> temp_max.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from samples import covers, sample_names

from harness.parsers import gpuburn
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "gpu-burn"
SAMPLES = sample_names("gpu-burn")
WRAPPED = 2**32 - 524288000  # "-524288000" is gpu_burn's 32-bit error counter wrapped


def by(result, name: str) -> dict[int, float]:
    return {m.labels["gpu"]: m.value for m in result.metrics if m.name == name}


def parse(name: str):
    return gpuburn.parse((DATA / name).read_text())


test_every_sample_is_covered_here = covers(SAMPLES, {
    "gpu_burn_16gpu_all_FAULTY_negative_error_counts_tail.txt",
    "gpu_burn_8x_titan_rtx_no_cuda_devices_crash.txt",
    "gpu_burn_k80_2gpu_doubles_ok_interleaved_child_output.txt",
    "gpu_burn_rtx_a2000_1gpu_no_progress_lines_but_OK.txt",
    "gpu_burn_rtx_a500_1gpu_no_final_verdict.txt",
    "gpu_burn_t4_init_error_DIED_no_clients_alive.txt",
})


def test_k80_two_gpus_ok_with_child_output_interleaved():
    r = parse("gpu_burn_k80_2gpu_doubles_ok_interleaved_child_output.txt")
    assert r.valid and r.problems == ()
    assert by(r, "gpu_burn.ok") == {0: 1.0, 1: 1.0}
    assert by(r, "gpu_burn.tflops") == {0: 0.735, 1: 0.786}
    assert by(r, "gpu_burn.iterations") == {0: 316.0, 1: 632.0}
    assert by(r, "gpu_burn.temp_max") == {0: 74.0, 1: 53.0}
    assert by(r, "gpu_burn.errors") == {0: 0.0, 1: 0.0}
    assert {m.unit for m in r.metrics if m.name == "gpu_burn.tflops"} == {"TFLOPS"}
    assert r.details["tested"] == 2 and r.details["progress_lines"] == 3
    assert r.details["gpus"][1] == {"name": "Tesla K80", "uuid": "GPU-5dfb0b0a-0681-4960-f905-4dd4cdd8f111"}


def test_sixteen_faulty_gpus_with_wrapped_negative_error_counts():
    r = parse("gpu_burn_16gpu_all_FAULTY_negative_error_counts_tail.txt")
    assert r.valid, r.problems  # a complete run: FAULTY is a hardware verdict, judged by the check
    assert by(r, "gpu_burn.ok") == {i: 0.0 for i in range(16)}
    wrapped = {1, 2, 3, 4, 9, 11, 14}
    assert by(r, "gpu_burn.errors") == {i: float(WRAPPED if i in wrapped else 0) for i in range(16)}
    gflops = [6311, 6440, 6490, 6457, 6451, 6454, 6446, 6461, 6480, 6411, 6660, 6532, 6523, 6490, 6432, 6439]
    assert by(r, "gpu_burn.tflops") == {i: g / 1000 for i, g in enumerate(gflops)}
    iters = [18000, 12600, 11700, 11700, 11700] + [10800] * 6 + [11700] + [10800] * 4
    assert by(r, "gpu_burn.iterations") == {i: float(n) for i, n in enumerate(iters)}
    temps = [51, 45, 48, 50, 49, 46, 46, 50, 51, 47, 46, 50, 50, 47, 47, 52]
    assert by(r, "gpu_burn.temp_max") == {i: float(t) for i, t in enumerate(temps)}
    assert r.details["faulty"] == list(range(16))
    assert r.details["error_counter_overflow"] == sorted(wrapped)


def test_ok_verdict_without_any_progress_is_invalid():
    r = parse("gpu_burn_rtx_a2000_1gpu_no_progress_lines_but_OK.txt")
    assert not r.valid
    assert r.problems == ("GPU 0: reported OK but processed nothing (no progress lines at all)",)
    assert [(m.name, m.value) for m in r.metrics] == [("gpu_burn.ok", 0.0)]


def test_run_without_final_verdict_is_invalid_but_keeps_its_numbers():
    r = parse("gpu_burn_rtx_a500_1gpu_no_final_verdict.txt")
    assert not r.valid
    assert r.problems == ('no final verdict ("Tested N GPUs:"): gpu_burn did not finish',)
    assert by(r, "gpu_burn.ok") == {0: 0.0}
    assert by(r, "gpu_burn.tflops") == {0: 3.519}
    assert by(r, "gpu_burn.iterations") == {0: 30.0}
    assert by(r, "gpu_burn.temp_max") == {0: 53.0}


def test_init_error_died_and_no_clients_alive():
    r = parse("gpu_burn_t4_init_error_DIED_no_clients_alive.txt")
    assert not r.valid
    assert r.problems == (
        'every GPU process died ("No clients are alive!  Aborting")',
        "gpu_burn: Couldn't init a GPU test: Error:",
        'no final verdict ("Tested N GPUs:"): gpu_burn did not finish',
        "GPU 0: its process died (proc'd -1)",
    )
    assert by(r, "gpu_burn.ok") == {0: 0.0}
    assert by(r, "gpu_burn.temp_max") == {0: 68.0}
    assert by(r, "gpu_burn.iterations") == {} and by(r, "gpu_burn.errors") == {}  # a dead GPU counts nothing


def test_crash_after_listing_gpus():
    r = parse("gpu_burn_8x_titan_rtx_no_cuda_devices_crash.txt")
    assert not r.valid
    assert r.problems[0].startswith("gpu_burn: terminate called after throwing an instance of")
    assert r.problems[1:] == ("gpu_burn found no CUDA devices",
                              'no final verdict ("Tested N GPUs:"): gpu_burn did not finish')
    assert by(r, "gpu_burn.ok") == {i: 0.0 for i in range(8)}
    assert {m.name for m in r.metrics} == {"gpu_burn.ok"}


# A capture through a pipe, as the harness makes it: the progress line is redrawn with "\r",
# newer versions add a power column, "--" stands for an unknown temperature, and the error
# counters restart after each "Summary at:" line (format from wilicc/gpu-burn gpu_burn-drv.cpp).
PIPE = ("GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)\n"
        "\r10.0%  proc'd: 5 (100 Gflop/s) - 5 (90 Gflop/s)   errors: 2  (WARNING!)- 0   temps: 50 C - -- "
        "  power: 300 W - 310 W "
        "\r20.0%  proc'd: 10 (110 Gflop/s) - 10 (95 Gflop/s)   errors: 3  (WARNING!)- 0   temps: 55 C - 60 C "
        "  power: 301 W - 311 W \n\tSummary at:   Sat Nov 29 10:00:00 UTC 2026\n\n"
        "\r30.0%  proc'd: 15 (120 Gflop/s) - 15 (96 Gflop/s)   errors: 1  (WARNING!)- 0   temps: 57 C - 58 C "
        "\nKilling processes with SIGTERM (soft kill)\ndone\n\n"
        "Tested 2 GPUs:\n\tGPU 0: FAULTY\n\tGPU 1: OK\n")


def test_carriage_return_redraws_power_column_and_error_periods():
    r = gpuburn.parse(PIPE)
    assert r.valid and r.details["progress_lines"] == 3
    assert by(r, "gpu_burn.errors") == {0: 4.0, 1: 0.0}  # 3 before the summary + 1 after
    assert by(r, "gpu_burn.ok") == {0: 0.0, 1: 1.0}
    assert by(r, "gpu_burn.temp_max") == {0: 57.0, 1: 60.0}
    assert by(r, "gpu_burn.tflops") == {0: 0.12, 1: 0.096}
    assert by(r, "gpu_burn.iterations") == {0: 15.0, 1: 15.0}


def test_ok_for_a_gpu_that_never_processed_anything_is_invalid():
    text = PIPE.replace("- 15 (96 Gflop/s)", "- 0 (0 Gflop/s)")
    text = text.replace("- 10 (95 Gflop/s)", "- 0 (0 Gflop/s)").replace("- 5 (90 Gflop/s)", "- 0 (0 Gflop/s)")
    r = gpuburn.parse(text)
    assert not r.valid and r.problems == ("GPU 1: reported OK but processed nothing",)
    assert by(r, "gpu_burn.ok") == {0: 0.0, 1: 0.0}


def test_verdict_missing_a_gpu_is_invalid():
    r = gpuburn.parse(PIPE.replace("\tGPU 1: OK\n", ""))
    assert not r.valid and r.problems == ("the verdict names 1 of the 2 GPUs tested",)


def test_garbled_progress_lines_are_skipped_not_guessed():
    r = gpuburn.parse(PIPE.replace("errors: 1  (WARNING!)- 0", "errors: 1  (WARNInitialized device 1"))
    assert r.details["garbled_lines"] == 1
    assert by(r, "gpu_burn.iterations") == {0: 10.0, 1: 10.0}


def test_registered_and_not_gpu_burn_output():
    assert parsers()["gpu-burn"] is gpuburn.parse
    r = gpuburn.parse('{"jobs": []}')
    assert not r.valid and r.problems == ("not gpu_burn output: no GPU listed, no progress, no verdict",)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789 -.()%:\r\n\tCWGPUOKFAULTYDIEWARNINGproc'dstmpfl/")),
               max_size=400))
def test_never_raises(text: str):
    r = gpuburn.parse(text)
    assert isinstance(r.valid, bool)


@pytest.mark.parametrize("name", SAMPLES)
def test_prefixes_and_truncations_of_real_samples_never_raise(name: str):
    text = (DATA / name).read_text()
    for cut in range(0, len(text), 37):
        gpuburn.parse(text[:cut])
