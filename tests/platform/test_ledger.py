"""RUN_DIR/.running and reap_stale() with real processes: what a SIGKILLed harness leaves behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from faulthelp import HANG, alive, ledger_groups, pids_in, wait_for

from harness.platform import ledger

# A stand-in harness: records its tool's group in the ledger like the runner does, runs HANG.
FAKE_HARNESS = r"""
import logging, sys
from pathlib import Path
from harness.platform import ledger, proc
run_dir, piddir = Path(sys.argv[1]), sys.argv[2]
book = ledger.Ledger(run_dir, logging.getLogger("t"))
book.open()
proc.run([sys.executable, "-c", sys.argv[3], piddir], run_dir / "o", run_dir / "e", timeout=300)
"""


TOKEN = "t0k3n"


def _sleeper(token: str = TOKEN) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
                            env={**os.environ, "HARNESS_RUN_TOKEN": token})


def test_reap_kills_every_process_a_killed_harness_left(tmp_path: Path):
    run_dir, piddir = tmp_path / "run", tmp_path / "pids"
    run_dir.mkdir()
    piddir.mkdir()
    h = subprocess.Popen([sys.executable, "-c", FAKE_HARNESS, str(run_dir), str(piddir), HANG],
                         cwd=Path(__file__).resolve().parents[2])
    try:
        wait_for(lambda: len(pids_in(piddir)) == 3 and ledger_groups(run_dir), 30,
                 "the tool, its child and grandchild, recorded")
    finally:
        h.kill()
        h.wait(timeout=30)
    left = pids_in(piddir)
    assert all(alive(pid) for pid in left.values()), "a SIGKILLed parent leaves its tool running"
    (group,) = json.loads((run_dir / ledger.RUNNING).read_text())["groups"]
    assert group["pgid"] == left["leader"]

    notes = ledger.reap_stale(run_dir, grace_s=1.0)
    assert notes == [f"killed 3 leftover process(es) of `{sys.executable} -c {HANG}` "
                     f"(process group {left['leader']}) from {run_dir}"]
    for name, pid in left.items():  # incl. the child that ignores SIGTERM (needs the KILL)
        assert not alive(pid), f"{name} survived"
    assert not (run_dir / ledger.RUNNING).exists()
    assert ledger.reap_stale(run_dir) == []


def _ledger_for(run_dir: Path, pgid: int, start: int, owner: dict | None = None,
                boot: str | None = None, token: str | None = TOKEN) -> None:
    run_dir.mkdir(exist_ok=True)
    group = {"pgid": pgid, "start": start, "argv": ["sleeper"]} | ({"token": token} if token else {})
    (run_dir / ledger.RUNNING).write_text(json.dumps({
        "boot_id": ledger.boot_id() if boot is None else boot, "owner": owner or {"pid": None},
        "groups": [group]}))


def test_recycled_pid_rebooted_node_and_live_owner_are_left_alone(tmp_path: Path):
    victim, owner = _sleeper(), _sleeper("the-owners-token")
    try:
        info = ledger.proc_info(victim.pid)
        assert info is not None and info.pgrp == victim.pid
        # the recorded leader started at another time: the PID now belongs to someone else
        _ledger_for(tmp_path / "a", victim.pid, info.start - 1, token="a-dead-tools-token")
        assert ledger.reap_stale(tmp_path / "a") == [] and alive(victim.pid)
        # the right pid and start time, but the process carries no such run token (a daemon
        # named by someone who knew its pid), or the entry has none: not proven ours, left alone
        _ledger_for(tmp_path / "a2", victim.pid, info.start, token="another-token")
        assert ledger.reap_stale(tmp_path / "a2") == [] and alive(victim.pid)
        _ledger_for(tmp_path / "a3", victim.pid, info.start, token=None)
        assert ledger.reap_stale(tmp_path / "a3") == [] and alive(victim.pid)
        # recorded in an earlier boot
        _ledger_for(tmp_path / "b", victim.pid, info.start, boot="another-boot")
        assert ledger.reap_stale(tmp_path / "b") == [] and alive(victim.pid)
        assert not (tmp_path / "b" / ledger.RUNNING).exists()
        # the harness that owns the run directory is alive: resuming it must refuse
        o = ledger.proc_info(owner.pid)
        assert o is not None
        _ledger_for(tmp_path / "c", victim.pid, info.start, owner={"pid": owner.pid, "start": o.start})
        with pytest.raises(ledger.RunDirBusy, match=f"still running \\(PID {owner.pid}\\)"):
            ledger.reap_stale(tmp_path / "c")
        assert ledger.reap_stale(tmp_path / "c", busy_ok=True) == [] and alive(victim.pid)
        # the same entry with a dead owner is stale: now it goes
        owner.kill()
        owner.wait()
        assert len(ledger.reap_stale(tmp_path / "c")) == 1
        victim.wait(timeout=10)
        assert not alive(victim.pid)
    finally:
        for p in (victim, owner):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_unreadable_ledger_is_ignored(tmp_path: Path):
    (tmp_path / ledger.RUNNING).write_text("{not json")
    assert ledger.reap_stale(tmp_path) == []


def test_ledger_tracks_live_groups_only(tmp_path: Path):
    import logging

    from harness.platform import proc

    book = ledger.Ledger(tmp_path, logging.getLogger("t"))
    book.open()
    try:
        seen: list[list[dict]] = []

        def look(pid: int, argv: tuple[str, ...], started: bool) -> None:
            seen.append(json.loads((tmp_path / ledger.RUNNING).read_text())["groups"])

        proc.watch(look)
        try:
            proc.run([sys.executable, "-c", "pass"], tmp_path / "o", tmp_path / "e", timeout=30)
        finally:
            proc.unwatch(look)
        assert seen[0][0]["argv"][0] == sys.executable  # recorded while it ran
        assert seen[1] == []  # and dropped once reaped
        assert json.loads((tmp_path / ledger.RUNNING).read_text())["owner"]["pid"] == os.getpid()
    finally:
        book.close()
    assert not (tmp_path / ledger.RUNNING).exists()


def test_tools_started_from_many_threads_are_all_recorded_and_dropped(tmp_path: Path):
    import logging
    import threading

    from harness.platform import proc

    book = ledger.Ledger(tmp_path, logging.getLogger("t"))
    book.open()
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(3):
                proc.run([sys.executable, "-c", "pass"], tmp_path / f"o{n}-{i}", tmp_path / f"e{n}-{i}",
                         timeout=60)
        except Exception as e:  # collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert errors == []
        assert json.loads((tmp_path / ledger.RUNNING).read_text())["groups"] == []
    finally:
        book.close()


def test_a_crashed_run_whose_directory_was_deleted_does_not_block_the_next(tmp_path: Path):
    """A lock naming a run directory someone removed since (rm -rf of old runs) is a note, not an
    error: there is no ledger left that could prove any process is the crashed run's."""
    gone = tmp_path / "runs" / "host-20261201T000000Z"
    (notes,) = [ledger.reap_stale(gone)]
    assert notes == [f"the crashed run's directory {gone} no longer exists: nothing to clean up"]
    assert not gone.exists()
