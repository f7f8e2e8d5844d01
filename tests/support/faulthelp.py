"""Helpers for the fault tests: find and watch real processes, start and kill real harness runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from clihelp import ROOT

# A tool that starts a child which ignores SIGTERM and a double-forked grandchild (both stay
# in its process group), writes their PIDs to files in argv[1], then hangs.
HANG = r"""
import os, signal, sys, time
d = sys.argv[1]
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    open(os.path.join(d, "child.pid"), "w").write(str(os.getpid()))
    time.sleep(300); os._exit(0)
if os.fork() == 0:
    if os.fork() == 0:
        open(os.path.join(d, "grandchild.pid"), "w").write(str(os.getpid()))
        time.sleep(300); os._exit(0)
    os._exit(0)
open(os.path.join(d, "leader.pid"), "w").write(str(os.getpid()))
print("started", flush=True)
time.sleep(300)
"""


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` in the parent tree (setsid'd children included)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        try:
            parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (ValueError, OSError, IndexError):
            continue
    out: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {c for c, pp in parent.items() if pp in frontier and c not in out}
        out |= frontier
    return out


def procs_with(marker: str, name: str | None = None, under: int | None = None) -> list[int]:
    """Live processes whose command line contains `marker` (and whose argv[0] is `name`), only
    those below PID `under` when given: tests that run side by side must not see each other's."""
    mine = descendants(under) if under is not None else None
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = b" ".join(argv).decode(errors="replace")
        if marker in text and (name is None or Path(argv[0].decode(errors="replace")).name == name) \
                and (mine is None or int(d.name) in mine) and alive(int(d.name)):
            out.append(int(d.name))
    return out


def wait_for(cond: Callable[[], object], timeout: float, what: str, step: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


def start(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.Popen[str]:
    """`harness ARGS` in the background, output captured."""
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=cwd or ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def sigkill(p: subprocess.Popen[str]) -> None:
    p.kill()
    p.communicate(timeout=30)


def ledger_groups(run_dir: Path) -> list[int]:
    """Process groups RUN_DIR/.running lists (empty while it is missing or being replaced)."""
    try:
        return [g["pgid"] for g in json.loads((run_dir / ".running").read_text())["groups"]]
    except (OSError, ValueError, KeyError):
        return []


def pids_in(directory: Path) -> dict[str, int]:
    return {f.stem: int(f.read_text()) for f in directory.glob("*.pid") if f.read_text().strip()}
