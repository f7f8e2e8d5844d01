"""A /proc + /sys/block tree whose counters a test moves on, for the contention gate's tests
(tests/run/test_contention*.py), and the fio check they gate."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from clihelp import write

from harness.run import contention as cn

FIO_SUITE = """\
name: busy
defaults:
  contention: {timeout: 2}
checks:
  - id: fio
    kind: fio
    params:
      jobs:
        - {name: randread_4k, rw: randread, bs: 4k, iodepth: 8, size: 16M, runtime: 2}
"""
STAT = "cpu  {busy} 0 0 {idle} 0 0 0 {steal} 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\nprocs_running {running}\n"


class Tree:
    """A /proc + /sys/block tree whose counters a test moves on."""

    def __init__(self, root: Path) -> None:
        self.root, self.ticks, self.sectors, self.psi = root, 0, 0, 0
        # the disk the fio check's temporary directory is on (its I/O is what the gate watches)
        self.disk = sorted(cn.target_disks(resolved()) or {"vdx"})[0]
        (root / "proc" / "pressure").mkdir(parents=True)
        (root / "sys" / "block" / self.disk).mkdir(parents=True)
        (root / "proc" / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 800 kB\n")
        self.step(running=1, sectors=0)

    def step(self, running: int, sectors: int, steal: int = 0) -> None:
        self.ticks += 100
        self.sectors += sectors
        p = self.root / "proc"
        put(p / "stat", STAT.format(busy=self.ticks // 2, idle=self.ticks // 2, steal=steal, running=running))
        for r in ("cpu", "io", "memory"):
            put(p / "pressure" / r, "some avg10=0 avg60=0 avg300=0 total=0\n")
        put(p / "diskstats", f" 252 0 {self.disk} 1 0 {self.sectors} 0 1 0 0 0 0 0 0 0\n")


def put(path: Path, text: str) -> None:
    """Replace a file whole, as the kernel's files read: a reader never sees half of it."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text)
    os.replace(tmp, path)


def resolved(timeout: float = 3.0) -> object:
    from harness.checks.registry import kinds
    from harness.config.loader import load_suite

    return load_suite(write_suite(timeout), kinds()).checks[0]


def write_suite(timeout: float) -> Path:
    d = Path(tempfile.mkdtemp())
    return write(d / "s.yaml", FIO_SUITE.replace("timeout: 2", f"timeout: {timeout}"))


def stepping(tree: Tree, clock: list[float], running: int, sectors: int = 0) -> tuple[list[float], object]:
    """The sleeps the gate asks for, and a sleep that moves the tree on by them."""
    asked: list[float] = []

    def sleep(s: float) -> None:
        asked.append(s)
        clock[0] += s
        tree.step(running=running, sectors=sectors)
    return asked, sleep
