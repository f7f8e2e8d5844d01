"""The pure fio parser on every real sample in tests/data/fio, plus edge cases around them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from samples import covers, real_samples

from harness.parsers import fio
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "fio"
SAMPLES = real_samples("fio")

# Per file: valid, problems (substrings), and exact values by (metric, job, rw), computed by
# hand from the JSON: bw_bytes / 1e9 -> GB/s, clat_ns / 1000 -> us. None = must be absent.
CRYSTAL = "/Users/alexander/CrystalDiskMark/CrystalDiskMark195681fd01a/CrystalDiskMark195681fd01a.tmp"
EXPECTED: dict[str, dict] = {
    "fio3.13_json_randrw_sync_percentiles_disk_util.json": {
        "valid": True, "version": "fio-3.13", "count": 12,
        "values": {
            ("fio.iops", "custom", "read"): 271.956816,
            ("fio.bw", "custom", "read"): 4455740 / 1e9,
            ("fio.clat_mean", "custom", "read"): 3666519.548448 / 1e3,
            ("fio.clat_p50", "custom", "read"): 6.496,
            ("fio.clat_p99", "custom", "read"): 35389.44,
            ("fio.clat_p999", "custom", "read"): 64749.568,
            ("fio.iops", "custom", "write"): 68.747804,
            ("fio.clat_p99", "custom", "write"): 87.552,
            ("fio.iops", "custom", "trim"): None,  # trim did no I/O
        },
    },
    "fio3.25_normal_fdatasync_nvme_raw.txt": {
        "valid": False, "problems": ["not fio JSON output (use --output-format=json)"], "count": 0,
    },
    "fio3.28_json_randrw_gtod_reduce_k8s.json": {
        "valid": True, "version": "fio-3.28", "count": 4,
        "values": {
            ("fio.iops", "test", "read"): 170075.741182,
            ("fio.bw", "test", "read"): 696630235 / 1e9,
            ("fio.iops", "test", "write"): 56839.645098,
            ("fio.bw", "test", "write"): 232815186 / 1e9,
            # gtod_reduce: N == 0, no percentiles -> no latency metrics at all, never zeros
            ("fio.clat_mean", "test", "read"): None,
            ("fio.clat_p99", "test", "write"): None,
        },
    },
    "fio3.33_json_randrw_libaio_direct_tmpfile.json": {
        "valid": True, "version": "fio-3.33", "count": 12,
        "values": {
            ("fio.iops", "randrw_4k", "read"): 58036.981509,
            ("fio.bw", "randrw_4k", "read"): 237719476 / 1e9,
            ("fio.clat_mean", "randrw_4k", "read"): 177.310016507,
            ("fio.clat_p50", "randrw_4k", "read"): 166.912,
            ("fio.clat_p999", "randrw_4k", "read"): 2637.824,
            ("fio.iops", "randrw_4k", "write"): 24787.606197,
            ("fio.bw", "randrw_4k", "write"): 101530034 / 1e9,
            ("fio.clat_p99", "randrw_4k", "write"): 305.152,
        },
    },
    "fio3.33_json_sync_note_before_json.txt": {
        "valid": True, "version": "fio-3.33", "count": 6,
        "values": {
            ("fio.iops", "sync_qd4", "write"): 352070.929071,
            ("fio.bw", "sync_qd4", "write"): 1442082525 / 1e9,
            ("fio.clat_p50", "sync_qd4", "write"): 1.832,
            ("fio.iops", "sync_qd4", "read"): None,
        },
    },
    "fio3.33_json_verify_error84_messages_before_json.txt": {
        "valid": False, "version": "fio-3.33", "count": 0,  # an errored job yields no metrics
        "problems": ["job verify_zero: error 84 (Invalid or incomplete multibyte or wide character)"],
        "values": {("fio.iops", "verify_zero", "read"): None},
    },
    "fio3.33_jsonplus_seqread_seqwrite_stonewall.json": {
        "valid": True, "version": "fio-3.33", "count": 12,
        "values": {
            ("fio.iops", "seqread_1m", "read"): 1413.930348,
            ("fio.bw", "seqread_1m", "read"): 1482613428 / 1e9,
            ("fio.clat_mean", "seqread_1m", "read"): 5610.080578466,
            ("fio.clat_p50", "seqread_1m", "read"): 5603.328,
            ("fio.clat_p99", "seqread_1m", "read"): 6193.152,
            ("fio.clat_p999", "seqread_1m", "read"): 9109.504,
            ("fio.bw", "seqwrite_1m", "write"): 3821082033 / 1e9,
            ("fio.iops", "seqwrite_1m", "read"): None,
            ("fio.iops", "seqread_1m", "write"): None,
        },
    },
    "fio3.33_json_three_loops_new_group_one_throttled.json": {
        "valid": True, "version": "fio-3.33", "count": 18,  # job@device names: the check splits them
        "values": {
            ("fio.iops", "rr@loop5", "read"): 37630.36963,
            ("fio.bw", "rr@loop5", "read"): 154133994 / 1e9,
            ("fio.iops", "rr@loop6", "read"): 34585.414585,
            ("fio.bw", "rr@loop6", "read"): 141661858 / 1e9,
            ("fio.iops", "rr@loop7", "read"): 107.569721,
            ("fio.bw", "rr@loop7", "read"): 440605 / 1e9,
        },
    },
    "fio3.39_jsonplus_macos_posixaio_randwrite_bins.json": {
        "valid": True, "version": "fio-3.39", "count": 6,
        "values": {
            ("fio.iops", CRYSTAL, "write"): 19621.556886,
            ("fio.bw", CRYSTAL, "write"): 20092474 / 1e9,
            ("fio.clat_mean", CRYSTAL, "write"): 406.584472656,
            ("fio.clat_p50", CRYSTAL, "write"): 189.44,
            ("fio.clat_p99", CRYSTAL, "write"): 3489.792,
            ("fio.clat_p999", CRYSTAL, "write"): 4816.896,
        },
    },
}
UNITS = {"fio.iops": "IOPS", "fio.bw": "GB/s", "fio.clat_mean": "us", "fio.clat_p50": "us",
         "fio.clat_p99": "us", "fio.clat_p999": "us"}


def find(result, name, job, rw):
    found = [m for m in result.metrics if m.name == name and m.labels == {"job": job, "rw": rw}]
    assert len(found) <= 1
    return found[0] if found else None


test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample(path):
    exp = EXPECTED[path.name]
    result = fio.parse(path.read_text())
    assert result.kind == "fio"
    assert result.valid is exp["valid"]
    for want in exp.get("problems", []):
        assert any(want in p for p in result.problems), result.problems
    if exp["valid"]:
        assert result.problems == ()
    assert len(result.metrics) == exp["count"]
    if "version" in exp:
        assert result.details["fio_version"] == exp["version"]
    for (name, job, rw), value in exp.get("values", {}).items():
        m = find(result, name, job, rw)
        if value is None:
            assert m is None, f"{name} {job} {rw} should be absent"
        else:
            assert m is not None, f"{name} {job} {rw} missing"
            assert m.value == pytest.approx(value, rel=1e-9)
    for m in result.metrics:
        assert m.unit == UNITS[m.name]
        assert set(m.labels) == {"job", "rw"} and m.labels["rw"] in ("read", "write", "trim")


def test_registry_lists_fio():
    assert parsers()["fio"] is fio.parse


def real(name: str) -> str:
    return (DATA / name).read_text()


def test_text_before_and_after_the_json_is_ignored():
    text = real("fio3.33_json_randrw_libaio_direct_tmpfile.json")
    noisy = "fio: note {not json}\n{\"other\": 1}\n" + text + "\nJobs: done {trailing}\n"
    assert fio.parse(noisy).metrics == fio.parse(text).metrics
    assert fio.parse(noisy).valid


@pytest.mark.parametrize("text, problem", [
    ("", "not fio JSON output"),
    ("Jobs: 1 (f=1): [R(1)]", "not fio JSON output"),
    ('{"fio version": "fio-3.33", "jobs": []}', "has no jobs"),
    ('{"fio version": "fio-3.33"}', "has no jobs"),
    ('{"fio version": "fio-3.33", "jobs": [{"jobname": "a", "error": 0, "read": '
     '{"io_bytes": 0, "total_ios": 0, "iops": 0, "bw_bytes": 0}}]}', "no job did any I/O"),
])
def test_invalid_outputs(text, problem):
    result = fio.parse(text)
    assert not result.valid
    assert any(problem in p for p in result.problems), result.problems
    assert result.metrics == ()


def test_truncated_json_is_not_fio_output():
    text = real("fio3.33_json_randrw_libaio_direct_tmpfile.json")
    result = fio.parse(text[: len(text) // 2])
    assert not result.valid and "not fio JSON output" in result.problems[0]


def test_fio2_style_units_bw_kib_and_clat_usec():
    # fio < 3.0 wrote `bw` in KiB/s and `clat` in usec, without bw_bytes / clat_ns.
    doc = {"fio version": "fio-2.2.10", "jobs": [{"jobname": "old", "error": 0, "read": {
        "io_bytes": 1000, "total_ios": 250, "iops": 250.0, "bw": 1000,
        "clat": {"min": 10, "max": 900, "mean": 123.5,
                 "percentile": {"50.000000": 100, "99.000000": 800, "99.900000": 880}}}}]}
    result = fio.parse(json.dumps(doc))
    assert result.valid
    values = {m.name: m.value for m in result.metrics}
    assert values == pytest.approx({"fio.iops": 250.0, "fio.bw": 1000 * 1024 / 1e9,
                                    "fio.clat_mean": 123.5, "fio.clat_p50": 100.0,
                                    "fio.clat_p99": 800.0, "fio.clat_p999": 880.0})


def test_percentiles_disabled_keeps_mean_only():
    doc = json.loads(real("fio3.33_json_randrw_libaio_direct_tmpfile.json"))
    for rw in ("read", "write"):
        del doc["jobs"][0][rw]["clat_ns"]["percentile"]
    names = {m.name for m in fio.parse(json.dumps(doc)).metrics}
    assert names == {"fio.iops", "fio.bw", "fio.clat_mean"}


def test_repeated_job_names_get_an_instance_label():
    doc = json.loads(real("fio3.33_json_randrw_libaio_direct_tmpfile.json"))
    doc["jobs"].append(doc["jobs"][0])
    result = fio.parse(json.dumps(doc))
    instances = {m.labels["instance"] for m in result.metrics}
    assert instances == {0, 1} and len(result.metrics) == 24


@pytest.mark.parametrize("name, want", [
    # runtime ms / 1000 and io_bytes, read by hand from each file; trim did no I/O
    ("fio3.13_json_randrw_sync_percentiles_disk_util.json",
     {("custom", "read"): (93.923, 418496512.0), ("custom", "write"): (93.923, 105791488.0)}),
    ("fio3.33_jsonplus_seqread_seqwrite_stonewall.json",
     {("seqread_1m", "read"): (1.005, 1490026496.0), ("seqwrite_1m", "write"): (1.003, 3832545280.0)}),
    ("fio3.33_json_verify_error84_messages_before_json.txt", {}),  # an errored job is left out
    ("fio3.25_normal_fdatasync_nvme_raw.txt", {}),  # not JSON
])
def test_totals_per_job_and_direction(name, want):
    assert fio.totals((DATA / name).read_text()) == want
