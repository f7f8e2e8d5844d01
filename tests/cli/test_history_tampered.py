"""A history store someone else edited (issue #26.5): `harness run` keeps the verdict its checks
earned, with one warning naming the bad rows; `history`, `history NODE` and `compare` answer
with what is readable and the same warning, never an internal error. Sixteen tamperings of a
real store (two real runs), each driven through the command line."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from clihelp import QUICK_FIO, harness, results, run_dirs, write

ROW1 = " WHERE rowid = (SELECT min(rowid) FROM metrics)"
TAMPERINGS = {  # name -> (SQL on the store, or None: the file is overwritten; what the warning names)
    "value abc": ("UPDATE metrics SET value = 'abc'" + ROW1,
                  "value is 'abc', not a finite number"),
    "value blob": ("UPDATE metrics SET value = X'00ff'" + ROW1,
                   "value is b'\\x00\\xff', not a finite number"),
    "value 1e999": ("UPDATE metrics SET value = 1e999" + ROW1,
                    "value is inf, not a finite number"),
    "labels not JSON": ("UPDATE metrics SET labels = '{not json'" + ROW1,
                        "labels is '{not json', not JSON"),
    "labels a list": ("UPDATE metrics SET labels = '[1, 2]'" + ROW1,
                      "labels is '[1, 2]', not an object"),
    "metric name a blob": ("UPDATE metrics SET name = X'41'" + ROW1,
                           "name is b'A', not text"),
    "identity {": ("UPDATE runs SET identity = '{'", "identity is '{', not JSON"),
    "identity null": ("UPDATE runs SET identity = 'null'", "identity is 'null', not an object"),
    "identity of the wrong types": ("UPDATE runs SET identity = '{\"gpus\": 7}'", "of the wrong type"),
    "params not JSON": ("UPDATE runs SET params = '{'", "params is '{', not JSON"),
    "tags not JSON": ("UPDATE runs SET tags = 'nope'", "tags is 'nope', not JSON"),
    "hostname a blob": ("UPDATE runs SET hostname = X'00'", "hostname is b'\\x00', not text"),
    "node name null": ("UPDATE nodes SET name = X'00'", "name is b'\\x00', not text"),
    "schema_version abc": ("UPDATE meta SET value = 'abc' WHERE key = 'schema_version'",
                           "meta schema_version is 'abc', not a number"),
    "metrics table dropped": ("DROP TABLE metrics", "cannot read: no such table: metrics"),
    "not a database": (None, "file is not a database"),
}
UNUSABLE = ("schema_version abc", "metrics table dropped", "not a database")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Path]]:
    """Two real runs recorded: (suite, store, run dirs)."""
    tmp = tmp_path_factory.mktemp("tamper")
    suite = write(tmp / "quick.yaml", QUICK_FIO)
    db = tmp / "history.sqlite"
    for _ in range(2):
        r = harness("run", str(suite), "--profile", "generic", "--output", str(tmp / "runs"), "--only",
                    "inventory", "--history", str(db), env={"HARNESS_LOCK_FILE": str(tmp / "lock")})
        assert r.returncode == 0 and "warning" not in r.stderr, r.stdout + r.stderr
    with sqlite3.connect(db) as c:  # one file, no WAL beside it: a copy is the whole store
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return suite, db, run_dirs(tmp / "runs")


def _tampered(store: tuple[Path, Path, list[Path]], how: str, tmp: Path) -> Path:
    db = tmp / "tampered.sqlite"
    shutil.copy(store[1], db)
    sql, _ = TAMPERINGS[how]
    if sql is None:
        db.write_bytes(b"SQLite format 2\0" + b"\x17" * 8192)
    else:
        with sqlite3.connect(db) as c:
            c.execute(sql)
        c.close()
    return db


def _one_warning(stderr: str, names: str) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len([ln for ln in lines if ln.startswith("warning:")]) == 1, stderr
    assert names in stderr, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(TAMPERINGS))
def test_a_tampered_store_never_flips_the_verdict(store, tmp_path: Path, how: str) -> None:
    suite, _, dirs = store
    db = _tampered(store, how, tmp_path)
    _, names = TAMPERINGS[how]
    r = harness("run", str(suite), "--profile", "generic", "--output", str(tmp_path / "out"), "--only",
                "inventory", "--history", str(db))
    assert r.returncode == 0, r.stdout + r.stderr
    _one_warning(r.stderr, names)
    (run_dir,) = run_dirs(tmp_path / "out")
    assert results(run_dir)["verdict"] == "ACCEPTED"
    if how in UNUSABLE:
        assert "this run is not recorded" in r.stderr
    else:
        assert "skipped" in r.stderr and ("row" in r.stderr)

    for args in (["history"], ["history", "1"], ["compare", dirs[0].name, dirs[1].name]):
        r = harness(*args, "--history", str(db))
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        if r.returncode == 0:  # what it needed was readable: the answer, and the warning if it met bad rows
            assert r.stdout.strip(), args
            if "warning" in r.stderr:
                _one_warning(r.stderr, names)
        else:  # the store (or the one row asked for) is unreadable: said so in a line or two
            assert r.returncode in (2, 3) and len(r.stderr.strip().splitlines()) <= 2, (args, r.stderr)
            assert names in r.stderr or "neither a run directory nor a run id" in r.stderr, (args, r.stderr)

def test_the_bad_rows_are_named_and_the_good_ones_still_read(store, tmp_path: Path) -> None:
    db = _tampered(store, "value abc", tmp_path)
    r = harness("history", "1", "--json", "--history", str(db))
    assert r.returncode == 0, r.stderr
    assert "metrics row 1 (run " in r.stderr and "value is 'abc', not a finite number" in r.stderr
    assert '"run_id"' in r.stdout  # both runs listed, the first without its bad metric
    r = harness("export", "--history", "--store", str(db), "-o", str(tmp_path / "h.csv"))
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "metrics row 1 (run " in warnings[0], r.stderr
    assert (tmp_path / "h.csv").read_text().count("\n") > 1
