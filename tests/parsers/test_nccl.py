"""The pure nccl-tests parser on every real sample in tests/data/nccl-tests, and edge cases around them."""

from __future__ import annotations

from pathlib import Path

import pytest
from samples import covers, real_samples

from harness.parsers import nccl
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "nccl-tests"
SAMPLES = real_samples("nccl-tests")
OOP, IP = "out-of-place", "in-place"

# Per file: validity, problems (substrings), metric count, ops, details, and exact values by
# (metric, op, size, placement), read off the files by hand. None = the metric must be absent.
# Old-format files (no "Collective test starting" line) are parsed with op="all_reduce", as the
# check does (it knows the binary it ran).
EXPECTED: dict[str, dict] = {
    "all_reduce_h100_2node_16rank_srun_label_nccl_tests_issue290.txt": {  # srun --label " 0: "
        "valid": True, "count": 11 * 6 + 2, "ops": {"all_reduce"}, "op": "all_reduce", "dtype": "float",
        "redop": "sum",
        "values": {
            ("nccl.busbw", "all_reduce", 8589934592, OOP): 155.57,
            ("nccl.busbw", "all_reduce", 8388608, IP): 87.38,
            ("nccl.wrong", "all_reduce", 8388608, OOP): None,  # validation 0: N/A
            ("nccl.avg_busbw", "all_reduce", None, None): 142.735,
            ("nccl.ranks", "all_reduce", None, None): 16,
        },
    },
    "all_reduce_rtx5090_2rank_mpirun_tag_output_v2.18.0.txt": {  # mpirun --tag-output "[1,0]<stdout>:"
        "valid": True, "count": 8 * 8 + 2, "ops": {"all_reduce"}, "dtype": "float", "redop": "sum",
        "values": {
            ("nccl.busbw", "all_reduce", 134217728, OOP): 2.30,
            ("nccl.time", "all_reduce", 1048576, IP): 4365.21,
            ("nccl.wrong", "all_reduce", 134217728, IP): 0,
            ("nccl.avg_busbw", "all_reduce", None, None): 1.57614,
            ("nccl.ranks", "all_reduce", None, None): 2,
        },
    },
    "all_gather_gb10_dgxspark_2node_with_mpirun_noise.txt": {
        "valid": True, "count": 3 * 8 + 2, "ops": {"all_gather"}, "dtype": "float", "redop": "none",
        "values": {
            ("nccl.busbw", "all_gather", 1073741824, OOP): 19.73,
            ("nccl.algbw", "all_gather", 2147483648, OOP): 42.46,
            ("nccl.time", "all_gather", 4294967296, IP): 95610.9,
            ("nccl.busbw", "all_gather", 4294967296, IP): 22.46,
            ("nccl.wrong", "all_gather", 4294967296, IP): 0,
            ("nccl.avg_busbw", "all_gather", None, None): 21.4033,
            ("nccl.ranks", "all_gather", None, None): 2,
        },
        "tests": [{"op": "all_gather", "nccl_tests_version": "2.18.3", "ngpus": 1, "ranks": 2,
                   "min_bytes": 1073741824, "max_bytes": 4294967296, "rows": 3, "warmup_iters": 10,
                   "iters": 50, "agg_iters": 1, "validation": 1, "graph": 0,
                   "hosts": ["spark-4440", "spark-fb97"]}],
    },
    "all_reduce_a100_2node_16rank_oci_single_size.txt": {
        "valid": True, "count": 10, "ops": {"all_reduce"}, "op": "all_reduce", "dtype": "float",
        "redop": "sum",
        "values": {
            ("nccl.busbw", "all_reduce", 10737418240, OOP): 222.88,
            ("nccl.busbw", "all_reduce", 10737418240, IP): 218.96,
            ("nccl.time", "all_reduce", 10737418240, OOP): 90330,
            ("nccl.algbw", "all_reduce", 10737418240, IP): 116.78,
            ("nccl.avg_busbw", "all_reduce", None, None): 220.921,
            ("nccl.ranks", "all_reduce", None, None): 16,
        },
    },
    "all_reduce_gh200_2node_8rank_int8_1B_to_128M_v2.18.3_olivia_slingshot.txt": {
        "valid": True, "count": 28 * 8 + 2, "ops": {"all_reduce"}, "dtype": "int8", "redop": "sum",
        "values": {
            ("nccl.busbw", "all_reduce", 1, OOP): 0.0,
            ("nccl.time", "all_reduce", 2, OOP): 97.16,
            ("nccl.algbw", "all_reduce", 32768, IP): 0.27,
            ("nccl.busbw", "all_reduce", 134217728, OOP): 101.70,
            ("nccl.busbw", "all_reduce", 134217728, IP): 107.63,
            ("nccl.time", "all_reduce", 134217728, IP): 2182.20,
            ("nccl.avg_busbw", "all_reduce", None, None): 17.8617,
            ("nccl.ranks", "all_reduce", None, None): 8,
        },
    },
    "all_reduce_h100_2node_16rank_oci.txt": {
        "valid": True, "count": 5 * 8 + 2, "ops": {"all_reduce"}, "op": "all_reduce",
        "values": {
            ("nccl.busbw", "all_reduce", 17179869184, OOP): 464.57,
            ("nccl.busbw", "all_reduce", 17179869184, IP): 464.79,
            ("nccl.algbw", "all_reduce", 1073741824, OOP): 238.02,
            ("nccl.time", "all_reduce", 4294967296, OOP): 17437,
            ("nccl.time", "all_reduce", 8589934592, IP): 34720,
            ("nccl.wrong", "all_reduce", 2147483648, IP): 0,
            ("nccl.avg_busbw", "all_reduce", None, None): 458.452,
            ("nccl.ranks", "all_reduce", None, None): 16,
        },
    },
    "all_reduce_rtx3090_2node_2rank_wrong_FAILED.txt": {
        "valid": False, "count": 27 * 8 + 2, "ops": {"all_reduce"}, "op": "all_reduce",
        "problems": ["all_reduce: #wrong > 0 in 54 results (first: 8 B out-of-place: 4)",
                     "all_reduce: Out of bounds values : 108 FAILED"],
        "values": {
            ("nccl.wrong", "all_reduce", 8, OOP): 4,
            ("nccl.wrong", "all_reduce", 2097152, OOP): 1.04858e06,  # printed in %g form
            ("nccl.wrong", "all_reduce", 536870912, IP): 2.68435e08,
            ("nccl.busbw", "all_reduce", 536870912, OOP): 7.41,
            ("nccl.time", "all_reduce", 134217728, OOP): 18679,
            ("nccl.avg_busbw", "all_reduce", None, None): 3.02663,
        },
    },
    "all_reduce_rtx5090_1gpu_ok.txt": {
        "valid": True, "count": 25 * 8 + 2, "ops": {"all_reduce"}, "op": "all_reduce",
        "values": {
            ("nccl.algbw", "all_reduce", 134217728, IP): 1777718.25,  # overflows its column
            ("nccl.busbw", "all_reduce", 134217728, IP): 0.0,  # one rank: busbw is 0 by definition
            ("nccl.algbw", "all_reduce", 134217728, OOP): 764.34,
            ("nccl.time", "all_reduce", 8, IP): 0.20,
            ("nccl.avg_busbw", "all_reduce", None, None): 0.0,
            ("nccl.ranks", "all_reduce", None, None): 1,
        },
    },
    "all_reduce_rtx5090_2gpu_test_nccl_failure.txt": {
        "valid": False, "count": 1, "ops": {"all_reduce"}, "op": "all_reduce",
        "problems": ["all_reduce: no result rows",
                     "nccl-tests reported a failure: GENOA-06: Test NCCL failure common.cu:392 "
                     "'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / ' "
                     "(and 5 more failure lines)"],
        "values": {("nccl.ranks", "all_reduce", None, None): 2,
                   ("nccl.busbw", "all_reduce", 8, OOP): None},
    },
    "allreduce_and_alltoall_rtx6000d_2node_16rank_v2.18.2.txt": {
        "valid": True, "count": 24 * 8 + 2 + 24 * 7 + 2, "ops": {"all_reduce", "alltoall"},
        "nccl_version": "2.30.1+cuda13.0",
        "values": {
            ("nccl.busbw", "all_reduce", 8589934592, OOP): 48.08,
            ("nccl.time", "all_reduce", 4294967296, OOP): 168393,
            ("nccl.busbw", "alltoall", 8589934592, IP): 45.50,
            ("nccl.wrong", "alltoall", 8589934592, OOP): 0,
            ("nccl.wrong", "alltoall", 8589934592, IP): None,  # N/A: omitted, never zero
            ("nccl.avg_busbw", "all_reduce", None, None): 21.8363,
            ("nccl.avg_busbw", "alltoall", None, None): 22.7759,
            ("nccl.ranks", "alltoall", None, None): 16,
        },
    },
}
UNITS = {"nccl.busbw": "GB/s", "nccl.algbw": "GB/s", "nccl.time": "us", "nccl.wrong": "count",
         "nccl.avg_busbw": "GB/s", "nccl.ranks": "count"}


def real(name: str) -> str:
    return (DATA / name).read_text()


def find(result, name, op, size, placement):
    want = {"op": op}
    if size is not None:
        want |= {"size": size, "placement": placement}
    found = [m for m in result.metrics if m.name == name
             and {k: m.labels.get(k) for k in want} == want and ("size" in m.labels) == (size is not None)]
    assert len(found) <= 1, found
    return found[0] if found else None


test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample(path):
    exp = EXPECTED[path.name]
    result = nccl.parse(path.read_text(), op=exp.get("op"))
    assert result.kind == "nccl"
    assert result.valid is exp["valid"], result.problems
    assert list(result.problems) == exp.get("problems", [])
    assert len(result.metrics) == exp["count"]
    assert {m.labels["op"] for m in result.metrics} == exp["ops"]
    for key, value in exp["values"].items():
        m = find(result, *key)
        if value is None:
            assert m is None, f"{key} should be absent"
        else:
            assert m is not None, f"{key} missing"
            assert m.value == pytest.approx(value, rel=1e-12)
    for m in result.metrics:
        assert m.unit == UNITS[m.name]
        if "size" in m.labels:
            assert isinstance(m.labels["size"], int) and m.labels["placement"] in (OOP, IP)
            if "dtype" in exp:
                assert (m.labels["dtype"], m.labels["redop"]) == (exp["dtype"], exp["redop"])
    if "tests" in exp:
        assert result.details["tests"] == exp["tests"]
    if "nccl_version" in exp:
        assert result.details["nccl_version"] == exp["nccl_version"]


def test_profile_selector_finds_the_16g_all_reduce_row():
    result = nccl.parse(real("all_reduce_h100_2node_16rank_oci.txt"), op="all_reduce")
    sel = {"op": "all_reduce", "size": 17179869184, "placement": "out-of-place"}
    (m,) = [m for m in result.metrics if m.name == "nccl.busbw" and m.matches(sel)]
    assert m.value == 464.57


def test_old_header_without_op_is_unknown_and_header_beats_the_argument():
    assert {m.labels["op"] for m in nccl.parse(real("all_reduce_h100_2node_16rank_oci.txt")).metrics} \
        == {"unknown"}
    text = real("all_gather_gb10_dgxspark_2node_with_mpirun_noise.txt")
    assert {m.labels["op"] for m in nccl.parse(text, op="all_reduce").metrics} == {"all_gather"}


def test_op_from_an_echoed_command_line_before_the_header():
    echo = "mpirun -n 16 ./build/all_reduce_perf -b 1G -e 16G -f 2\n"
    text = echo + real("all_reduce_h100_2node_16rank_oci.txt")
    assert {m.labels["op"] for m in nccl.parse(text).metrics} == {"all_reduce"}


def test_table_cut_short_without_summary_is_truncated():
    lines = real("all_reduce_h100_2node_16rank_oci.txt").splitlines()
    cut = "\n".join(lines[:lines.index(next(ln for ln in lines if ln.lstrip().startswith("8589934592")))])
    result = nccl.parse(cut, op="all_reduce")
    assert not result.valid
    assert result.problems == ("all_reduce: table stops at 4294967296 B before maxBytes 17179869184 "
                               "and has no summary lines: output truncated",)
    assert len(result.metrics) == 3 * 8 + 1  # rows and the rank count are kept


def test_complete_table_without_summary_lines_is_valid():
    text = "\n".join(ln for ln in real("all_reduce_h100_2node_16rank_oci.txt").splitlines()
                     if "Out of bounds" not in ln and "Avg bus bandwidth" not in ln)
    result = nccl.parse(text, op="all_reduce")
    assert result.valid and len(result.metrics) == 5 * 8 + 1


def test_crlf_line_ends_parse_the_same():
    text = real("allreduce_and_alltoall_rtx6000d_2node_16rank_v2.18.2.txt")
    assert nccl.parse(text.replace("\n", "\r\n")).metrics == nccl.parse(text).metrics


def test_the_same_op_twice_gets_instances():
    text = real("all_gather_gb10_dgxspark_2node_with_mpirun_noise.txt")
    result = nccl.parse(text + text)
    assert {m.labels["instance"] for m in result.metrics} == {0, 1}
    assert len(result.metrics) == 2 * 26 and result.valid


@pytest.mark.parametrize("text", ["", "hello\n", "# nThread one\n", "NCCL version 2.21.5\n",
                                  "#  Rank  0 Group  0 Pid 1 on h device  0 [0x0f] GPU\n"])
def test_not_nccl_output(text):
    result = nccl.parse(text)
    assert not result.valid and result.problems == (nccl.NOT_NCCL,) and result.metrics == ()


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_never_raises_on_any_prefix(path):
    text = path.read_text()
    for end in range(0, len(text), 37):
        result = nccl.parse(text[:end])
        assert result.valid or result.problems


def test_registered_as_a_parse_kind():
    assert parsers()["nccl"] is nccl.parse


@pytest.mark.parametrize(("name", "launcher"), [
    ("all_reduce_h100_2node_16rank_srun_label_nccl_tests_issue290.txt", "srun --label"),
    ("all_reduce_rtx5090_2rank_mpirun_tag_output_v2.18.0.txt", "mpirun --tag-output")])
def test_a_launcher_tag_on_every_line_is_named_and_taken_off(name, launcher):
    r = nccl.parse(real(name), op="all_reduce")
    assert r.valid and r.details["launcher"] == launcher


def test_pdsh_host_prefix_and_a_job_runner_before_mpiruns_tag():
    # constructed: the mpirun sample's lines as pdsh prints them ("host: line"), and as SkyPilot prints
    # mpirun's ("(head, rank=0, pid=3808) [1,0]<stdout>:...", seen in a public SkyPilot example)
    plain = [ln.split(":", 1)[1] if ln.startswith("[1,0]<stdout>:") else ln
             for ln in real("all_reduce_rtx5090_2rank_mpirun_tag_output_v2.18.0.txt").splitlines()
             if ln.startswith("[1,0]<stdout>:")]
    pdsh = nccl.parse("\n".join(f"gpu-node-01: {ln}" for ln in plain))
    assert pdsh.valid and pdsh.details["launcher"] == "pdsh"
    assert find(pdsh, "nccl.busbw", "all_reduce", 134217728, OOP).value == 2.30
    sky = nccl.parse("\n".join(f"(head, rank=0, pid=3808) [1,0]<stdout>:{ln}" for ln in plain))
    assert sky.valid and sky.details["launcher"] == "mpirun --tag-output"
    assert nccl.parse("\n".join(plain)).details.get("launcher") is None
