"""The contention gate's first look begins as the run does (nodeload.first_look): the run's own
preparation takes the place of the sleep, the window still ends right before the check, is never
shorter than START_LOOK_S, never judged when older than one window, and the harness's own runnable
tasks and I/O in it are not competing load. Scripted clock and /proc trees, as test_contention."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest
from clihelp import write
from contentiontree import FIO_SUITE, Tree, put, resolved, stepping

from harness.platform.procfs import ProcFs
from harness.run import contention as cn
from harness.run import nodeload
from harness.run import session as app


def gate_from(tmp_path: Path, tree: Tree, clock: list[float], prepare_s: float, running: int = 0,
              sectors: int = 0) -> tuple[cn.Gate, list[float]]:
    """A gate whose run started at clock 0 and prepared for `prepare_s` (the tree moving on by
    `running` and `sectors` meanwhile); the sleeps it asks for after that."""
    fs = ProcFs(tmp_path)
    start = nodeload.snapshot(fs, lambda: clock[0])
    clock[0] += prepare_s
    tree.step(running=running, sectors=sectors)
    asked, sleep = stepping(tree, clock, running, sectors)
    return cn.Gate(fs, clock=lambda: clock[0], sleep=sleep, gpus=lambda: [], mode="gate", start=start), asked


@pytest.mark.parametrize(("prepare_s", "asked", "window_s"), [
    (0.04, [cn.START_LOOK_S - 0.04], cn.START_LOOK_S),  # the rest of the shortest look is slept
    (0.15, [], 0.15),  # preparation longer: no sleep, the window as long as it was (the look of a
    (0.4, [], 0.4),  # check's fresh window, FIRST_LOOK_S, is not waited for)
])
def test_the_run_s_preparation_fills_the_first_look(tmp_path, prepare_s, asked, window_s):
    tree, clock = Tree(tmp_path), [0.0]
    gate, slept = gate_from(tmp_path, tree, clock, prepare_s)
    details, refused = gate.before(resolved(timeout=10), lambda: False, lambda _m: None)
    assert refused == "" and slept == pytest.approx(asked)
    rec = details["contention"]
    assert rec["window_s"] == pytest.approx(window_s) and rec["waited_s"] == 0.0


def test_a_first_look_from_the_start_that_is_not_calm_is_read_afresh(tmp_path):
    """The harness's own load may be what made it less calm (PSI counts every task's waits): the
    check's window is read afresh, the first look and then the whole window, as without a start."""
    tree, clock = Tree(tmp_path), [0.0]
    gate, slept = gate_from(tmp_path, tree, clock, 0.4, running=2)  # 2 runnable per CPU: not calm
    details, refused = gate.before(resolved(timeout=10), lambda: False, lambda _m: None)
    assert refused == "" and slept == pytest.approx([cn.FIRST_LOOK_S, cn.WINDOW_S - cn.FIRST_LOOK_S])
    rec = details["contention"]
    assert rec["window_s"] == cn.WINDOW_S and rec["waited_s"] == 0.0
    assert rec["before"]["runnable_per_cpu"] == 2


def test_a_start_older_than_a_window_is_not_judged(tmp_path):
    """A long settle wait or a held lock between the start and the check: the window is read afresh,
    so load that ended long before the check cannot stand for the node now, nor the reverse."""
    tree, clock = Tree(tmp_path), [0.0]
    gate, slept = gate_from(tmp_path, tree, clock, cn.WINDOW_S + 0.5, running=8)  # busy, long ago
    tree.step(running=0, sectors=0)
    slept_quiet, sleep = stepping(tree, clock, 0)
    gate.sleep = sleep
    details, refused = gate.before(resolved(timeout=10), lambda: False, lambda _m: None)
    assert refused == "" and slept_quiet == [cn.FIRST_LOOK_S] and not slept
    assert details["contention"]["window_s"] == cn.FIRST_LOOK_S


def test_the_start_is_the_first_check_s_only(tmp_path):
    """A check before it (gated or not) ran in that window: every later check reads afresh."""
    tree, clock = Tree(tmp_path), [0.0]
    opted_out = FIO_SUITE.replace("    kind: fio\n", "    kind: fio\n    contention: {enabled: false}\n")
    suite = write(tmp_path / "two.yaml", opted_out)
    from harness.checks.registry import kinds
    from harness.config.loader import load_suite

    ungated = load_suite(suite, kinds()).checks[0]
    gate, slept = gate_from(tmp_path, tree, clock, 0.4)
    assert gate.before(ungated, lambda: False, lambda _m: None) == ({}, "")
    details, _ = gate.before(resolved(timeout=10), lambda: False, lambda _m: None)
    assert slept == [cn.FIRST_LOOK_S] and details["contention"]["window_s"] == cn.FIRST_LOOK_S
    again, _ = gate.before(resolved(timeout=10), lambda: False, lambda _m: None)
    assert slept == [cn.FIRST_LOOK_S] * 2 and again["contention"]["window_s"] == cn.FIRST_LOOK_S


def own_process(root: Path, read_bytes: int, state: str = "R") -> None:
    """This process in the tree: one thread in `state`, `read_bytes` read from storage so far."""
    pid = os.getpid()
    task = root / "proc" / str(pid) / "task" / str(pid)
    task.mkdir(parents=True, exist_ok=True)
    put(task / "stat", f"{pid} (harness) {state} 1 " + "0 " * 30 + "\n")
    put(root / "proc" / str(pid) / "io", f"read_bytes: {read_bytes}\nwrite_bytes: 0\n")


@pytest.mark.parametrize(("ours", "moved"), [(True, 200_000_000), (False, 10_240_000)])
def test_the_harness_s_own_load_in_the_window_is_not_competing_load(tmp_path, ours: bool, moved: int):
    """The run reads 200 MB (its modules from a cold cache) with its thread runnable while the
    window runs: its own, so calm and the first look enough. 10 MB by someone else is competing
    I/O not far below its limit: the window is read afresh. Another disk's I/O is not the check's
    disk's."""
    tree, clock = Tree(tmp_path), [0.0]
    (tmp_path / "sys" / "block" / "zz9").mkdir(parents=True)
    own_process(tmp_path, 0)

    def step(running: int, sectors: int, steal: int = 0) -> None:  # the check's disk and another
        Tree.step(tree, running, sectors, steal)
        put(tmp_path / "proc" / "diskstats",
            f" 252 0 {tree.disk} 1 0 {tree.sectors} 0 1 0 0 0 0 0 0 0\n"
            f" 252 16 zz9 1 0 {tree.sectors * 3} 0 1 0 0 0 0 0 0 0\n")

    tree.step = step  # type: ignore[method-assign]
    tree.step(running=1, sectors=0)  # procs_running counts this process's own thread
    fs = ProcFs(tmp_path)
    start = nodeload.snapshot(fs, lambda: clock[0])
    clock[0] += 0.3
    tree.step(running=1, sectors=moved // 512)
    own_process(tmp_path, moved if ours else 0)
    asked, sleep = stepping(tree, clock, running=1)
    gate = cn.Gate(fs, clock=lambda: clock[0], sleep=sleep, gpus=lambda: [], mode="gate", start=start)
    details, refused = gate.before(resolved(timeout=10), lambda: False, lambda _m: None)
    load = details["contention"]["before"]
    assert load["runnable_per_cpu"] == 0 and load["disks"] == [tree.disk]
    if ours:
        assert refused == "" and asked == [] and details["contention"]["window_s"] == 0.3
        assert load["foreign_io_bps"] == 0 and load["own_io_bps"] == round(moved / 0.3)
    else:  # 10 MB by others while the run started; none in the check's own window, read afresh
        assert refused == "" and asked == [cn.FIRST_LOOK_S]
        assert details["contention"]["window_s"] == cn.FIRST_LOOK_S and load["foreign_io_bps"] == 0


def test_a_run_s_first_window_starts_as_the_run_does(tmp_path, monkeypatch, contention_gate):
    """Through session.execute: a start taken 0.6 s before is the start of the first check's
    window (no sleep; a shorter one would read 0.25 s), and a dry run takes none."""
    real, taken = nodeload.first_look, []

    def early() -> nodeload.Snapshot | None:
        s = real()
        assert s is not None
        taken.append(dataclasses.replace(s, t=time.monotonic() - 0.6))
        return taken[-1]

    monkeypatch.setattr(nodeload, "first_look", early)
    # this shared machine's own load is let through, as in tests/cli/test_contention_limits.py
    suite = write(tmp_path / "s.yaml", "name: one\ndefaults:\n  contention: {timeout: 1s, runnable_per_cpu: "
                  "1000, cpu_some: 100%, mem_some: 100%, steal: 100%}\n"
                  "checks:\n  - {id: load, kind: command, params: {argv: [/bin/true]}}\n")
    assert app.run(suite=str(suite), profile="generic", output=tmp_path / "dry", dry_run=True) == 0
    assert taken == []
    finished = app.execute(suite=str(suite), profile="generic", output=tmp_path / "out", history="off",
                           inventory_probe=lambda: {"host": {"hostname": "node"}})
    assert finished.record is not None and len(taken) == 1
    rec = finished.record.checks[0].details["contention"]
    assert rec["window_s"] >= 0.6 and rec["waited_s"] == 0.0
