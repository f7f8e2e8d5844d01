"""A guard probe that hangs is bounded by its check's timeout, and SIGTERM lands at once (#17.3).

Real loop device, real fio suite; only `lsblk` is replaced, by one that hangs (first on PATH).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write
from faulthelp import start, wait_for

SUITE = """\
name: guarded
checks:
  - id: fio
    kind: fio
    destructive: true
    timeout: 5s
    params:
      target: {dev}
      jobs:
        - {{name: w, rw: randwrite, bs: 4k, iodepth: 4, size: 4M, runtime: 1}}
"""


@pytest.fixture
def hung_lsblk(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup (a loop device)")
    img = tmp_path / "disk.img"
    img.write_bytes(b"")
    os.truncate(img, 16 * 1024 * 1024)
    dev = subprocess.run(["losetup", "-f", "--show", str(img)], check=True, capture_output=True,
                         text=True).stdout.strip()
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "lsblk").write_text("#!/bin/sh\nexec sleep 600\n")
    (fake / "lsblk").chmod(0o755)
    suite = write(tmp_path / "s.yaml", SUITE.format(dev=dev))
    yield suite, {"PATH": f"{fake}:{os.environ['PATH']}", "HARNESS_HISTORY": "off"}
    subprocess.run(["losetup", "-d", dev], check=False)


def _running(out: Path) -> str:
    """argv[0] of the tool the run's ledger names, '' when none (yet)."""
    try:
        groups = json.loads((run_dirs(out)[0] / ".running").read_text())["groups"]
    except (OSError, IndexError, ValueError, KeyError):
        return ""
    return str(groups[0]["argv"][0]) if groups else ""


def test_a_hung_probe_ends_with_the_checks_timeout(hung_lsblk, tmp_path: Path) -> None:
    suite, env = hung_lsblk
    t0 = time.monotonic()
    r = harness("run", str(suite), "--profile", "generic", "--allow-destructive", "--output",
                str(tmp_path / "out"), env=env, timeout=120)
    took = time.monotonic() - t0
    assert r.returncode == 3, r.stdout + r.stderr
    assert took < 5 + 3 * 3 + 15, took  # was 80 s: each probe waited its own 30 s and more
    (check,) = results(run_dirs(tmp_path / "out")[0])["checks"]
    assert check["status"] == "errored" and "lsblk" in check["message"] + r.stdout


def test_sigterm_lands_while_a_probe_hangs(hung_lsblk, tmp_path: Path) -> None:
    suite, env = hung_lsblk
    p = start("run", str(suite), "--profile", "generic", "--allow-destructive", "--output",
              str(tmp_path / "out"), env=env)
    try:
        wait_for(lambda: _running(tmp_path / "out") == "lsblk", 60, "the hung lsblk")
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143
    assert took < 3 * 3 + 3, took  # was 76 s
