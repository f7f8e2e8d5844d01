"""The SQLite history store: round trips of real runs, schema versions, and node identity
(renamed host, swapped GPU, reused hostname) with inventories derived from a real run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from historyhelp import derive, gpus, load, quick_runs

from harness.errors import StorageError
from harness.history.identity import changes, identity_of, real_serial
from harness.history.store import SCHEMA_VERSION, SqliteStore
from harness.model import Metric, RunRecord


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> RunRecord:
    (run_dir,) = quick_runs(tmp_path_factory.mktemp("store"), 1)
    return load(run_dir)


def test_a_real_run_round_trips(real: RunRecord, tmp_path: Path):
    with SqliteStore(tmp_path / "h" / "history.sqlite") as store:  # parent folder made on demand
        row = store.record(real, tmp_path / "run")
        assert (row.run_id, row.verdict, row.started, row.run_dir) == (
            real.run_id, real.verdict, real.started, str(tmp_path / "run"))
        assert row.identity == identity_of(real.inventory)
        stored = store.metrics([real.run_id])[real.run_id]
        want = [(c.id, m) for c in real.checks if c.status.value in ("passed", "recorded", "warned", "failed")
                for m in c.metrics]
        assert stored == want and any(m.name == "fio.iops" for _, m in stored)
        # fio had no rule under the generic profile: recorded, not passed, and still a measurement
        assert any(c.status.value == "recorded" and c.id == "fio" for c in real.checks)
        (node,) = store.nodes()
        assert node.name == real.host and store.runs(node.node_id) == [row]
        store.record(real)  # recording again replaces, never duplicates
        assert len(store.metrics([real.run_id])[real.run_id]) == len(want)
        assert len(store.runs(node.node_id)) == 1


def test_only_valid_checks_are_stored_and_int_labels_survive(real: RunRecord, tmp_path: Path):
    rec = derive(real, "r-2", "2026-02-01T00:00:00Z", gpu_list=gpus(), errored_check=True,
                 extra=lambda r: [Metric("gpu.tflops", 810.5, "TFLOPS", {"gpu": 3, "dtype": "fp16"})])
    with SqliteStore(tmp_path / "s.sqlite") as store:
        store.record(rec)
        metrics = store.metrics(["r-2"])["r-2"]
        assert {c for c, _ in metrics} == {"inventory", "fio", "burn"}  # not the errored check
        (burn,) = [m for c, m in metrics if c == "burn"]
        assert burn.labels == {"dtype": "fp16", "gpu": 3} and burn.value == 810.5
        assert store.run("r-2").verdict == "ERRORED"


def test_schema_version_is_recorded_and_a_newer_store_is_refused(tmp_path: Path):
    path = tmp_path / "h.sqlite"
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION),)
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    with pytest.raises(StorageError, match="schema version 99"):
        SqliteStore(path)
    (tmp_path / "junk.sqlite").write_text("this is not a database, just text " * 100)
    with pytest.raises(StorageError):
        SqliteStore(tmp_path / "junk.sqlite")


def test_renamed_host_with_the_same_system_serial_is_the_same_node(real: RunRecord, tmp_path: Path):
    a = derive(real, "a", "2026-01-01T00:00:00Z", hostname="gpu-017", gpu_list=gpus())
    b = derive(real, "b", "2026-04-01T00:00:00Z", hostname="rack4-gpu-017", gpu_list=gpus())
    with SqliteStore(tmp_path / "h.sqlite") as store:
        store.record(a)
        store.record(b)
        (node,) = store.nodes()
        assert node.name == "rack4-gpu-017" and node.system_serial == "S-NODE-1"
        assert [r.hostname for r in store.runs(node.node_id)] == ["gpu-017", "rack4-gpu-017"]
        for query in ("gpu-017", "rack4-gpu-017", "S-NODE-1", str(node.node_id), "1753724031850"):
            assert store.find_node(query) == node, query
        assert store.find_node("nope") is None
    (ch,) = changes(identity_of(a.inventory), identity_of(b.inventory))
    assert ch.kind == "renamed" and ch.old == ("gpu-017",) and ch.new == ("rack4-gpu-017",)


def test_gpu_swap_keeps_the_node_and_names_old_and_new_serials(real: RunRecord, tmp_path: Path):
    a = derive(real, "a", "2026-01-01T00:00:00Z", gpu_list=gpus(), driver="550.90.12")
    b = derive(real, "b", "2026-04-01T00:00:00Z", gpu_list=gpus(swapped=[3]), driver="560.35.03")
    with SqliteStore(tmp_path / "h.sqlite") as store:
        store.record(a)
        row = store.record(b)
        assert len(store.nodes()) == 1 and row.node_id == store.nodes()[0].node_id
        first, second = store.runs(row.node_id)
    got = {c.kind: c for c in changes(first.identity, second.identity)}
    swap = got["gpu_swap"]
    assert swap.old == ("1753724031850",) and swap.new == ("1753724099003",)
    assert swap.detail == "GPU 3: serial 1753724031850 → 1753724099003"
    assert got["software"].detail == "nvidia_driver 550.90.12 → 560.35.03"
    assert set(got) == {"gpu_swap", "software"}


def test_without_dmi_serial_parts_identify_the_node_and_hostnames_alone_do_not(real: RunRecord,
                                                                              tmp_path: Path):
    a = derive(real, "a", "2026-01-01T00:00:00Z", hostname="n1", system_serial=None, gpu_list=gpus())
    renamed = derive(real, "b", "2026-02-01T00:00:00Z", hostname="n1-new", system_serial=None,
                     gpu_list=gpus(swapped=[0, 1]))  # 6 of 8 GPUs still there
    other = derive(real, "c", "2026-03-01T00:00:00Z", hostname="n1", system_serial="S-OTHER",
                   gpu_list=gpus(swapped=range(8)))
    with SqliteStore(tmp_path / "h.sqlite") as store:
        ra, rb = store.record(a), store.record(renamed)
        assert ra.node_id == rb.node_id
        rc = store.record(other)  # a new box: its serial is known and the parts share nothing
        assert rc.node_id != ra.node_id
        assert len(store.nodes()) == 2


def test_a_reused_hostname_with_a_different_system_serial_is_another_node(real: RunRecord, tmp_path: Path):
    a = derive(real, "a", "2026-01-01T00:00:00Z", hostname="spare", system_serial="S1", gpu_list=gpus())
    b = derive(real, "b", "2026-02-01T00:00:00Z", hostname="spare", system_serial="S2",
               gpu_list=gpus(swapped=range(8)))
    with SqliteStore(tmp_path / "h.sqlite") as store:
        assert store.record(a).node_id != store.record(b).node_id


def test_placeholder_serials_are_not_identities():
    for junk in (None, "", "To Be Filled By O.E.M.", "Not Specified", "0000000000", "System Serial Number"):
        assert real_serial(junk) is None, junk
    assert real_serial(" S61234567890 ") == "S61234567890"


def test_more_placeholder_serials_are_not_identities():
    """What BMCs and NVMe firmware write when they have no serial: never a node's identity."""
    for junk in ("(null)", "0x00000000", "INVALID", "SN000000", "sn-00000000", "0XFFFFFFFF", "<NULL>"):
        assert real_serial(junk) is None, junk
    for real_one in ("0x1A2B3C4D", "SN7Q2K9", "S61234567890", "INVALID-7Q2"):
        assert real_serial(real_one) == real_one
