"""A run's contention first look begins as its process starts (cli.start -> run.early), before
click and the commands load, and is handed to the run once; other commands begin nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.cli import start
from harness.run import early, nodeload, session

ROOT = Path(__file__).resolve().parents[2]

# In a fresh interpreter: what cli.start had loaded when early.begin ran, and for which argv.
PROBE = """
import json, sys
from harness.run import early
seen = []
real = early.begin
def begin():
    seen.append({"click": "click" in sys.modules, "cli_main": "harness.cli.main" in sys.modules})
    real()
    seen.append({"gate": "harness.run.contention" in sys.modules,
                 "nvml": "harness.platform.nvml" in sys.modules})
early.begin = begin
sys.argv = ["harness", *sys.argv[1:]]
from harness.cli import start
try:
    start.main()
except SystemExit:
    pass
print("PROBE " + json.dumps({"seen": seen, "left": early._captured is not None}))
"""


def probe(*argv: str) -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={"PATH": "/usr/bin:/bin", "HARNESS_CONTENTION": "record"})
    line = next(x for x in r.stdout.splitlines() if x.startswith("PROBE "))
    return json.loads(line[len("PROBE "):])


def test_a_run_begins_its_look_before_the_cli_loads():
    got = probe("run", "--help")
    # and the look itself is light: the gate and NVML load later, while it runs
    assert got["seen"] == [{"click": False, "cli_main": False}, {"gate": False, "nvml": False}]
    assert got["left"]  # --help ran no run: the look was taken, and never handed out


def test_other_commands_begin_nothing():
    for argv in (["--version"], ["list"], ["fleet", "--help"], ["observe", "--help"]):
        assert probe(*argv)["seen"] == [], argv


def test_the_look_is_handed_out_once(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HARNESS_CONTENTION", "record")
    early.begin(helper=False)
    first = early.look()
    assert isinstance(first, nodeload.Snapshot) and early.look() is None


def test_no_look_when_the_gate_is_off(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HARNESS_CONTENTION", "off")
    early.begin(helper=False)
    assert early.look() is None


def test_the_run_command_is_given_the_early_look(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("HARNESS_CONTENTION", "record")
    given: list[Any] = []

    def execute(options: Any = None, **kw: Any) -> session.Finished:
        given.append(kw["first_look"])
        return session.Finished(0)

    monkeypatch.setattr(session, "execute", execute)
    from harness.run import helper

    monkeypatch.setattr(helper, "fork", lambda: None)  # no helper forked from the test process
    taken: list[nodeload.Snapshot | None] = []
    real = nodeload.first_look

    def first_look(*a: Any, **k: Any) -> nodeload.Snapshot | None:
        taken.append(real(*a, **k))
        return taken[-1]

    monkeypatch.setattr(nodeload, "first_look", first_look)
    argv = ["harness", "run", "quick", "--output", str(tmp_path), "--history", "off"]
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(SystemExit) as e:
        start.main(end_fast=False)
    assert e.value.code == 0
    # one snapshot, taken by early.begin, is the one the run got; the CLI took none of its own
    assert len(taken) == 1 and given == taken and isinstance(given[0], nodeload.Snapshot)
    assert early.look() is None
    # a --dry-run is given none (it runs nothing), and the look is not left for a later run
    monkeypatch.setattr("sys.argv", ["harness", "run", "quick", "--dry-run", "--output", str(tmp_path)])
    with pytest.raises(SystemExit):
        start.main(end_fast=False)
    assert given[-1] is None and early.look() is None


def test_lsblk_is_begun_before_the_suite_loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The inventory's lsblk (sysinfo.Disks) runs while the suite and profile load, not after."""
    import threading

    from harness.platform import sysinfo
    from harness.run.session import RunOptions

    running, overlapped = threading.Event(), []
    real_disks, real_load = sysinfo._block_devices, session.config.load_suite

    def block_devices(notes: list[str], unknown: dict[str, str]) -> list[dict[str, Any]]:
        running.set()
        try:
            time.sleep(0.3)
            return real_disks(notes, unknown)
        finally:
            running.clear()

    def load_suite(*a: Any, **k: Any) -> Any:
        overlapped.append(running.wait(5))
        return real_load(*a, **k)

    monkeypatch.setattr(sysinfo, "_block_devices", block_devices)
    monkeypatch.setattr(session.config, "load_suite", load_suite)
    assert session.run(RunOptions(suite="smoke", output=tmp_path / "o", dry_run=True)) == 0
    assert overlapped == [True] and not running.is_set()


def test_the_collector_is_off_from_the_start_until_the_run_begins(monkeypatch: pytest.MonkeyPatch):
    """begin() turns the cyclic collector off for the imports and the command line; the run
    command turns it back on before the session (which keeps it off while it prepares)."""
    import gc

    monkeypatch.setenv("HARNESS_CONTENTION", "record")
    assert gc.isenabled()
    try:
        early.begin(helper=False)
        assert not gc.isenabled()
        early.look()
    finally:
        early.resume_gc()
        gc.unfreeze()  # resume_gc froze this test process's objects
    assert gc.isenabled()
    gc.disable()  # a caller's own choice stands: begin() leaves the collector as it found it
    try:
        early.begin(helper=False)
        early.resume_gc()
        assert not gc.isenabled()
    finally:
        gc.enable()
        early.look()


def test_what_start_up_made_is_frozen_not_walked_when_the_collector_resumes():
    """Turned on over the objects made while it was off, the collector's next allocation would
    start a pass over all of them: they are frozen first (a fresh interpreter: pytest's own
    objects would blur the count)."""
    probe = ("import gc\nfrom harness.run import early\nearly.begin(helper=False)\n"
             "made = [[i] for i in range(50_000)]\nearly.resume_gc()\n"
             "print(gc.isenabled(), gc.get_count()[0], gc.get_freeze_count() >= 50_000)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "HARNESS_CONTENTION": "record"})
    enabled, young, frozen = out.stdout.split()
    assert (enabled, frozen) == ("True", "True") and int(young) < 700, out.stderr  # 700: gen0's threshold


def _copy_proc(root: Path) -> None:
    """This process's /proc as a snapshot reads it, and /sys/block, copied under `root`: static."""
    pid = os.getpid()
    names = ["stat", "pressure/cpu", "pressure/io", "pressure/memory", "diskstats", "meminfo", f"{pid}/io"]
    names += [f"{pid}/task/{t}/{f}" for t in os.listdir(f"/proc/{pid}/task") for f in ("stat", "children")]
    for name in names:
        src, dst = Path("/proc") / name, root / "proc" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            dst.write_text(src.read_text())
        except OSError:  # no PSI on this kernel, say: absent from both
            pass
    (root / "sys" / "block").mkdir(parents=True)
    for disk in os.listdir("/sys/block"):
        (root / "sys" / "block" / disk).mkdir()


def test_the_look_read_before_anything_loads_is_the_snapshot_read_then(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    """early.capture reads the files nodeload.snapshot reads, with nothing loaded; read back, they
    are the very snapshot: every field, on the same /proc (a copy that stands still)."""
    monkeypatch.setenv("HARNESS_CONTENTION", "record")
    _copy_proc(tmp_path)
    captured = early.capture(str(tmp_path))
    from_capture = nodeload.first_look(captured=captured)
    direct = nodeload.snapshot(nodeload.ProcFs(tmp_path), lambda: captured["t"])
    assert from_capture == direct
    assert direct.ncpu >= 1 and direct.per_disk is not None and direct.mem_available is not None
    assert direct.own_io  # this process's own I/O counters were read
    # a file the capture did not read is absent, not read later: the look is of its moment
    del captured["texts"]["meminfo"]
    assert nodeload.first_look(captured=captured).mem_available is None  # type: ignore[union-attr]


@pytest.mark.parametrize(("code", "status", "err"),
                         [(4, 4, ""), (None, 0, ""), ("bad input", 1, "bad input\n")])
def test_a_run_ends_its_process_with_its_code_after_its_exit_handlers_and_flushed_output(
        code: object, status: int, err: str):
    """start.end: what SystemExit(code) would do (the exit handlers, the buffered output written,
    the status), without the interpreter's teardown."""
    script = ("import atexit, sys\nfrom harness.cli.start import end\n"
              "atexit.register(lambda: print(' and the handlers ran'))\n"
              "print('buffered', end='')\n"
              f"end({code!r})\nprint('never')\n")
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin"})
    assert (r.returncode, r.stdout, r.stderr) == (status, "buffered and the handlers ran\n", err)


def test_a_run_through_the_console_entry_says_everything_and_exits_with_its_verdict(tmp_path: Path):
    suite = tmp_path / "one.yaml"
    suite.write_text("name: one\nchecks:\n  - id: app\n    kind: command\n    params:\n"
                     "      argv: [\"true\"]\n")
    argv = ["run", str(suite), "--profile", "generic", "--output", str(tmp_path / "out"), "--history", "off"]
    r = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    (run_dir,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir() and not p.name.startswith(".")]
    doc = json.loads((run_dir / "results.json").read_text())
    assert r.returncode == 4 and doc["verdict"] == "UNTESTED"
    assert r.stdout.rstrip().splitlines()[-1] == f"report: {run_dir / 'report.html'}"  # the last line too
