"""`--output` that cannot hold a run is bad input (exit 2, one line), found before any work and in the
dry run too; a full disk while writing stays an environment error (tested in tests/run/test_disk_full.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from clihelp import ROOT, harness


@pytest.mark.parametrize(("output", "why"), [
    ("/proc/foo", "/proc is in a kernel file system: name a directory on a disk"),
    ("/sys/kernel/x/y", "is in a kernel file system"),
    ("/dev/null/x", "is in a kernel file system"),
    ("{tmp}/afile/sub", "afile is not a directory"),
    ("{tmp}/dangling/x", "dangling is a dangling symbolic link"),
])
@pytest.mark.parametrize("dry", [True, False])
def test_an_output_that_cannot_hold_a_run_is_bad_input(tmp_path: Path, output: str, why: str,
                                                       dry: bool) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    out = output.format(tmp=tmp_path)
    r = harness("run", "smoke", "--profile", "generic", "-o", out, *(["--dry-run"] if dry else []),
                "--history", "off", cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [f"error: --output {out}: " + r.stderr.split(": ", 2)[2].strip()]
    assert why in r.stderr
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.root
def test_a_directory_the_user_cannot_write_is_bad_input(tmp_path: Path) -> None:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run as another user")
    base = Path(tempfile.mkdtemp(prefix="harness-out-", dir="/tmp"))  # traversable by another user
    base.chmod(0o755)
    locked = base / "locked"
    locked.mkdir(mode=0o755)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        sys.executable, "-m", "harness", "run", "smoke", "--profile", "generic",
                        "--dry-run", "-o", str(locked / "reports")],
                       cwd="/", text=True, capture_output=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": "/nonexistent"})
    shutil.rmtree(base)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"error: --output {locked / 'reports'}: {locked}: permission denied (no write access)" in r.stderr
