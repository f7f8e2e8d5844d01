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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from harness.errors import StorageError
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
    known = NodeIdentity.from_dict(json.loads(identity))
    if started != record.started or (known.hostname, known.system_serial, known.machine_id) != (
            ident.hostname, ident.system_serial, ident.machine_id):
        return False
    return stored_dir is None or run_dir is None or Path(stored_dir).resolve() == run_dir.resolve()


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class SqliteStore:
    """History in one SQLite file (created on first use, parent directories too)."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
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
            version = int(row[0]) if row else 0
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
                node = self.node(int(old[0])) if old else self.resolve(ident)
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
        row = self.db.execute("SELECT run_id FROM pins WHERE node_id = ? AND kind = ?",
                              (node_id, kind)).fetchone()
        return str(row[0]) if row else None

    # -- reading ----------------------------------------------------------------------
    def resolve(self, identity: NodeIdentity) -> NodeRow | None:
        """The known node this identity belongs to: system serial, then parts, then hostname."""
        if identity.system_serial:
            row = self.db.execute("SELECT * FROM nodes WHERE system_serial = ?",
                                  (identity.system_serial,)).fetchone()
            if row:
                return NodeRow(*row)
        best: NodeRow | None = None
        for node in self.nodes():
            last = self._last_identity(node.node_id)
            if last is None or not same_node(last, identity):
                continue
            if last.hostname == identity.hostname or best is None:
                best = node  # parts matched; a hostname match on top wins a tie
        return best

    def _last_identity(self, node_id: int) -> NodeIdentity | None:
        row = self.db.execute("SELECT identity FROM runs WHERE node_id = ? ORDER BY started DESC LIMIT 1",
                              (node_id,)).fetchone()
        return NodeIdentity.from_dict(json.loads(row[0])) if row else None

    def nodes(self) -> list[NodeRow]:
        return [NodeRow(*r) for r in self.db.execute("SELECT * FROM nodes ORDER BY name, node_id")]

    def node(self, node_id: int) -> NodeRow | None:
        row = self.db.execute("SELECT * FROM nodes WHERE node_id = ?", (node_id,)).fetchone()
        return NodeRow(*row) if row else None

    def find_node(self, text: str) -> NodeRow | None:
        """A node by id, current or past hostname, system serial, or a GPU/NVMe serial."""
        if text.isdigit() and (n := self.node(int(text))):
            return n
        for sql in ("SELECT node_id FROM nodes WHERE name = ? OR system_serial = ?",
                    "SELECT node_id FROM runs WHERE hostname = ? OR system_serial = ? "
                    "ORDER BY started DESC"):
            row = self.db.execute(sql, (text, text)).fetchone()
            if row:
                return self.node(int(row[0]))
        for node in self.nodes():
            ident = self._last_identity(node.node_id)
            if ident and (text in ident.gpu_idents or text in ident.nvme_serials):
                return node
        return None

    def runs(self, node_id: int) -> list[RunRow]:
        """The node's runs, oldest first."""
        cur = self.db.execute(_SELECT_RUNS + " WHERE node_id = ? ORDER BY started, run_id", (node_id,))
        return [_run_row(r) for r in cur]

    def run(self, run_id: str) -> RunRow | None:
        row = self.db.execute(_SELECT_RUNS + " WHERE run_id = ?", (run_id,)).fetchone()
        return _run_row(row) if row else None

    def metrics(self, run_ids: Sequence[str]) -> dict[str, list[tuple[str, Metric]]]:
        """(check id, metric) pairs of each run."""
        out: dict[str, list[tuple[str, Metric]]] = {r: [] for r in run_ids}
        for chunk in _chunks(list(run_ids), 500):
            marks = ",".join("?" * len(chunk))
            cur = self.db.execute(f"SELECT run_id, check_id, name, labels, value, unit FROM metrics "  # noqa: S608
                                  f"WHERE run_id IN ({marks}) ORDER BY rowid", chunk)
            for run_id, check_id, name, labels, value, unit in cur:
                out[run_id].append((check_id, Metric(name, float(value), unit, json.loads(labels))))
        return out


_SELECT_RUNS = ("SELECT run_id, node_id, hostname, identity, suite, profile, verdict, started, finished, "
                "run_dir, params, tags FROM runs")


def _run_row(r: Sequence[object]) -> RunRow:
    params = json.loads(str(r[10])) if r[10] else {}
    tags = json.loads(str(r[11])) if r[11] else []
    return RunRow(str(r[0]), int(str(r[1])), str(r[2]),
                  NodeIdentity.from_dict(json.loads(str(r[3]))), str(r[4]), str(r[5]), str(r[6]),
                  str(r[7]), str(r[8]), None if r[9] is None else str(r[9]),
                  {str(k): str(v) for k, v in params.items()} if isinstance(params, dict) else {},
                  tuple(str(t) for t in tags) if isinstance(tags, list) else ())


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
