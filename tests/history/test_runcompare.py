"""`compare_runs`: side-by-side series, ordered by the largest regression the catalogue defines."""

from __future__ import annotations

from harness.history.compare import compare_runs, table_rows, to_json
from harness.model import CheckResult, Metric, RunRecord, Status


def _run(run_id: str, metrics: list[Metric], status: Status = Status.PASSED) -> RunRecord:
    return RunRecord(run_id, "n1", {"name": "q"}, {"name": "p"}, "2026-01-01T00:00:00Z", "", 1.0,
                     {"host": {"hostname": "n1"}}, (CheckResult("c", "fio", status, metrics=tuple(metrics)),),
                     "test")


def test_rows_are_ordered_by_regression_in_the_bad_direction():
    a = _run("a", [Metric("fio.iops", 1000, "IOPS", {"job": "r"}),
                   Metric("fio.clat_p99", 100, "us", {"job": "r"}),
                   Metric("fio.bw", 2.0, "GB/s", {"job": "w"}), Metric("gpu.power_mean", 500, "W"),
                   Metric("host.cpu_cores", 64, "count"), Metric("fio.iops", 10, "IOPS", {"job": "gone"})])
    b = _run("b", [Metric("fio.iops", 900, "IOPS", {"job": "r"}),  # -10%: 10% worse
                   Metric("fio.clat_p99", 130, "us", {"job": "r"}),  # +30%: 30% worse
                   Metric("fio.bw", 2.2, "GB/s", {"job": "w"}),  # +10%: better
                   Metric("gpu.power_mean", 600, "W"),  # +20%, no direction
                   Metric("host.cpu_cores", 64, "count"), Metric("fio.iops", 5, "IOPS", {"job": "new"})])
    rows = compare_runs(a, b)
    order = [(r.key.metric, r.key.label_dict.get("job")) for r in rows]
    assert order == [("fio.clat_p99", "r"), ("fio.iops", "r"), ("fio.bw", "w"), ("gpu.power_mean", None),
                     ("host.cpu_cores", None), ("fio.iops", "gone"), ("fio.iops", "new")]
    assert [round(r.regression_pct or 0, 6) for r in rows[:3]] == [30.0, 10.0, -10.0]
    cells = table_rows(rows)
    assert cells[0] == ("c/fio.clat_p99{job=r}", "100 us", "130 us", "+30.0 %", "↓ lower", "worse")
    assert cells[1][4] == "↑ higher" and cells[3][4] == ""  # gpu.power_mean: no direction
    assert cells[2][-1] == "better" and cells[3][-1] == "" and cells[-2][-1] == "only in A"
    assert cells[-1][1:3] == ("—", "5 IOPS")
    doc = to_json(a, b, rows)
    assert doc["rows"][0]["regression_pct"] == 30.0 and doc["a"]["run_id"] == "a"


def test_numbers_read_as_the_one_formatter_writes_them():
    """Bytes were '25,276,502,016 B' and a latency '36,960 us': GiB and ms, as everywhere else."""
    a = _run("a", [Metric("host.memory", 25276502016, "B"), Metric("fio.clat_p99", 36960, "us", {"job": "r"}),
                   Metric("fio.bw", 0.9, "GB/s", {"job": "w"})])
    b = _run("b", [Metric("host.memory", 25276502016, "B"), Metric("fio.clat_p99", 1200, "us", {"job": "r"}),
                   Metric("fio.bw", 1.25, "GB/s", {"job": "w"})])
    cells = {c[0]: c for c in table_rows(compare_runs(a, b))}
    assert cells["c/host.memory"][1:3] == ("23.54 GiB", "23.54 GiB")
    assert cells["c/fio.clat_p99{job=r}"][1:4] == ("36.96 ms", "1.200 ms", "-96.8 %")
    assert cells["c/fio.bw{job=w}"][1:3] == ("900 MB/s", "1.250 GB/s")
    assert not any("e+" in x or "e-" in x for c in cells.values() for x in c[1:4])


def test_repeats_fold_by_median_and_errored_checks_are_left_out():
    a = _run("a", [Metric("fio.iops", v, "IOPS", {"job": "r", "repeat": i})
                   for i, v in enumerate((90, 100, 500))])
    b = _run("b", [Metric("fio.iops", 50, "IOPS", {"job": "r"})], status=Status.ERRORED)
    (row,) = compare_runs(a, b)
    assert (row.a, row.b, row.key.labels) == (100, None, (("job", "r"),))


def test_extreme_values_give_finite_percentages_and_valid_json(tmp_path):
    """1e308 -> 0 is -100 %, not -inf; what is not finite is null, and --json prints valid JSON."""
    import json
    import subprocess
    import sys

    from clihelp import ROOT

    from harness import results

    a = _run("a", [Metric("fio.bw", 1e308, "GB/s", {"job": "w"}), Metric("fio.iops", -1e308, "IOPS")])
    b = _run("b", [Metric("fio.bw", 0.0, "GB/s", {"job": "w"}), Metric("fio.iops", 1e308, "IOPS")])
    rows = {r.key.metric: r for r in compare_runs(a, b)}
    assert rows["fio.bw"].delta_pct == -100.0 and rows["fio.bw"].regression_pct == 100.0
    assert rows["fio.iops"].delta_pct == 200.0  # (b - a) overflows; scaled first it does not
    dirs = []
    for rec in (a, b):
        d = tmp_path / rec.run_id
        d.mkdir()
        results.write(d, rec)
        dirs.append(str(d))
    r = subprocess.run([sys.executable, "-m", "harness", "compare", *dirs, "--json", "--history", "off"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr

    def refuse(word: str) -> None:
        raise AssertionError(f"not JSON: {word}")

    doc = json.loads(r.stdout, parse_constant=refuse)
    assert {row["metric"]: row["delta_pct"] for row in doc["rows"]} == {"fio.bw": -100.0, "fio.iops": 200.0}
