"""The subprocess edge: timeouts kill the whole process group; missing tools say how to install."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from faulthelp import HANG, alive

from harness.errors import ToolMissing
from harness.platform import proc


def test_timeout_kills_the_whole_group(tmp_path: Path):
    t0 = time.monotonic()
    res = proc.run([sys.executable, "-c", HANG, str(tmp_path)], tmp_path / "o", tmp_path / "e", timeout=1.5)
    assert res.timed_out and res.rc is not None and res.rc < 0
    assert time.monotonic() - t0 < 1.5 + proc.KILL_GRACE_S + 15  # bounded: it did not wait 300 s
    assert res.stdout().strip() == "started"
    for name in ("child.pid", "grandchild.pid"):
        pid = int((tmp_path / name).read_text())
        deadline = time.monotonic() + 2
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid), f"{name} survived"


def test_exit_status_and_output_files(tmp_path: Path):
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    res = proc.run([sys.executable, "-c", code], tmp_path / "o", tmp_path / "e", timeout=30)
    assert (res.rc, res.timed_out) == (3, False)
    assert res.stdout() == "out\n" and res.stderr() == "err\n"
    assert res.tail() == "err"


def test_killed_by_signal_is_negative_rc(tmp_path: Path):
    res = proc.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
                   tmp_path / "o", tmp_path / "e", timeout=30)
    assert res.rc == -11


def test_missing_tool_names_the_package(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolMissing, match=r"fio not found; install it with: apt-get install fio"):
        proc.run(["fio", "--version"], tmp_path / "o", tmp_path / "e", timeout=5)
    with pytest.raises(ToolMissing, match="no-such-tool not found on PATH"):
        proc.capture_rc(["no-such-tool"])


def test_capture_rc_timeout(tmp_path: Path):
    rc, _out, err = proc.capture_rc([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert rc == -1 and "timed out" in err
