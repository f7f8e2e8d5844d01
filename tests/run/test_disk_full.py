"""Results on a full filesystem (a real 4 MiB ext4 on a loop device): a clear one-line error,
exit 1, results.json never half-written, nothing left running, and the run resumable later.

Needs root, losetup and mkfs.ext4; skipped elsewhere, but a failure under CI=true.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write
from faulthelp import alive, pids_in, procs_with

from harness.results import validate

PY = sys.executable

# Fills the file argv[1] until ENOSPC (once: argv[3] marks it done), after leaving a
# double-forked grandchild in its process group (PID in argv[2]) that would sleep for minutes.
FILL = r"""
import errno, os, sys, time
target, piddir, once = sys.argv[1], sys.argv[2], sys.argv[3]
if os.fork() == 0:
    if os.fork() == 0:
        open(os.path.join(piddir, "grandchild.pid"), "w").write(str(os.getpid()))
        time.sleep(300); os._exit(0)
    os._exit(0)
if os.path.exists(once):
    print("already filled once"); sys.exit(0)
open(once, "w").close()
fd = os.open(target, os.O_WRONLY | os.O_CREAT)
for size in (65536, 4096, 512, 1):
    try:
        while True:
            os.write(fd, b"x" * size)
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
os.close(fd)
print("filled")
"""


def _need(ok: bool, reason: str) -> None:
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)


def _sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A fresh 4 MiB ext4 (no root reserve) mounted on tmp_path/mnt."""
    _need(os.geteuid() == 0, "needs root (loop device, mount)")
    for tool in ("losetup", "mkfs.ext4", "mount"):
        _need(shutil.which(tool) is not None, f"{tool} not found (apt-get install e2fsprogs util-linux)")
    img, mnt = tmp_path / "small.img", tmp_path / "mnt"
    with open(img, "wb") as f:
        f.truncate(4 * 1024 * 1024)
    _sh("mkfs.ext4", "-q", "-F", "-m", "0", "-N", "256", str(img))
    dev = _sh("losetup", "-f", "--show", str(img)).strip()
    try:
        mnt.mkdir()
        _sh("mount", dev, str(mnt))
        try:
            yield mnt
        finally:
            if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


def test_disk_fills_mid_run(small_fs: Path, tmp_path: Path):
    piddir = tmp_path / "pids"
    piddir.mkdir()
    suite = write(tmp_path / "fill.yaml", f"""\
name: fill
checks:
  - id: fill
    kind: command
    params: {{argv: [{PY}, -c, {json.dumps(FILL)}, {small_fs / "filler"}, {piddir}, {tmp_path / "once"}]}}
    expect: [{{metric: command.duration, max: 3600, unit: s}}]
  - id: after
    kind: command
    params: {{argv: [/bin/true]}}
    expect: [{{metric: command.duration, max: 3600, unit: s}}]
""")
    out = small_fs / "reports"
    r = harness("run", str(suite), "--profile", "generic", "--output", str(out))
    assert r.returncode == 3, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "Logging error" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    (run_dir,) = run_dirs(out)
    assert last.startswith(f"error: {run_dir}/checks/fill.json: cannot write: no space left on device; "
                           "run stopped, results cannot be saved (0 of 2 checks saved); free space, "
                           f"then: harness run --resume {run_dir}"), last
    assert "report:" not in r.stdout

    # results.json is the last complete version (written at the start), never a torn one
    doc = results(run_dir)
    assert validate(doc) == [] and [c["status"] for c in doc["checks"]] == ["not_run", "not_run"]
    assert [p.name for p in run_dir.rglob(".*.tmp")] == []
    assert not (run_dir / ".running").exists()
    # the check's processes are gone, the double-forked grandchild included
    assert not alive(pids_in(piddir)["grandchild"])
    assert procs_with(str(small_fs)) == []

    # free space and resume: nothing measured before is lost, the rest runs
    (small_fs / "filler").unlink()
    r = harness("run", "--resume", str(run_dir))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = results(run_dir)
    assert doc["verdict"] == "ACCEPTED" and [c["status"] for c in doc["checks"]] == ["passed", "passed"]
    assert (run_dir / "report.html").exists() and (run_dir / "junit.xml").exists()


def test_disk_full_before_the_run(small_fs: Path, tmp_path: Path):
    fd = os.open(small_fs / "filler", os.O_WRONLY | os.O_CREAT)
    for size in (65536, 4096, 512, 1):
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(fd, b"x" * size)
    os.close(fd)
    suite = write(tmp_path / "quick.yaml", "name: quick\nchecks:\n  - id: ok\n    kind: command\n"
                                           "    params: {argv: [/bin/true]}\n")
    out = small_fs / "reports"
    r = harness("run", str(suite), "--profile", "generic", "--output", str(out))
    assert r.returncode == 3, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {out}/"), r.stderr
    assert lines[0].endswith(": cannot create run directory: no space left on device")
    assert not out.exists()
