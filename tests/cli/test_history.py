"""`harness run` records into history; `harness history`, `history import` and `compare` on the
command line, with exit codes; a broken store costs a warning, never the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import QUICK_FIO, harness, results, run_dirs, write
from historyhelp import derive, load

from harness.history.store import SqliteStore

NO_ENV = {"HARNESS_HISTORY": ""}  # the default: the node's store (HARNESS_STATE_DIR in tests)
ACCEPTANCE_FIO = QUICK_FIO.replace("name: quick\n", "name: quick\ntags: [acceptance]\n")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """Two runs, the default store in <tmp>/state; returns (the store's folder, run dirs)."""
    tmp = tmp_path_factory.mktemp("hist")
    suite = write(tmp / "quick.yaml", ACCEPTANCE_FIO)
    out = tmp / "reports"
    env = {**NO_ENV, "HARNESS_LOCK_FILE": str(tmp / "run.lock"),  # before conftest's per-test lock
           "HARNESS_STATE_DIR": str(tmp / "state")}
    for _ in range(2):
        r = harness("run", str(suite), "--profile", "generic", "--output", str(out), env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "warning" not in r.stderr
    assert not (out / "history.sqlite").exists()
    return tmp / "state", run_dirs(out)


def test_every_run_is_recorded_in_the_node_store(recorded):
    out, dirs = recorded
    with SqliteStore(out / "history.sqlite") as store:
        (node,) = store.nodes()
        assert [r.run_id for r in store.runs(node.node_id)] == [d.name for d in dirs]
        assert [r.run_dir for r in store.runs(node.node_id)] == [str(d) for d in dirs]
    first, second = (results(d) for d in dirs)
    assert first["history"]["node"]["runs_before"] == 0 and first["history"]["golive"] is None
    assert second["history"]["golive"]["run_id"] == dirs[0].name
    assert second["history"]["previous"]["run_id"] == dirs[0].name
    trend = second["history"]["trends"][0]
    assert trend["metric"] == "fio.iops" and len(trend["points"]) == 2
    assert not any(c["id"] == "drift" for c in second["checks"])  # no drift rules, no drift check
    assert "History and trends" in (dirs[1] / "report.html").read_text()


def test_history_lists_nodes_and_a_node_s_runs(recorded):
    out, dirs = recorded
    store = str(out / "history.sqlite")
    r = harness("history", "--history", store)
    assert r.returncode == 0, r.stderr
    host = load(dirs[0]).host
    assert r.stdout.splitlines()[0] == "nodes" and f" {host} " in r.stdout and "ACCEPTED" in r.stdout
    r = harness("history", host, "--history", store)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"node {host} (id 1")
    assert "fio.iops randread_4k/read" in lines[1]
    assert [ln.split()[2] for ln in lines[3:5]] == [d.name for d in dirs]
    r = harness("history", host, "--json", env={"HARNESS_HISTORY": store})
    data = json.loads(r.stdout)
    assert [x["run_id"] for x in data["runs"]] == [d.name for d in dirs]
    assert all(isinstance(v, float) for x in data["runs"] for v in x["values"])
    r = harness("history", "no-such-node", "--history", store)
    assert r.returncode == 2 and "no node 'no-such-node'" in r.stderr and host in r.stderr
    r = harness("history", "--history", str(out / "missing.sqlite"))
    assert r.returncode == 2 and "no history store at" in r.stderr


def test_import_adds_runs_and_keeps_swaps_visible(recorded, tmp_path: Path):
    _, dirs = recorded
    later = derive(load(dirs[1]), "later-run", "2099-01-01T00:00:00Z", system_serial=None,
                   driver="999.1")
    (tmp_path / "later").mkdir()
    (tmp_path / "later" / "results.json").write_text(json.dumps(later.to_dict()))
    store = tmp_path / "h.sqlite"
    r = harness("history", "import", *map(str, dirs), str(tmp_path / "later"), "--history", str(store))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == f"imported 3 run(s) into {store}"
    with SqliteStore(store) as s:
        (node,) = s.nodes()
        assert [x.run_id for x in s.runs(node.node_id)][-1] == "later-run"
    r = harness("history", "import", str(tmp_path), "--history", str(store))
    assert r.returncode == 2 and "not a run directory" in r.stderr


def test_compare_two_real_runs(recorded):
    _, dirs = recorded
    r = harness("compare", str(dirs[0]), str(dirs[1]), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["a"]["run_id"] == dirs[0].name and data["b"]["run_id"] == dirs[1].name
    directed = [x["regression_pct"] for x in data["rows"] if x["regression_pct"] is not None]
    assert directed == sorted(directed, reverse=True) and len(directed) >= 12
    names = {x["metric"] for x in data["rows"]}
    assert {"fio.iops", "fio.bw", "fio.clat_p99", "host.cpu_cores"} <= names
    r = harness("compare", str(dirs[0]), str(dirs[1]))
    assert r.returncode == 0 and r.stdout.splitlines()[1].split()[:3] == ["series", "A", "B"]
    r = harness("compare", str(dirs[0]), "/nonexistent/run")
    assert r.returncode == 2 and "neither a run directory nor a run id" in r.stderr


def test_history_off_and_a_broken_store_never_cost_the_run(tmp_path: Path):
    suite = write(tmp_path / "quick.yaml", QUICK_FIO)
    out = tmp_path / "off"
    r = harness("run", str(suite), "--profile", "generic", "--output", str(out), "--only", "inventory",
                env={"HARNESS_HISTORY": "off"})
    assert r.returncode == 0 and not (out / "history.sqlite").exists()
    assert results(run_dirs(out)[0])["history"] == {}
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not sqlite at all " * 200)
    for store in (blocker / "history.sqlite", junk):
        out = tmp_path / f"r-{store.name}"
        r = harness("run", str(suite), "--profile", "generic", "--output", str(out), "--only", "inventory",
                    "--history", str(store))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "warning: history:" in r.stderr and "this run is not recorded" in r.stderr
        (run_dir,) = run_dirs(out)
        doc = results(run_dir)
        assert doc["verdict"] == "ACCEPTED" and doc["history"] == {}
        assert (run_dir / "report.html").is_file()
