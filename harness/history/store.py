"""History of runs: a small storage layer (the Store protocol) and its SQLite implementation.

Runs are keyed by run id and belong to a node, resolved by serial numbers (harness.history.identity),
so a renamed host or a swapped GPU stays the same node. Only metrics of checks that measured
validly (passed, recorded, warned, failed: drift.VALID) are stored. The schema carries a version in `meta`.

Several writers may share one file (a fleet's nodes on a shared file system): each write is one
IMMEDIATE transaction under a 60 s busy timeout; WAL is used only on local file systems, since
its shared memory index does not work across hosts (NFS, Lustre, GPFS, CIFS...).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, TypeVar

from harness.errors import StorageError
from harness.history import rows
from harness.history.drift import VALID
from harness.history.identity import NodeIdentity, identity_of, same_node
from harness.history.series import suite_params, suite_tags
from harness.model import Metric, RunRecord

SCHEMA_VERSION = 2
BUSY_TIMEOUT_S = 60.0
# file systems where WAL's shared-memory index is not shared between hosts
_NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs",
               "9p", "afs", "ocfs2", "gfs2", "fuse", "pvfs2", "orangefs", "wekafs", "vast")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (
    node_id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    system_serial TEXT,
    first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    node_id INTEGER NOT NULL REFERENCES nodes(node_id),
    hostname TEXT NOT NULL,
    system_serial TEXT,
    identity TEXT NOT NULL,
    suite TEXT NOT NULL,
    profile TEXT NOT NULL,
    verdict TEXT NOT NULL,
    started TEXT NOT NULL,
    finished TEXT NOT NULL,
    run_dir TEXT,
    harness_version TEXT NOT NULL,
    recorded TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_node ON runs(node_id, started);
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    check_id TEXT NOT NULL,
    name TEXT NOT NULL,
    labels TEXT NOT NULL,
    value REAL NOT NULL,
    unit TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS metrics_by_run ON metrics(run_id);
"""

_SCHEMA_2 = """
ALTER TABLE runs ADD COLUMN params TEXT;
ALTER TABLE runs ADD COLUMN tags TEXT;
CREATE TABLE IF NOT EXISTS pins (
    node_id INTEGER NOT NULL REFERENCES nodes(node_id),
    kind TEXT NOT NULL,
    run_id TEXT NOT NULL,
    pinned TEXT NOT NULL,
    PRIMARY KEY (node_id, kind)
);
"""


@dataclass(frozen=True)
class NodeRow:
    """A node: its store id, latest hostname, system serial and when it was seen."""

    node_id: int
    name: str
    system_serial: str | None
    first_seen: str
    last_seen: str


@dataclass(frozen=True)
class RunRow:
    """One recorded run (no metrics; see Store.metrics)."""

    run_id: str
    node_id: int
    hostname: str
    identity: NodeIdentity
    suite: str
    profile: str
    verdict: str
    started: str
    finished: str
    run_dir: str | None
    params: Mapping[str, str] = field(default_factory=dict)  # check id -> parameter digest
    tags: tuple[str, ...] = ()  # the suite's tags


class Store(Protocol):
    """What history needs from a database; SqliteStore is the one implementation."""

    path: str
    problems: list[str]  # the rows skipped as unreadable, each named

    def record(self, record: RunRecord, run_dir: Path | None = None) -> RunRow: ...
    def resolve(self, identity: NodeIdentity) -> NodeRow | None: ...
    def nodes(self) -> list[NodeRow]: ...
    def node(self, node_id: int) -> NodeRow | None: ...
    def find_node(self, text: str) -> NodeRow | None: ...
    def runs(self, node_id: int) -> list[RunRow]: ...
    def run(self, run_id: str) -> RunRow | None: ...
    def metrics(self, run_ids: Sequence[str]) -> dict[str, list[tuple[str, Metric]]]: ...
    def pin(self, run_id: str, kind: str) -> RunRow: ...
    def pinned(self, node_id: int, kind: str) -> str | None: ...
    def close(self) -> None: ...


def _same_run(stored: Sequence[Any], record: RunRecord, ident: NodeIdentity, run_dir: Path | None) -> bool:
    """Whether a stored row (started, identity JSON, run directory) is this run again (resumed, or
    imported once more), not another run that happens to have its id (ids of older harness versions
    were the hostname and the second: concurrent runs with different --output, or two nodes of one
    hostname, shared them). Recording it replaces the row; another run is kept beside it."""
    started, identity, stored_dir = stored
    try:
        known = rows.identity(identity)
    except rows.BadRow:  # a tampered row cannot be shown to be this run: keep both
        return False
    if started != record.started or (known.hostname, known.system_serial, known.machine_id) != (
            ident.hostname, ident.system_serial, ident.machine_id):
        return False
    if not isinstance(stored_dir, str) or run_dir is None:
        return stored_dir is None or run_dir is None
    return Path(stored_dir).resolve() == run_dir.resolve()


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class SqliteStore:
    """History in one SQLite file (created on first use, parent directories too)."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self.problems: list[str] = []
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)
            self.db.execute("PRAGMA foreign_keys = ON")
            if self.path == ":memory:" or not _on_network_fs(Path(self.path)):
                # WAL with NORMAL sync: one fsync per checkpoint instead of several per commit.
                self.db.execute("PRAGMA journal_mode = WAL")
                self.db.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        except (sqlite3.Error, OSError) as e:
            raise StorageError(f"history store {self.path}: {e}") from e

    def _migrate(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")  # two writers creating one store: one migrates
        with self.db:
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            try:
                version = int(row[0]) if row else 0
            except (TypeError, ValueError):
                raise StorageError(f"history store {self.path}: meta schema_version is {row[0]!r:.40}, "
                                   "not a number (an edited or damaged store: move it aside)") from None
            if version > SCHEMA_VERSION:
                raise StorageError(f"history store {self.path} has schema version {version}; this "
                                   f"harness knows up to {SCHEMA_VERSION} (upgrade the harness)")
            if version < 1:
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        self.db.execute(stmt)
            if version < 2:
                for stmt in _SCHEMA_2.split(";"):
                    if stmt.strip():
                        self.db.execute(stmt)
            if version < SCHEMA_VERSION:
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                                (str(SCHEMA_VERSION),))

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ----------------------------------------------------------------------
    def record(self, record: RunRecord, run_dir: Path | None = None) -> RunRow:
        """Add (or replace) a run and its valid metrics; returns the stored row. A different run
        with the same id (see _same_run) is never replaced: this one is stored as ID~N (row.run_id)."""
        ident = identity_of(record.inventory, record.host)
        run_id = record.run_id
        try:
            self.db.execute("BEGIN IMMEDIATE")  # resolve and write as one, against other writers
            with self.db:
                old = self.db.execute("SELECT node_id, started, identity, run_dir FROM runs WHERE run_id = ?",
                                      (run_id,)).fetchone()
                if old and not _same_run(old[1:], record, ident, run_dir):
                    run_id, old = self._free_id(run_id), None  # another run's id: keep both
                node = self.node(old[0]) if old and isinstance(old[0], int) else self.resolve(ident)
                node_id = self._upsert_node(node, ident, record.started)
                self.db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
                self.db.execute(
                    "INSERT INTO runs (run_id, node_id, hostname, system_serial, identity, suite, profile, "
                    "verdict, started, finished, run_dir, harness_version, recorded, params, tags) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (run_id, node_id, ident.hostname, ident.system_serial,
                     json.dumps(ident.to_dict(), sort_keys=True), str(record.suite.get("name", "")),
                     str(record.profile.get("name", "")), record.verdict, record.started, record.finished,
                     str(run_dir) if run_dir else None, record.harness_version, _now(),
                     json.dumps(suite_params(record.suite), sort_keys=True),
                     json.dumps(list(suite_tags(record.suite)))))
                self.db.executemany("INSERT INTO metrics VALUES (?,?,?,?,?,?)", [
                    (run_id, c.id, m.name, json.dumps(dict(m.labels), sort_keys=True), m.value, m.unit)
                    for c in record.checks if c.status.value in VALID for m in c.metrics])
        except sqlite3.Error as e:
            raise StorageError(f"history store {self.path}: cannot record {record.run_id}: {e}") from e
        row = self.run(run_id)
        assert row is not None
        return row

    def _free_id(self, run_id: str) -> str:
        """'ID~2' (or ~3, ...): the first that no stored run has."""
        n = 2
        while self.db.execute("SELECT 1 FROM runs WHERE run_id = ?", (f"{run_id}~{n}",)).fetchone():
            n += 1
        return f"{run_id}~{n}"

    def _upsert_node(self, node: NodeRow | None, ident: NodeIdentity, started: str) -> int:
        if node is None:
            cur = self.db.execute("INSERT INTO nodes (name, system_serial, first_seen, last_seen) "
                                  "VALUES (?,?,?,?)", (ident.hostname, ident.system_serial, started, started))
            return int(cur.lastrowid or 0)
        latest = started >= node.last_seen
        self.db.execute(
            "UPDATE nodes SET name = ?, system_serial = COALESCE(system_serial, ?), "
            "first_seen = MIN(first_seen, ?), last_seen = MAX(last_seen, ?) WHERE node_id = ?",
            (ident.hostname if latest else node.name, ident.system_serial, started, started, node.node_id))
        return node.node_id

    def pin(self, run_id: str, kind: str) -> RunRow:
        """Pin a recorded run as its node's `kind` reference (go-live); replaces an earlier pin."""
        row = self.run(run_id)
        if row is None:
            raise StorageError(f"history store {self.path}: no run {run_id!r}")
        try:
            with self.db:
                self.db.execute("INSERT OR REPLACE INTO pins VALUES (?,?,?,?)",
                                (row.node_id, kind, run_id, _now()))
        except sqlite3.Error as e:
            raise StorageError(f"history store {self.path}: cannot pin {run_id}: {e}") from e
        return row

    def pinned(self, node_id: int, kind: str) -> str | None:
        row = self._read("SELECT run_id FROM pins WHERE node_id = ? AND kind = ?",
                              (node_id, kind)).fetchone()
        return str(row[0]) if row else None

    # -- reading ----------------------------------------------------------------------
    def resolve(self, identity: NodeIdentity) -> NodeRow | None:
        """The known node this identity belongs to: system serial, then parts, then hostname."""
        if identity.system_serial:
            row = self._read(_SELECT_NODES + " WHERE system_serial = ?", (identity.system_serial,)).fetchone()
            if row and (found := self._node_row(row)):
                return found
        best: NodeRow | None = None
        for node in self.nodes():
            last = self._last_identity(node.node_id)
            if last is None or not same_node(last, identity):
                continue
            if last.hostname == identity.hostname or best is None:
                best = node  # parts matched; a hostname match on top wins a tie
        return best

    def _last_identity(self, node_id: int) -> NodeIdentity | None:
        row = self._read("SELECT run_id, identity FROM runs WHERE node_id = ? "
                         "ORDER BY started DESC, rowid DESC LIMIT 1", (node_id,)).fetchone()
        return self._checked(f"runs row {row[0]!r:.60}", rows.identity, row[1]) if row else None

    def nodes(self) -> list[NodeRow]:
        found = (self._node_row(r) for r in self._read(_SELECT_NODES + " ORDER BY name, node_id"))
        return [n for n in found if n is not None]

    def node(self, node_id: int) -> NodeRow | None:
        row = self._read(_SELECT_NODES + " WHERE node_id = ?", (node_id,)).fetchone()
        return self._node_row(row) if row else None

    def find_node(self, text: str) -> NodeRow | None:
        """A node by id, current or past hostname, system serial, or a GPU/NVMe serial."""
        if text.isdigit() and (n := self.node(int(text))):
            return n
        for sql in ("SELECT node_id FROM nodes WHERE name = ? OR system_serial = ?",
                    "SELECT node_id FROM runs WHERE hostname = ? OR system_serial = ? "
                    "ORDER BY started DESC, rowid DESC"):
            row = self._read(sql, (text, text)).fetchone()
            if row and isinstance(row[0], int) and (found := self.node(row[0])):
                return found
        for node in self.nodes():
            ident = self._last_identity(node.node_id)
            if ident and (text in ident.gpu_idents or text in ident.nvme_serials):
                return node
        return None

    def runs(self, node_id: int) -> list[RunRow]:
        """The node's runs, oldest first; runs that started in the same second in the order they
        were recorded (run ids end in a random suffix: they order nothing)."""
        cur = self._read(_SELECT_RUNS + " WHERE node_id = ? ORDER BY started, rowid", (node_id,))
        found = (self._checked(f"runs row {r[0]!r:.60}", _run_row, r) for r in cur)
        return [r for r in found if r is not None]

    def run(self, run_id: str) -> RunRow | None:
        row = self._read(_SELECT_RUNS + " WHERE run_id = ?", (run_id,)).fetchone()
        return self._checked(f"runs row {row[0]!r:.60}", _run_row, row) if row else None

    def metrics(self, run_ids: Sequence[str]) -> dict[str, list[tuple[str, Metric]]]:
        """(check id, metric) pairs of each run."""
        out: dict[str, list[tuple[str, Metric]]] = {r: [] for r in run_ids}
        for chunk in _chunks(list(run_ids), 500):
            marks = ",".join("?" * len(chunk))
            cur = self._read(f"SELECT rowid, run_id, check_id, name, labels, value, unit FROM metrics "  # noqa: S608
                             f"WHERE run_id IN ({marks}) ORDER BY rowid", chunk)
            for rowid, run_id, *row in cur:
                got = self._checked(f"metrics row {rowid} (run {run_id!r:.60})", _metric, row)
                if got is not None and run_id in out:
                    out[run_id].append(got)
        return out

    def _read(self, sql: str, args: Sequence[object] = ()) -> sqlite3.Cursor:
        """A query of the store; StorageError (one line) when the store cannot answer it."""
        try:
            return self.db.execute(sql, args)
        except sqlite3.Error as e:
            raise StorageError(f"history store {self.path}: cannot read: {e} "
                               "(an edited or damaged store: move it aside)") from e

    def _checked(self, where: str, read: Callable[[Any], T], row: Any) -> T | None:
        """read(row), or None with `where` and what is wrong added to `problems`."""
        try:
            return read(row)
        except rows.BadRow as e:
            if (note := f"{where}: {e}") not in self.problems:
                self.problems.append(note)
            return None

    def _node_row(self, r: Sequence[object]) -> NodeRow | None:
        return self._checked(f"nodes row {r[0]!r:.20}", _node, r)


_SELECT_RUNS = ("SELECT run_id, node_id, hostname, identity, suite, profile, verdict, started, finished, "
                "run_dir, params, tags FROM runs")


_SELECT_NODES = "SELECT node_id, name, system_serial, first_seen, last_seen FROM nodes"
T = TypeVar("T")


def _run_row(r: Sequence[object]) -> RunRow:
    """A runs row as stored (BadRow naming the column when one is not what the schema says)."""
    t = rows.text
    return RunRow(t(r[0], "run_id"), rows.integer(r[1], "node_id"), t(r[2], "hostname"),
                  rows.identity(r[3]), t(r[4], "suite"), t(r[5], "profile"), t(r[6], "verdict"),
                  t(r[7], "started"), t(r[8], "finished"), rows.optional_text(r[9], "run_dir"),
                  rows.params(r[10]), rows.tags(r[11]))


def _node(r: Sequence[object]) -> NodeRow:
    return NodeRow(rows.integer(r[0], "node_id"), rows.text(r[1], "name"),
                   rows.optional_text(r[2], "system_serial"), rows.text(r[3], "first_seen"),
                   rows.text(r[4], "last_seen"))


def _metric(r: Sequence[object]) -> tuple[str, Metric]:
    check_id, name, labels, value, unit = r
    return rows.text(check_id, "check_id"), Metric(rows.text(name, "name"), rows.number(value, "value"),
                                                   rows.text(unit, "unit"), rows.labels(labels))


def problems_text(store: Store, limit: int = 3) -> str | None:
    """One line naming the rows `store` skipped as unreadable so far; None when there were none."""
    if not store.problems:
        return None
    more = len(store.problems) - limit
    return (f"history store {store.path}: {len(store.problems)} unreadable row(s) skipped (edited or "
            f"damaged?): " + "; ".join(store.problems[:limit]) + (f"; and {more} more" if more > 0 else ""))


def _on_network_fs(path: Path) -> bool:
    """Whether `path` is on a network or cluster file system (by /proc/mounts; False if unknown)."""
    try:
        target = path.resolve().parent
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return False
    best, fstype = "", ""
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = str(target) == point or str(target).startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, fstype = point, parts[2]
    return fstype.startswith(_NETWORK_FS)


def _chunks(items: list[str], n: int) -> Iterable[list[str]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def open_store(path: Path | str) -> Store:
    """The store at `path` (SQLite; the only backend today)."""
    return SqliteStore(path)
