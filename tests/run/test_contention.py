"""A busy node is not a bad one: the contention gate through `harness run` under real competing
load on this machine (stress-ng on every CPU, a second fio writing to the same disk), and the gate's
judgement, bounded wait and in-measurement sampling on /proc trees that change under it."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write
from contentiontree import FIO_SUITE, Tree, resolved, stepping

from harness.config.models import Contention
from harness.platform.procfs import ProcFs
from harness.results import section
from harness.run import contention as cn
from harness.run import nodeload
from harness.sections import Details

CPU_REASON = re.compile(r"\bcpu: (\d+(\.\d+)? runnable tasks of other processes per CPU|tasks waited "
                        r"for a CPU \d+% of the time)")
PROFILE = ("name: lenient\nexpectations:\n"
           "  - {metric: fio.iops, labels: {job: randread_4k, rw: read}, min: 1, unit: IOPS}\n")


@pytest.fixture
def competing(request: pytest.FixtureRequest) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:  # bounded: each load ends by itself within its -t / --runtime anyway
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


def run_busy(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict, Path]:
    out = tmp_path / "out"
    r = harness("run", str(write(tmp_path / "busy.yaml", FIO_SUITE)), "--profile",
                str(write(tmp_path / "lenient.yaml", PROFILE)), "--output", str(out), "--history", "off",
                timeout=120)
    (run_dir,) = run_dirs(out)
    return r, results(run_dir), run_dir


def fio_check(doc: dict) -> dict:
    return next(c for c in doc["checks"] if c["id"] == "fio")


def loaded(per_cpu: float) -> bool:
    """Whether the node has at least `per_cpu` runnable tasks per CPU now."""
    cpu = ProcFs().stat()
    return cpu is not None and cpu.running >= per_cpu * cpu.ncpu


@pytest.mark.slow
def test_stress_ng_on_every_cpu_makes_fio_errored_contended_not_rejected(tmp_path, competing,
                                                                          contention_gate):
    if not shutil.which("stress-ng"):
        pytest.skip("stress-ng not installed")
    n = 8 * (os.cpu_count() or 1)  # far more runnable tasks than CPUs
    # -t 120: on a loaded machine the 15 s wait, the run's start-up and the gate's 2 s can pass 30 s,
    # and a load that ended before the check read as a quiet node (ACCEPTED); the fixture ends it
    competing.append(subprocess.Popen(["stress-ng", "--cpu", str(n), "-t", "120", "-q"]))
    time.sleep(1.5)
    deadline = time.monotonic() + 15  # on a machine whose disk others load, its workers start late
    while time.monotonic() < deadline and not loaded(2 * cn.LIMITS.runnable_per_cpu):
        time.sleep(0.2)
    r, doc, run_dir = run_busy(tmp_path)
    c = fio_check(doc)
    # ERRORED: the environment, not the disk
    assert r.returncode == 3, (r.stdout + r.stderr, c["details"].get("contention"))
    # refused before it ran (waited the 2 s first) or, when a window read quiet, during it; the CPU
    # load is named whatever else (another process's fio on the disk) contended too
    msg = c["message"]
    assert c["status"] == "errored" and msg.startswith(("contended: ", "contended during the "
                                                        "measurement: ")), msg
    assert CPU_REASON.search(msg), msg
    assert not c["evaluations"]  # nothing judged as hardware
    ev = c["details"]["contention"]
    during = ev.get("during", {}).get("worst", {})
    seen = max(ev["before"]["runnable_per_cpu"], during.get("runnable_per_cpu", 0))
    assert ev["timeout_s"] == 2
    if "runnable tasks" in msg:  # the evidence behind the CPU reason the message gives
        assert seen >= cn.LIMITS.runnable_per_cpu, (msg, ev)
    else:  # tasks waited for a CPU (PSI, judged before the check only)
        assert ev["before"]["psi_cpu_some"] >= cn.LIMITS.cpu_some, (msg, ev)
    if msg.startswith("contended: "):  # refused by a whole window: this load is never calm
        assert ev["waited_s"] >= 1 and ev["contended"] and ev["window_s"] == cn.WINDOW_S, ev
        if "runnable" in msg:  # who competes is named (stress-ng, and on a shared machine others too)
            assert ev["before"]["processes"] and ev["before"]["processes"][0] in msg
    assert msg[:40] in (run_dir / "report.html").read_text()
    assert msg[:40] in r.stdout


@pytest.mark.slow
def test_a_second_fio_on_the_same_disk_is_named_with_its_rate(tmp_path, competing, contention_gate):
    if not shutil.which("fio"):
        pytest.skip("fio not installed")
    data = tmp_path / "other.dat"
    competing.append(subprocess.Popen(
        ["fio", "--name=other", f"--filename={data}", "--size=64M", "--rw=write", "--bs=1M", "--direct=1",
         "--ioengine=libaio", "--iodepth=8", "--time_based", "--runtime=30", "--output=/dev/null"]))
    time.sleep(2)
    _, doc, _ = run_busy(tmp_path)
    c = fio_check(doc)
    assert c["status"] == "errored" and c["message"].startswith("contended"), c["message"]
    assert "io: other processes moved" in c["message"], c["message"]
    load = c["details"]["contention"]["before"]
    assert load["foreign_io_bps"] >= cn.LIMITS.foreign_io_bps
    for disk in load.get("disks", []):  # the disk of the temporary directory both fio write to
        assert f"on {disk}" in c["message"]


def test_the_judgement_table():
    quiet = {"runnable_per_cpu": 0.5, "steal": 0.0, "psi_cpu_some": 0.1, "psi_io_some": 0.0,
             "psi_memory_some": 0.0, "own_io_bps": 0, "foreign_io_bps": 1e6, "mem_available": 0.8}
    every = frozenset({"cpu", "steal", "memory", "io", "gpu"})
    assert cn.judge(quiet, every, before=True) == []
    busy = {**quiet, "runnable_per_cpu": 6.0, "steal": 0.3, "psi_memory_some": 0.5, "mem_available": 0.01,
            "foreign_io_bps": 2e8, "psi_io_some": 0.7}
    words = cn.judge(busy, every, before=True)
    assert [w.split(":")[0] for w in words] == ["cpu", "steal", "memory", "memory", "io", "io"]
    assert "io: other processes moved 200 MB/s on the disks" in words
    # an I/O check's own I/O is not competition; during it, others' I/O counts beside its own
    assert cn.judge({**quiet, "foreign_io_bps": 2e8, "own_io_bps": 2e9}, every, before=False) == []
    assert cn.judge({**quiet, "foreign_io_bps": 2e8, "own_io_bps": 4e8}, every, before=False)
    assert cn.judge(busy, frozenset({"cpu"}), before=True)[0].startswith("cpu: 6 runnable")
    assert not cn.judge({**quiet, "foreign_io_bps": 2e8}, frozenset({"cpu", "memory"}), before=True)


def test_before_waits_bounded_and_measures_once_the_load_is_gone(tmp_path):
    tree = Tree(tmp_path)
    clock = [0.0]
    # two busy windows (8 runnable on 1 CPU; the first is read at its first look and at its end), then quiet
    waits = iter([8, 8, 8, 0, 0, 0])

    def sleep(s: float) -> None:
        clock[0] += s
        tree.step(running=next(waits), sectors=0)

    gate = cn.Gate(ProcFs(tmp_path), clock=lambda: clock[0], sleep=sleep, gpus=lambda: [], mode="gate")
    notes: list[str] = []
    details, refused = gate.before(resolved(timeout=10), lambda: False, notes.append)
    assert refused == "" and details["contention"]["waited_s"] == 2.0
    assert notes and notes[0].startswith("waiting up to 10 s for competing load to go: cpu: 8 runnable")
    # still busy past the timeout: refused with the evidence and how long it waited
    tree2 = Tree(tmp_path / "b")
    clock2 = [0.0]

    def busy(s: float) -> None:
        clock2[0] += s
        tree2.step(running=8, sectors=0)

    gate2 = cn.Gate(ProcFs(tmp_path / "b"), clock=lambda: clock2[0], sleep=busy, gpus=lambda: [],
                    mode="gate")
    details, refused = gate2.before(resolved(timeout=3), lambda: False, lambda _m: None)
    assert refused.startswith("cpu: 8 runnable tasks of other processes per CPU")
    assert "(waited 3 s)" in refused
    assert details["contention"]["contended"]
    record = cn.Gate(ProcFs(tmp_path / "b"), clock=lambda: clock2[0], sleep=busy, gpus=lambda: [],
                     mode="record")
    details, refused = record.before(resolved(timeout=3), lambda: False, lambda _m: None)
    assert refused == "" and details["contention"]["gated"] is False and details["contention"]["contended"]


@pytest.mark.parametrize(("running", "sectors", "asked"), [
    (0, 0, [cn.FIRST_LOOK_S]),  # calm: the first look is enough
    (2, 0, [cn.FIRST_LOOK_S, cn.WINDOW_S - cn.FIRST_LOOK_S]),  # 2 runnable per CPU: under 3, not calm
    (0, 8_000, [cn.FIRST_LOOK_S, cn.WINDOW_S - cn.FIRST_LOOK_S]),  # 16 MB/s by others: under 50, not calm
])
def test_a_calm_first_look_is_enough_anything_nearer_a_limit_reads_the_whole_window(
        tmp_path, running: int, sectors: int, asked: list[float]):
    tree, clock = Tree(tmp_path), [0.0]
    slept, sleep = stepping(tree, clock, running, sectors)
    gate = cn.Gate(ProcFs(tmp_path), clock=lambda: clock[0], sleep=sleep, gpus=lambda: [], mode="gate")
    details, refused = gate.before(resolved(timeout=10), lambda: False, lambda _m: None)
    assert refused == "" and slept == asked  # under every limit: measured, however long it looked
    rec = details["contention"]
    assert rec["window_s"] == sum(asked) and rec["waited_s"] == 0.0
    section(Details).validate_python(details)  # the typed section knows window_s (checked on read)


def test_calm_is_far_below_every_limit_the_gate_judges_before_a_check():
    every = cn.resources(resolved())
    assert cn.calm({}, every) and cn.calm({"runnable_per_cpu": 0.5, "mem_available": 0.5}, every)
    for load in ({"runnable_per_cpu": 0.75}, {"psi_cpu_some": 0.3}, {"steal": 0.06},
                 {"psi_memory_some": 0.06}, {"mem_available": 0.1}, {"foreign_io_bps": 13e6},
                 {"psi_io_some": 0.2}):
        assert not cn.calm(load, every), load
        assert cn.judge(load, every, before=True) == [], load  # none of them contends by itself
    assert cn.calm({"foreign_io_bps": 13e6}, frozenset({"cpu", "memory"}))  # io not wanted
    strict = dataclasses.replace(cn.LIMITS, runnable_per_cpu=1.0)  # a suite's own threshold counts
    assert cn.calm({"runnable_per_cpu": 0.2}, every, strict)
    assert not cn.calm({"runnable_per_cpu": 0.3}, every, strict)


def test_other_gpu_processes_hold_a_gpu_check(tmp_path):
    tree = Tree(tmp_path)
    clock = [0.0]

    def sleep(s: float) -> None:
        clock[0] += s
        tree.step(0, 0)

    gate = cn.Gate(ProcFs(tmp_path), clock=lambda: clock[0], sleep=sleep,
                   gpus=lambda: ["GPU 3: pid 4242 (70.0 GiB)"], mode="gate")
    from harness.checks.registry import kinds
    from harness.config.loader import load_suite

    suite = write(tmp_path / "g.yaml", "name: g\ndefaults: {contention: {timeout: 1}}\n"
                  "checks:\n  - {id: burn, kind: gpu_burn, params: {duration: 1}}\n")
    check = load_suite(suite, kinds()).checks[0]
    _, refused = gate.before(check, lambda: False, lambda _m: None)
    assert refused.startswith("gpu: other processes on the GPUs: GPU 3: pid 4242 (70.0 GiB)")


def test_watch_finds_foreign_io_during_the_measurement(tmp_path):
    tree = Tree(tmp_path)
    gate = cn.Gate(ProcFs(tmp_path), window_s=0.2, gpus=lambda: [], mode="gate")
    watch = gate.watch(resolved())
    deadline = time.monotonic() + 20
    while len(watch.windows) < 6 and time.monotonic() < deadline:
        tree.step(running=0, sectors=400_000)  # ~200 MB per step by nobody of ours
        time.sleep(0.02)
    watch.stop()
    assert re.match(r"\d+ of \d+ s: ", watch.refuses), watch.refuses
    assert "io: other processes moved" in watch.refuses and tree.disk in watch.refuses
    d = watch.details()
    assert d["windows"] >= 6 and d["contended_windows"] >= 3 and json.dumps(d)
    quiet = cn.Gate(ProcFs(tmp_path), window_s=0.05, gpus=lambda: [], mode="record").watch(resolved())
    time.sleep(0.2)
    quiet.stop()
    assert quiet.refuses == ""


def test_the_during_message_names_every_kind_of_load_seen(tmp_path):
    """CPU load in two windows, another fio's I/O and memory pressure together in the third: the
    message names all three, each with the evidence of its worst window, and stays bounded."""
    Tree(tmp_path)
    watch = cn.Gate(ProcFs(tmp_path), gpus=lambda: [], mode="gate").watch(resolved())
    watch.stop()  # the samples below stand for the windows the sampler would have read
    cpu = {"runnable_per_cpu": 8.0, "foreign_io_bps": 0, "own_io_bps": 1e8}
    both = {"runnable_per_cpu": 0.5, "foreign_io_bps": 2e8, "own_io_bps": 1e8, "psi_memory_some": 0.4}
    for load in ({**cpu, "runnable_per_cpu": 6.0}, cpu, both):
        watch.windows.append(load)
        watch.found.append(cn.judge(load, cn.resources(resolved()), before=False))
    assert [len(f) for f in watch.found] == [1, 1, 2]
    msg = watch.refuses
    assert msg.startswith("3 of 3 s: cpu: 8 runnable tasks of other processes per CPU (limit 3) "
                          "(in 2 of 3 s); "), msg
    assert "io: other processes moved 200 MB/s" in msg and "(in 1 of 3 s)" in msg, msg
    assert "memory: tasks stalled on memory 40% of the time (PSI)" in msg, msg
    assert watch.details()["kinds"] == {"cpu": 2, "io": 1, "memory": 1}
    # GPU sharing comes first, the other kinds still named; a long list is cut, not dropped
    watch.windows[0] = {**watch.windows[0], "gpu_processes": [f"GPU {g}: pid {900 + g} (1.0 GiB)"
                                                              for g in range(8)]}
    watch.found[2] = [*watch.found[2], "memory: " + "x" * 2000]
    msg = watch.refuses
    assert msg.startswith("gpu: other processes on the GPUs in 1 of 3 windows, first in window 1: "), msg
    assert CPU_REASON.search(msg) and "io: other processes moved" in msg and "memory: " in msg, msg
    assert len(msg) < 5 * cn.EVIDENCE_CHARS, len(msg)


def test_off_reads_nothing_and_a_check_can_opt_out(tmp_path):
    gate = cn.Gate(ProcFs(tmp_path), gpus=lambda: [], mode="off")
    assert gate.before(resolved(), lambda: False, lambda _m: None) == ({}, "")
    assert gate.watch(resolved()).details() == {}
    assert nodeload.mode_of({"HARNESS_CONTENTION": "Record"}) == "record" and nodeload.mode_of({}) == "gate"
    assert Contention(enabled=False).over(Contention(timeout=5)).timeout == 5


@pytest.mark.slow
def test_sigterm_while_the_gate_waits_is_an_interrupted_run_not_a_contended_check(tmp_path, competing,
                                                                                 contention_gate):
    """SIGTERM (scancel) during the gate's wait cut the wait short and the check was ERRORED
    "contended" with "SIGTERM arrived after the last check had finished: the verdict stands"
    (exit 3): now the check is NOT RUN, the run interrupted, exit 143, like any SIGTERM."""
    import signal
    import sys

    if not shutil.which("stress-ng"):
        pytest.skip("stress-ng not installed")
    competing.append(subprocess.Popen(["stress-ng", "--cpu", str(8 * (os.cpu_count() or 1)), "-t", "60",
                                       "-q"]))
    time.sleep(1.5)
    out = tmp_path / "out"
    suite = write(tmp_path / "busy.yaml", FIO_SUITE.replace("timeout: 2", "timeout: 120"))
    p = subprocess.Popen([sys.executable, "-m", "harness", "run", str(suite), "--profile",
                          str(write(tmp_path / "lenient.yaml", PROFILE)), "--output", str(out),
                          "--history", "off"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert p.stdout is not None
        seen = ""
        for line in p.stdout:  # bounded: the run ends by itself after the gate's 120 s
            seen += line
            if "waiting up to 120 s for competing load to go" in line:
                p.send_signal(signal.SIGTERM)
                break
        rest, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    text = seen + rest
    assert "waiting up to 120 s" in seen, text
    assert p.returncode == 143, text
    (run_dir,) = run_dirs(out)
    doc = results(run_dir)
    c = fio_check(doc)
    assert doc["interrupted"] is True and c["status"] == "not_run", c
    assert c["message"] == "interrupted by SIGTERM while running" and "verdict stands" not in text
