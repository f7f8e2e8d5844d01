"""Issue #30: a run's helper process (harness/run/helper.py) reads the inventory and renders the
reports on the other core; the run's outputs are the same whether it answered, died, hung or a
renderer failed in it, and no helper outlives its run.

The CLI runs in a fresh interpreter (PROBE), as the console script starts it (cli.start), so the
helper is forked for real; the probe can kill it, make it hang, or break a renderer first.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from clihelp import ROOT, harness, run_dirs, write

from harness.platform import forked
from harness.run import helper

PROBE = """
import atexit, json, os, signal, sys, time
from harness.run import early
from harness.run import helper as h
mode = os.environ["PROBE_MODE"]
if mode == "hang":
    h.serve = lambda rx, tx: time.sleep(3600)
    h.INVENTORY_TIMEOUT_S = 0.5
if mode == "kill-later":  # after it sent the inventory: the render finds it gone
    real_inventory = h.Helper.inventory
    def inventory(self, read_here):
        got = real_inventory(self, read_here)
        os.kill(self.child.pid, signal.SIGKILL)
        return got
    h.Helper.inventory = inventory
if mode == "boom":
    from harness.report import outputs
    def boom(*a):
        raise RuntimeError("renderer exploded")
    outputs.RENDERERS[outputs.HTML_NAME] = boom
pids = []
real = early.begin
def begin(*a, **k):
    real(*a, **k)
    pids.append(early._helper.child.pid if early._helper is not None else None)
    if mode == "kill":
        os.kill(pids[-1], signal.SIGKILL)
early.begin = begin
sys.argv = ["harness", *sys.argv[1:]]
def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False
def report():  # registered first, so it runs last: after the run's own exit handlers
    print("PROBE " + json.dumps({"pids": pids, "gone": [gone(p) for p in pids if p],
                                 "parent_rendered": "jinja2" in sys.modules,
                                 "parent_inventory": "harness.platform.sysinfo" in sys.modules}))
atexit.register(report)
from harness.cli import start
start.main()  # a run ends the process itself: the exit handlers (this report last) run first
"""

SUITE = "name: one\nchecks:\n  - id: app\n    kind: command\n    params:\n      argv: [\"true\"]\n"


def probe(mode: str, *argv: str) -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PROBE_MODE": mode})
    line = next((x for x in r.stdout.splitlines() if x.startswith("PROBE ")), None)
    assert line is not None, r.stdout + r.stderr
    out: dict[str, Any] = json.loads(line[len("PROBE "):])
    out["stderr"], out["code"] = r.stderr, r.returncode
    return out


def run(tmp_path: Path, mode: str) -> tuple[dict[str, Any], Path]:
    suite = write(tmp_path / "one.yaml", SUITE)
    out = tmp_path / f"out-{mode}"
    got = probe(mode, "run", str(suite), "--profile", "generic", "--output", str(out), "--history", "off")
    (run_dir,) = run_dirs(out)
    return got, run_dir


def rerendered(run_dir: Path) -> dict[str, bytes]:
    """report.html and junit.xml as the run wrote them, then as `harness report` renders them again."""
    first = {n: (run_dir / n).read_bytes() for n in ("report.html", "junit.xml")}
    r = harness("report", str(run_dir))
    assert r.returncode in (0, 4), r.stderr
    return {n: first[n] + b"\0" + (run_dir / n).read_bytes() for n in first}


def _same(pair: bytes) -> bool:
    a, b = pair.split(b"\0", 1)
    return a == b


@pytest.mark.parametrize("mode", ["answer", "kill", "hang", "kill-later"])
def test_the_run_is_the_same_whether_its_helper_answers_dies_or_hangs(tmp_path: Path, mode: str):
    got, run_dir = run(tmp_path, mode)
    doc = json.loads((run_dir / "results.json").read_text())
    assert got["code"] == 4 and doc["verdict"] == "UNTESTED"  # a `true` check judges nothing
    assert doc["inventory"]["host"]["hostname"] and doc["inventory"]["cpu"]["online"] >= 1
    assert all(_same(p) for p in rerendered(run_dir).values())  # the reports are those of the record
    assert len(got["pids"]) == 1 and got["pids"][0] and got["gone"] == [True]  # reaped, none left
    # the parent loaded neither the renderers nor the inventory's probes unless its helper failed
    assert got["parent_rendered"] is (mode != "answer")
    assert got["parent_inventory"] is (mode in ("kill", "hang"))
    assert "Traceback" not in got["stderr"]


def test_a_renderer_that_fails_in_the_helper_fails_the_run_as_it_would_here(tmp_path: Path):
    got, run_dir = run(tmp_path, "boom")
    doc = json.loads((run_dir / "results.json").read_text())
    assert got["code"] == 3 and doc["verdict"] == "ERRORED"
    entry = doc["checks"][-1]
    assert entry["kind"] == "harness" and entry["message"] == (
        "internal error while rendering report.html: RuntimeError: renderer exploded "
        "(traceback in harness.log)")
    assert "Traceback" in (run_dir / "harness.log").read_text()  # rendered again here: logged here
    assert not (run_dir / "report.html").exists()
    assert "renderer exploded" in (run_dir / "junit.xml").read_text()
    assert got["gone"] == [True]


def test_other_commands_and_a_run_that_stops_early_leave_no_helper(tmp_path: Path):
    for argv in (["--version"], ["list"]):
        assert probe("answer", *argv)["pids"] == [], argv
    for argv in (["run", "--help"], ["run", str(tmp_path / "missing.yaml")],
                 ["run", "smoke", "--dry-run", "--output", str(tmp_path / "o")]):
        got = probe("answer", *argv)
        assert len(got["pids"]) == 1 and got["gone"] == [True], (argv, got)


def test_the_helper_yields_the_cpu_to_the_run():
    """Its work (the inventory, the renderers' imports) overlaps the run's own start: where the two
    share a CPU, the run's goes first (a fresh interpreter: forked as the console entry forks it)."""
    probe = ("import os\nfrom harness.run import helper\nh = helper.fork()\n"
             "h.inventory(lambda: {})\n"
             "stat = open(f'/proc/{h.child.pid}/stat').read().rsplit(')', 1)[1].split()\n"
             "print(int(stat[16]) - os.nice(0), h.failed or 'alive')\nh.close()\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.split() == [str(helper.NICE), "alive"], out.stderr


def test_a_released_helper_ends_by_itself_and_what_comes_later_is_done_here(monkeypatch: pytest.MonkeyPatch):
    """release() (the last render is back) closes its pipes: it exits on its own while the run
    writes, with no signal, and close() only reaps it; a render after it is done in-process."""
    probe = ("import os, time\nfrom harness.run import helper\nh = helper.fork()\n"
             "h.inventory(lambda: {})\nh.release()\nstate, end = '', time.monotonic() + 30\n"
             "while state != 'Z' and time.monotonic() < end:\n"
             "    state = open(f'/proc/{h.child.pid}/stat').read().rsplit(')', 1)[1].split()[0]\n"
             "    time.sleep(0.01)\n"
             "pid = h.child.pid\nt0 = time.monotonic()\nh.close()\n"
             "print(state, h.failed, time.monotonic() - t0 < 0.1, os.path.exists(f'/proc/{pid}'))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.split() == ["Z", "released", "True", "False"], out.stderr
    rx, tx = os.pipe()
    h = helper.Helper(None, rx, tx)
    h.release()
    here: list[str] = []

    class Here:
        def render(self, record: Any, run_dir: Path) -> Any:
            here.append("here")
            return record, {}

    monkeypatch.setattr(helper.Helper, "_here", staticmethod(lambda: Here()))
    assert h.render("record", Path("run")) == ("record", {}) and here == ["here"]  # type: ignore[arg-type]
    with pytest.raises(OSError):
        os.fstat(rx)  # its pipes are closed


def test_no_helper_is_forked_beside_another_thread():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        assert helper.fork() is None  # a lock that thread holds would be held forever in the child
    finally:
        stop.set()
        t.join(5)


# ---------------------------------------------------------------- the frames, on a real pipe

def test_a_frame_of_any_size_goes_through_a_pipe(tmp_path: Path):
    rx, tx = os.pipe()
    big = {"texts": {"report.html": "x" * 5_000_000}, "path": tmp_path}
    got: list[Any] = []
    reader = threading.Thread(target=lambda: got.append(helper.recv(rx, time.monotonic() + 30)))
    reader.start()
    helper.send(tx, big, time.monotonic() + 30)
    reader.join(30)
    os.close(tx)
    assert got == [big]
    with pytest.raises(helper.Gone, match="closed"):
        helper.recv(rx, time.monotonic() + 5)  # the writer is gone: EOF
    os.close(rx)


def test_every_wait_on_the_helper_is_bounded_and_a_bad_frame_is_refused():
    rx, tx = os.pipe()
    t0 = time.monotonic()
    with pytest.raises(helper.Gone, match="in time"):
        helper.recv(rx, time.monotonic() + 0.2)  # nothing written
    os.set_blocking(tx, False)
    with pytest.raises(helper.Gone, match="does not read"):
        helper.send(tx, "y" * 1_000_000, time.monotonic() + 0.2)  # nobody reads: the pipe fills
    assert time.monotonic() - t0 < 30
    os.close(rx)
    os.close(tx)
    for frame in ((helper.MAX_FRAME + 1).to_bytes(8, "big"), (5).to_bytes(8, "big") + b"junk!"):
        rx, tx = os.pipe()
        os.write(tx, frame)
        with pytest.raises(helper.Gone):
            helper.recv(rx, time.monotonic() + 5)
        os.close(rx)
        os.close(tx)


def test_a_helper_is_killed_when_it_does_not_end_and_closing_twice_is_harmless():
    child = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"])
    rx, tx = os.pipe()
    h = helper.Helper(forked.Child(child.pid), rx, tx)
    t0 = time.monotonic()
    h.close()
    h.close()
    assert time.monotonic() - t0 < 10 and h.failed == "closed" and not h.alive
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)  # killed and reaped


def test_frames_are_pickles_of_the_record_types():
    from harness.model import RunRecord
    from harness.run.helper import _HEADER

    rx, tx = os.pipe()
    rec = RunRecord("r1", "n1", {"name": "s"}, {"name": "p"}, "2026-12-05T00:00:00Z",
                    "2026-12-05T00:00:01Z", 1.0, {}, (), "0.1.0")
    helper.send(tx, ("render", rec, Path("/x")), None)
    n = int.from_bytes(os.read(rx, _HEADER), "big")
    assert pickle.loads(os.read(rx, n)) == ("render", rec, Path("/x"))
    os.close(rx)
    os.close(tx)


@pytest.mark.parametrize("answer", [("inventory", "not a dict"), 42, ("failed", "lsblk: boom"),
                                    ("inventory",)])
def test_an_answer_of_another_shape_is_given_up_and_read_here(answer: Any):
    """Whatever else comes back, the run reads the inventory itself and never asks again."""
    rx, tx = os.pipe()
    to_helper_r, to_helper_w = os.pipe()
    helper.send(tx, answer, None)
    h = helper.Helper(None, rx, to_helper_w)  # no process: the pipes are the test's
    read: list[int] = []
    assert h.inventory(lambda: read.append(1) or {"host": {"hostname": "here"}}) == \
        {"host": {"hostname": "here"}}
    assert read == [1] and not h.alive and h.failed.startswith("inventory: ")
    assert h.inventory(lambda: {"again": True}) == {"again": True}  # given up: not asked again
    for fd in (tx, to_helper_r):
        os.close(fd)


def test_a_render_answer_of_another_shape_is_rendered_here(tmp_path: Path):
    from harness.model import RunRecord

    rx, tx = os.pipe()
    to_helper_r, to_helper_w = os.pipe()
    helper.send(tx, ("rendered", {"report.html": 7}), None)  # not text
    h = helper.Helper(None, rx, to_helper_w)
    rec = RunRecord("r1", "n1", {"name": "s"}, {"name": "p"}, "2026-12-05T00:00:00Z",
                    "2026-12-05T00:00:01Z", 1.0, {"host": {"hostname": "n1"}}, (), "0.1.0")
    record, texts = h.render(rec, tmp_path)
    assert record == rec and set(texts) == {"report.html", "junit.xml"}
    assert texts["report.html"].startswith("<!DOCTYPE html>")  # rendered here, for real
    assert not h.alive and h.failed.startswith("render: ")  # given up: the run renders itself from now on
    for fd in (tx, to_helper_r):
        os.close(fd)
