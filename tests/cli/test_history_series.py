"""History that compares like with like, through the CLI: series keyed by suite and parameters,
go-live from an acceptance suite or a pin, `compare` naming what differs, one store per node
whatever --output is, vendor placeholder serials, and many writers on one store."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from clihelp import QUICK_FIO, ROOT, harness, results, run_dirs, write
from historyhelp import acceptance, derive, gpus, load, quick_runs

from harness.history.store import SqliteStore
from harness.model import RunRecord

DRIFT = QUICK_FIO + """\
drift:
  - {metric: fio.iops, labels: {job: randread_4k}, vs: golive, max_drop_pct: 99}
  - {metric: fio.iops, labels: {job: randread_4k}, vs: previous, max_drop_pct: 99}
"""


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> RunRecord:
    (run_dir,) = quick_runs(tmp_path_factory.mktemp("series"), 1)
    return load(run_dir)


def _save(rec: RunRecord, where: Path) -> Path:
    where.mkdir(parents=True)
    (where / "results.json").write_text(json.dumps(rec.to_dict()))
    return where


def _as(rec: RunRecord, suite: str, fio_params: str | None = None) -> RunRecord:
    """The record as a run of another suite; `fio_params` another parameter digest for fio."""
    params = dict(rec.suite.get("params") or {})
    if fio_params:
        params["fio"] = fio_params
    return replace(rec, suite={**rec.suite, "name": suite, "params": params})


def _iops(doc: dict, vs: str) -> dict:
    drift = next(c for c in doc["checks"] if c["id"] == "drift")
    return next(e for e in drift["evaluations"] if e["labels"]["vs"] == vs)


def test_drift_and_the_header_pair_only_runs_of_the_same_series(real: RunRecord, tmp_path: Path):
    # before: smoke's fio-quick, quick's and quarterly's formed one series; go-live was the
    # quick-start smoke run; the header named another "previous run" than drift used
    def d(run_id: str, day: int, scale: float) -> RunRecord:
        return derive(real, run_id, f"2026-01-{day:02d}T00:00:00Z", system_serial=None,
                      scale={"fio.iops": scale})
    past = [_as(d("smoke-first", 1, 5.0), "smoke", "smoke-fio"),  # first accepted, not acceptance
            acceptance(_as(d("golive", 2, 3.0), "acceptance")),  # same fio parameters: pairs
            d("quick-prev", 3, 2.0),
            _as(d("quick-other-params", 4, 7.0), "quick", "4s-256M"),  # same suite, other fio
            _as(d("smoke-late", 5, 9.0), "smoke", "smoke-fio")]
    store = tmp_path / "h.sqlite"
    dirs = [_save(r, tmp_path / "in" / r.run_id) for r in past]
    assert harness("history", "import", *map(str, dirs), "--history", str(store)).returncode == 0
    out = tmp_path / "out"
    r = harness("run", str(write(tmp_path / "drift.yaml", DRIFT)), "--profile", "generic", "--output",
                str(out), "--history", str(store))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = results(run_dirs(out)[0])
    h = doc["history"]
    assert h["golive"]["run_id"] == "golive" and h["golive"]["suite"] == "acceptance"
    assert h["previous"]["run_id"] == "quick-prev"
    assert "since go-live (golive, 2026-01-02" in _iops(doc, "go-live")["message"]
    assert "since the previous run (quick-prev, 2026-01-03" in _iops(doc, "previous")["message"]
    trend = next(t for t in h["trends"] if t["metric"] == "fio.iops" and t["labels"]["job"] == "randread_4k")
    assert [p["run_id"] for p in trend["points"]][:-1] == ["quick-prev"]  # only this suite's like runs
    html = (run_dirs(out)[0] / "report.html").read_text()
    assert "Go-live run</dt><dd>golive (2026-01-02" in html and "Previous run</dt><dd>quick-prev (" in html

    # pinned explicitly: the next run compares with the pinned run, and says so
    r = harness("history", "pin", "quick-prev", "--as", "go-live", "--history", str(store))
    assert r.returncode == 0 and "is now the go-live run of node" in r.stdout, r.stderr
    r = harness("run", str(tmp_path / "drift.yaml"), "--profile", "generic", "--output", str(out),
                "--history", str(store))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = results(run_dirs(out)[-1])
    assert doc["history"]["golive"]["run_id"] == "quick-prev" and doc["history"]["golive"]["how"] == "pinned"
    assert "since go-live (quick-prev," in _iops(doc, "go-live")["message"]
    for bad, why in (("no-such-run", "no run 'no-such-run'"), ):
        r = harness("history", "pin", bad, "--as", "go-live", "--history", str(store))
        assert r.returncode == 2 and why in r.stderr
    rejected = _save(replace(derive(real, "rej", "2026-01-06T00:00:00Z", system_serial=None),
                             checks=tuple(replace(c, status=c.status.__class__("failed"))
                                          for c in real.checks)), tmp_path / "in" / "rej")
    assert harness("history", "import", str(rejected), "--history", str(store)).returncode == 0
    r = harness("history", "pin", "rej", "--as", "go-live", "--history", str(store))
    assert r.returncode == 2 and "only an accepted run" in r.stderr


def test_compare_says_when_suites_or_parameters_differ(real: RunRecord, tmp_path: Path):
    # before: comparing a smoke run with a quarterly run gave no hint that the suites differ
    a = _save(_as(derive(real, "smoke-a", "2026-01-01T00:00:00Z"), "smoke", "smoke-fio"), tmp_path / "a")
    b = _save(derive(real, "quick-b", "2026-01-02T00:00:00Z"), tmp_path / "b")
    r = harness("compare", str(a), str(b))
    assert r.returncode == 0, r.stderr
    assert "note: suites differ: A ran smoke, B ran quick" in r.stdout
    assert "note: parameters differ for fio: those checks are not paired" in r.stdout
    data = json.loads(harness("compare", str(a), str(b), "--json").stdout)
    fio = [x for x in data["rows"] if x["check"] == "fio"]
    assert fio and all(x["a"] is None or x["b"] is None for x in fio)  # never paired
    inv = [x for x in data["rows"] if x["check"] == "inventory"]
    assert inv and all(x["a"] is not None and x["b"] is not None for x in inv)  # paired what it can
    same = harness("compare", str(b), str(b), "--json")
    assert json.loads(same.stdout)["notes"] == []


def test_the_store_follows_the_node_not_the_output(tmp_path: Path, state_dir: Path):
    # before: `harness run -o /srv/q2027q1` said "no earlier run of this node"
    suite = write(tmp_path / "s.yaml", QUICK_FIO)
    for out in ("first", "second"):
        time.sleep(1.1)  # run ids are host + UTC second: two runs in one second would be one run
        r = harness("run", str(suite), "--profile", "generic", "--only", "inventory", "--output",
                    str(tmp_path / out), env={"HARNESS_HISTORY": ""})
        assert r.returncode == 0, r.stdout + r.stderr
    doc = results(run_dirs(tmp_path / "second")[0])
    assert doc["history"]["store"] == str(state_dir / "history.sqlite")
    assert doc["history"]["node"]["runs_before"] == 1
    assert not (tmp_path / "first" / "history.sqlite").exists()
    r = harness("history", "--json", env={"HARNESS_HISTORY": ""})  # the same default store is read
    assert r.returncode == 0 and json.loads(r.stdout)[0]["runs"] == 2


def test_placeholder_serials_never_merge_two_machines(real: RunRecord, tmp_path: Path):
    # before: DMI serial 01234567890123456789AB made two machines one node
    store = tmp_path / "h.sqlite"
    dirs = []
    for i, serial in enumerate(("01234567890123456789AB", "To Be Filled By O.E.M.", "Default string",
                                "0000000000")):
        a = derive(real, f"a{i}", f"2026-01-0{i + 1}T00:00:00Z", hostname=f"gpu-a{i}", system_serial=serial,
                   gpu_list=gpus())
        b = derive(real, f"b{i}", f"2026-01-0{i + 1}T00:00:01Z", hostname=f"gpu-b{i}", system_serial=serial,
                   gpu_list=gpus(swapped=range(8), new_serial_base=1753724100000 + 10 * i))
        dirs += [_save(a, tmp_path / a.run_id), _save(b, tmp_path / b.run_id)]
    r = harness("history", "import", *map(str, dirs), "--history", str(store))
    assert r.returncode == 0, r.stderr
    nodes = json.loads(harness("history", "--json", "--history", str(store)).stdout)
    assert len({n["node_id"] for n in nodes}) >= 5  # gpu-a* share GPUs (one machine renamed); b* never
    assert all(n["system_serial"] is None for n in nodes)


def test_many_writers_share_one_store(real: RunRecord, tmp_path: Path):
    """Six `history import` processes at once into one new store (a fleet on a shared path)."""
    store = tmp_path / "shared" / "h.sqlite"
    procs = []
    for i in range(6):
        rec = derive(real, f"n{i}-run", "2026-01-01T00:00:00Z", hostname=f"n{i}", system_serial=f"SER-{i}")
        d = _save(rec, tmp_path / f"n{i}")
        procs.append(subprocess.Popen([sys.executable, "-m", "harness", "history", "import", str(d),
                                       "--history", str(store)], cwd=ROOT, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [e for _, e in outs]
    with SqliteStore(store) as s:
        assert sorted(n.name for n in s.nodes()) == [f"n{i}" for i in range(6)]
        assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # a local file system


def test_the_history_table_shows_series_as_the_store_keys_them(real: RunRecord, tmp_path: Path):
    """smoke's 4 s fio and quick's were one fio.iops column; the store keeps them apart."""
    runs = [_as(derive(real, "smoke-1", "2026-01-01T00:00:00Z"), "smoke", "smoke-fio"),
            derive(real, "quick-1", "2026-01-02T00:00:00Z"),
            _as(derive(real, "smoke-2", "2026-01-03T00:00:00Z"), "smoke", "smoke-fio")]
    store = tmp_path / "h.sqlite"
    dirs = [_save(r, tmp_path / "in" / r.run_id) for r in runs]
    assert harness("history", "import", *map(str, dirs), "--history", str(store)).returncode == 0
    doc = json.loads(harness("history", real.host, "--json", "--history", str(store)).stdout)
    iops = [k for k in doc["key_metrics"]
            if k["metric"] == "fio.iops" and k["labels"]["job"] == "randread_4k"]
    assert len({k["params"] for k in iops}) == len(iops) == 2  # one column per series
    by_params = {k["params"]: doc["key_metrics"].index(k) for k in iops}
    values = {r["run_id"]: r["values"] for r in doc["runs"]}
    smoke_col = by_params["smoke-fio"]
    assert values["quick-1"][smoke_col] is None and values["smoke-1"][smoke_col] is not None
    text = harness("history", real.host, "--history", str(store)).stdout
    assert "(smoke)" in text and "(quick)" in text, text
