"""`harness export` and harness.export.api: one row per metric value, loaded back by pandas."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from clihelp import harness
from fleet_samples import record as node_record
from report_samples import record as sample_record

from harness import results
from harness.export.rows import COLUMNS, columns, record_rows
from harness.fleet.layout import Manifest, NodeJob, node_dir, save_manifest
from harness.history.store import open_store
from harness.model import CheckResult, Metric, RunRecord, Status

pd = pytest.importorskip("pandas")


def n_metrics(rec: RunRecord) -> int:
    return sum(len(c.metrics) for c in rec.checks)


def run_dir(tmp_path: Path, rec: RunRecord, name: str = "run") -> Path:
    d = tmp_path / name
    d.mkdir(parents=True)
    results.write(d, rec)
    return d


def test_rows_carry_who_what_when_and_the_judgement():
    rec = sample_record()
    rows = list(record_rows(rec))
    assert len(rows) == n_metrics(rec) == 16
    bw = next(r for r in rows if r["metric"] == "fio.bw")
    assert bw["node"] == "gpu-node-017" and bw["run"] == rec.run_id and bw["suite"] == "h100-acceptance"
    assert (bw["check"], bw["kind"], bw["status"], bw["outcome"], bw["verdict"]) == (
        "fio-seqread", "fio", "failed", "fail", "REJECTED")
    assert (bw["device"], bw["rw"], bw["value"], bw["unit"]) == ("nvme0n1", "read", 1.234, "GB/s")
    assert bw["time"] == "2024-05-01T10:15:53+00:00" and bw["serial"] == "S61234567890"
    temps = [r for r in rows if r["metric"] == "gpu.temp_max"]
    assert [r["gpu"] for r in temps] == [str(i) for i in range(8)]  # labels are text
    assert {r["outcome"] for r in temps} == {"warn"}  # the max over GPUs judged every one
    tflops = next(r for r in rows if r["metric"] == "gpu.tflops")
    assert tflops["outcome"] == "xfail"
    iops = next(r for r in rows if r["metric"] == "fio.iops")
    assert iops["outcome"] is None  # no expectation judged it
    cols = columns(rows)
    assert cols[: cols.index("metric") + 1] == list(COLUMNS[: COLUMNS.index("metric") + 1])
    assert cols[-5:] == list(COLUMNS[-5:]) and {"gpu", "device", "rw", "op", "size"} <= set(cols)


def test_a_label_named_like_a_column_does_not_overwrite_it():
    rec = sample_record()
    odd = CheckResult("odd", "command", Status.PASSED, metrics=(
        Metric("x", 1.0, "count", {"unit": "mine", "value": "7", "label_unit": "z"}),))
    (row,) = list(record_rows(replace(rec, checks=(odd,))))
    assert (row["unit"], row["value"]) == ("count", 1.0)
    assert (row["label_unit"], row["label_value"], row["label_label_unit"]) == ("mine", "7", "z")


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_loads_in_pandas_with_dtypes_and_row_count(tmp_path: Path, fmt: str):
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    rec = sample_record()
    out = tmp_path / f"m.{fmt}"
    r = harness("export", str(run_dir(tmp_path, rec)), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == f"{n_metrics(rec)} rows: {out}"
    from harness.export import api

    df = api.read(out)
    assert len(df) == n_metrics(rec)
    assert str(df["value"].dtype) == "float64" and str(df["time"].dtype).startswith("datetime64")
    assert str(df["time"].dt.tz) == "UTC"
    assert all(str(df[c].dtype) == "string" for c in df.columns if c not in ("time", "value"))
    assert df.loc[df.metric == "fio.iops", "value"].item() == 1234567.0
    assert sorted(df.loc[df.metric == "gpu.temp_max", "gpu"]) == [str(i) for i in range(8)]
    direct = api.load_run(run_dir(tmp_path, rec, "again"))
    pd.testing.assert_frame_equal(df, direct, check_dtype=True)


def test_csv_and_jsonl_survive_hostile_text(tmp_path: Path):
    evil = 'a,"b"\nc\t=1+1'
    rec = sample_record(evil=evil)
    d = run_dir(tmp_path, rec)
    for fmt in ("csv", "jsonl"):
        r = harness("export", str(d), "--format", fmt)
        assert r.returncode == 0, r.stderr
        path = tmp_path / f"x.{fmt}"
        path.write_text(r.stdout)
        from harness.export import api

        df = api.read(path)
        assert len(df) == n_metrics(rec) and set(df["node"]) == {"gpu-node-017" + evil}
        assert ("nvme0n1" + evil) in set(df["device"].dropna())


def _fleet(tmp_path: Path) -> tuple[Path, list[RunRecord]]:
    fleet = tmp_path / "fleet"
    nodes = [f"gpu{i:03d}" for i in range(1, 5)]
    save_manifest(fleet, Manifest("/s.yaml", "fleet-test", None, tuple(nodes), "2026-11-29T10:00:00Z",
                                  {n: NodeJob(n, str(i)) for i, n in enumerate(nodes)}))
    recs = []
    for n in nodes[:3]:
        old = node_record(n, 10.0)
        new = node_record(n, 100.0)
        results.write(_mk(node_dir(fleet, n) / f"{n}-20261128T100000Z"), old)
        results.write(_mk(node_dir(fleet, n) / f"{n}-20261129T100000Z"), new)
        recs.append(new)
    return fleet, recs  # gpu004 never ran


def _mk(p: Path) -> Path:
    p.mkdir(parents=True)
    return p


def test_a_fleet_exports_each_nodes_latest_run(tmp_path: Path):
    fleet, recs = _fleet(tmp_path)
    out = tmp_path / "fleet.csv"
    r = harness("export", str(fleet), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "warning: gpu004: no run directory" in r.stderr
    df = pd.read_csv(out)
    assert len(df) == sum(n_metrics(x) for x in recs)
    assert sorted(set(df.node)) == ["gpu001", "gpu002", "gpu003"]  # the fleet's names (the host is "vm")
    assert set(df.loc[df.metric == "app.bw", "value"]) == {100.0}  # not the older run's 10
    from harness.export import api

    assert len(api.load_fleet(fleet)) == len(df)


def test_history_exports_every_run_or_one_nodes(tmp_path: Path):
    store_path = tmp_path / "h.sqlite"
    with open_store(store_path) as store:  # type: ignore[attr-defined]
        for n in ("gpu001", "gpu002"):
            for day, bw in (("28", 90.0), ("29", 100.0)):
                rec = replace(node_record(n, bw), host=n, run_id=f"{n}-202611{day}",
                              started=f"2026-11-{day}T10:00:00Z")
                store.record(rec)
    r = harness("export", "--history", "--store", str(store_path), "--format", "jsonl")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert len(rows) == 4 * 3 and {x["run"] for x in rows} == {"gpu001-20261128", "gpu001-20261129",
                                                               "gpu002-20261128", "gpu002-20261129"}
    one = harness("export", "--history", "gpu002", "--format", "jsonl",
                  env={"HARNESS_HISTORY": str(store_path)})
    assert {json.loads(ln)["node"] for ln in one.stdout.splitlines()} == {"gpu002"}
    from harness.export import api

    df = api.load_history(store_path, node="gpu001")
    assert len(df) == 6 and list(df.time.dt.day.unique()) == [28, 29]
    missing = harness("export", "--history", "nosuch", "--store", str(store_path))
    assert missing.returncode == 2 and "no node 'nosuch'" in missing.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["{tmp}/none"], "no such directory"),
    (["{tmp}"], "neither a run directory"),
    (["{run}", "--format", "parquet"], "give --output FILE.parquet"),
    (["{run}", "-o", "{tmp}"], "is a directory"),
    (["--history", "--store", "{tmp}/none.sqlite"], "no history store"),
    ([], "give a run or fleet directory"),
    (["{bad}"], "not JSON"),
    (["{run}", "-o", "{tmp}/rows.xlsx"], "no export format has the extension .xlsx; name the file .csv, "
                                         ".jsonl, .parquet, or give --format"),
])
def test_bad_input_exits_2_and_says_why(tmp_path: Path, args: list[str], message: str):
    run = run_dir(tmp_path, sample_record())
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "results.json").write_text("{nope")
    argv = [a.format(tmp=tmp_path, run=run, bad=bad) for a in args]
    r = harness("export", *argv)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not list(tmp_path.glob(".*.tmp"))


def test_an_unknown_extension_writes_nothing_but_format_says_what_is_meant(tmp_path: Path):
    run = run_dir(tmp_path, sample_record())
    out = tmp_path / "rows.xlsx"
    assert harness("export", str(run), "-o", str(out)).returncode == 2
    assert not out.exists()
    r = harness("export", str(run), "-o", str(out), "--format", "csv")  # explicit: as asked
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("node,")
    upper = tmp_path / "ROWS.JSONL"
    assert harness("export", str(run), "-o", str(upper)).returncode == 0
    assert upper.read_text().startswith("{")


def test_a_failed_write_leaves_the_old_file(tmp_path: Path):
    out = tmp_path / "m.csv"
    out.write_text("old\n")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "results.json").write_text("{nope")
    assert harness("export", str(bad), "-o", str(out)).returncode == 2
    assert out.read_text() == "old\n"


def test_pandas_is_not_imported_by_the_cli_or_the_writers():
    code = ("import sys, harness.cli.main, harness.export.write, harness.export.sources; "
            "print('pandas' in sys.modules, 'pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
