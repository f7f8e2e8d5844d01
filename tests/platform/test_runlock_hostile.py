"""The run lock and the ledger as a hostile local user plants them (issue #17.1).

The tests run as root; "another user" is uid 65534 (nobody), made the owner with os.chown.
Root's own daemon is a sleeper this test starts: it must survive every planted ledger.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from clihelp import harness, write
from faulthelp import alive

from harness.platform import ledger
from harness.platform.runlock import RunLock, RunLocked

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


@pytest.fixture
def daemon() -> Iterator[subprocess.Popen[bytes]]:
    """Root's daemon: the process the attacker wants killed."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    yield p
    p.kill()
    p.wait()


def _plant(run_dir: Path, victim: int, scratch: Path, *, owner: int | None = NOBODY,
           mode: int = 0o755) -> None:
    """A run directory whose .running names `victim` and a root-owned 'scratch' directory."""
    info = ledger.proc_info(victim)
    assert info is not None
    run_dir.mkdir(parents=True)
    st = os.lstat(scratch)
    (run_dir / ledger.RUNNING).write_text(json.dumps({
        "boot_id": ledger.boot_id(), "owner": {"pid": None},
        "groups": [{"pgid": victim, "start": info.start, "argv": ["fio"], "token": "x"}],
        "scratch": [{"path": str(scratch), "dev": st.st_dev, "ino": st.st_ino}]}))
    if owner is not None:
        os.chown(run_dir, owner, owner)
        os.chown(run_dir / ledger.RUNNING, owner, owner)
    run_dir.chmod(mode)


@needs_root
@pytest.mark.parametrize("how", ["run dir and ledger of another user", "ledger of another user",
                                 "world-writable run dir", "run dir under another user's dir"])
def test_a_planted_ledger_is_refused_never_acted_on(tmp_path: Path, daemon: subprocess.Popen[bytes],
                                                     how: str) -> None:
    scratch = tmp_path / "harness-precious"
    scratch.mkdir()
    (scratch / "data").write_text("root's")
    run_dir = tmp_path / "attacker" / "run"
    if how == "run dir and ledger of another user":
        _plant(run_dir, daemon.pid, scratch)
    elif how == "ledger of another user":
        _plant(run_dir, daemon.pid, scratch)
        os.chown(run_dir, 0, 0)
    elif how == "world-writable run dir":
        _plant(run_dir, daemon.pid, scratch, owner=None, mode=0o777)
    else:
        _plant(run_dir, daemon.pid, scratch, owner=None)
        os.chown(run_dir.parent, NOBODY, NOBODY)
    with pytest.raises(ledger.UntrustedRunDir, match="refusing to clean up"):
        ledger.reap_stale(run_dir, grace_s=0.5)
    assert alive(daemon.pid) and (scratch / "data").read_text() == "root's"


def test_even_our_own_ledger_kills_only_processes_carrying_the_token(
        tmp_path: Path, daemon: subprocess.Popen[bytes]) -> None:
    scratch = tmp_path / "harness-scratch"
    scratch.mkdir()
    _plant(tmp_path / "run", daemon.pid, scratch, owner=None)
    assert ledger.reap_stale(tmp_path / "run", grace_s=0.5) == [
        f"removed leftover scratch directory {scratch} from {tmp_path / 'run'}"]
    assert alive(daemon.pid)


def test_a_scratch_directory_replaced_since_is_left(tmp_path: Path) -> None:
    scratch = tmp_path / "harness-scratch"
    scratch.mkdir()
    st = os.lstat(scratch)
    scratch.rmdir()
    scratch.mkdir()  # another directory in its place (another inode)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ledger.RUNNING).write_text(json.dumps({
        "boot_id": "an-earlier-boot", "owner": {"pid": None}, "groups": [],
        "scratch": [{"path": str(scratch), "dev": st.st_dev, "ino": st.st_ino + 1000}]}))
    assert ledger.reap_stale(run_dir) == [] and scratch.is_dir()


def test_symlinked_lock_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    precious = tmp_path / "shadow"
    precious.write_text("root:x:0:\n")
    lock = tmp_path / "locks" / "harness.lock"
    lock.parent.mkdir(mode=0o700)
    lock.symlink_to(precious)
    with pytest.raises(RunLocked, match="symbolic link"):
        RunLock(lock).acquire("now")
    assert precious.read_text() == "root:x:0:\n"


@pytest.mark.parametrize("kind", ["fifo", "directory", "hard link", "group-writable"])
def test_a_lock_that_is_not_a_private_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    lock = tmp_path / "locks" / "harness.lock"
    lock.parent.mkdir(mode=0o700)
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "directory":
        lock.mkdir()
    elif kind == "hard link":
        (tmp_path / "other").write_text("{}")
        os.link(tmp_path / "other", lock)
    else:
        lock.write_text("")
        lock.chmod(0o664)
    t0 = time.monotonic()
    with pytest.raises(RunLocked, match="refusing the run lock"):
        RunLock(lock).acquire("now")
    assert time.monotonic() - t0 < 5  # a fifo does not block the open


@needs_root
def test_a_lock_of_another_user_is_not_trusted(tmp_path: Path, daemon: subprocess.Popen[bytes]) -> None:
    scratch = tmp_path / "harness-precious"
    scratch.mkdir()
    run_dir = tmp_path / "attacker-run"
    _plant(run_dir, daemon.pid, scratch, owner=None)  # even a run dir that would pass
    lock = tmp_path / "locks" / "harness.lock"
    lock.parent.mkdir(mode=0o1777)  # like /run/lock
    lock.write_text(json.dumps({"pid": 1, "started": "x", "run_dir": str(run_dir)}))
    os.chown(lock, NOBODY, NOBODY)
    lock.chmod(0o644)
    with pytest.raises(RunLocked, match=f"owned by uid {NOBODY}"):
        RunLock(lock).acquire("now")
    lock.chmod(0o444)  # unwritable to us as well: still refused, not read
    with pytest.raises(RunLocked, match="refusing the run lock"):
        RunLock(lock).acquire("now")
    assert alive(daemon.pid) and scratch.is_dir()


def test_a_lock_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "locks"
    d.mkdir()
    d.chmod(0o777)  # world-writable without the sticky bit: anyone may swap the file
    with pytest.raises(RunLocked, match="refusing the run-lock directory"):
        RunLock(d / "harness.lock").acquire("now")


def test_a_missing_lock_directory_is_made_private(tmp_path: Path) -> None:
    lock = tmp_path / "new" / "harness.lock"
    with RunLock(lock) as held:
        assert held.acquire("now") is None
    assert (lock.parent.stat().st_mode & 0o777) == 0o700
    assert (lock.stat().st_mode & 0o077) == 0


@needs_root
def test_the_cli_refuses_a_planted_lock_and_kills_nothing(tmp_path: Path, _own_run_lock: Path,
                                                         daemon: subprocess.Popen[bytes]) -> None:
    scratch = tmp_path / "harness-precious"
    scratch.mkdir()
    run_dir = tmp_path / "attacker" / "run"
    _plant(run_dir, daemon.pid, scratch)
    _own_run_lock.write_text(json.dumps({"pid": 1, "started": "x", "run_dir": str(run_dir)}))
    os.chown(_own_run_lock, NOBODY, NOBODY)
    suite = write(tmp_path / "s.yaml", "name: s\nchecks:\n  - {id: ok, kind: command, "
                  "params: {argv: [/bin/true]}}\n")
    r = harness("run", str(suite), "--profile", "generic", "--output", str(tmp_path / "out"))
    assert r.returncode == 3, r.stdout + r.stderr
    assert "refusing the run lock" in r.stderr and "Traceback" not in r.stderr
    assert alive(daemon.pid) and scratch.is_dir()
