"""Every wait is bounded and no tool escapes (issue #17.3 and #17.4): real processes only."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faulthelp import alive, wait_for

from harness.errors import ToolError, ToolTimeout
from harness.platform import proc, procscan

# A tool that leaves, besides itself: a daemon in a new session that ignores SIGTERM (setsid,
# as `setsid sh -c "exec sleep 7777" &` does) and a double-forked grandchild that calls setsid
# too. Each writes its PID to a file in argv[1]; the daemon keeps stdout open.
ESCAPE = r"""
import os, signal, sys, time
d = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    open(os.path.join(d, "daemon.pid"), "w").write(str(os.getpid()))
    time.sleep(300); os._exit(0)
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        open(os.path.join(d, "grandchild.pid"), "w").write(str(os.getpid()))
        time.sleep(300); os._exit(0)
    os._exit(0)
while len([f for f in os.listdir(d) if f.endswith(".pid")]) < 2:
    time.sleep(0.01)
print("started", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _escaped(d: Path) -> dict[str, int]:
    return {f.stem: int(f.read_text()) for f in d.glob("*.pid")}


def _all_gone(pids: dict[str, int]) -> None:
    for name, pid in pids.items():
        wait_for(lambda pid=pid: not alive(pid), 5, f"{name} (PID {pid}) to die")


@pytest.mark.parametrize("linger", ["0", "300"])
def test_run_kills_descendants_that_left_the_group(tmp_path: Path, linger: str) -> None:
    res = proc.run([sys.executable, "-c", ESCAPE, str(tmp_path), linger], tmp_path / "o", tmp_path / "e",
                   timeout=2)
    assert res.timed_out == (linger == "300")
    pids = _escaped(tmp_path)
    assert set(pids) == {"daemon", "grandchild"}
    _all_gone(pids)


def test_shell_setsid_daemon_is_killed(tmp_path: Path) -> None:
    marker = f"7777.{time.monotonic_ns() % 100000}"
    res = proc.run(["sh", "-c", f'setsid sh -c "exec sleep {marker}" & echo $!'], tmp_path / "o",
                   tmp_path / "e", timeout=5)
    assert res.rc == 0 and not res.timed_out
    time.sleep(0.2)
    assert not [p for p in procscan.all_procs() if p.alive and marker in " ".join(procscan.cmdline(p.pid))]


def test_capture_rc_is_bounded_when_a_daemon_holds_its_pipes(tmp_path: Path) -> None:
    t0 = time.monotonic()
    rc, _, err = proc.capture_rc([sys.executable, "-c", ESCAPE, str(tmp_path), "300"], timeout=1.0)
    took = time.monotonic() - t0
    assert rc == -1 and "timed out after 1s" in err and sys.executable in err
    assert took < 1.0 + 3 * proc.KILL_GRACE_S + 2, took
    _all_gone(_escaped(tmp_path))


def test_capture_rc_returns_when_the_probe_exits_but_a_daemon_lingers(tmp_path: Path) -> None:
    t0 = time.monotonic()
    rc, out, _ = proc.capture_rc([sys.executable, "-c", ESCAPE, str(tmp_path), "0"], timeout=30.0)
    assert (rc, out) == (0, "started\n")  # its exit ends the call, not the daemon's pipes
    assert time.monotonic() - t0 < 3 * proc.KILL_GRACE_S + 2
    _all_gone(_escaped(tmp_path))


def test_probes_get_only_what_is_left_of_the_checks_time() -> None:
    t0 = time.monotonic()
    with proc.deadline(1.0):
        rc, _, err = proc.capture_rc([sys.executable, "-c", "import time; time.sleep(60)"], timeout=30)
        assert rc == -1 and "timed out" in err
        with pytest.raises(ToolTimeout, match="time is up"):
            proc.capture_rc(["true"])
    assert time.monotonic() - t0 < 1.0 + proc.KILL_GRACE_S + 2
    assert proc.capture_rc(["true"])[0] == 0  # outside the block: no limit left over


def test_no_tool_starts_once_the_run_is_stopping(tmp_path: Path) -> None:
    with proc.deadline(None):
        proc.kill_all()
        with pytest.raises(ToolError, match="the run is stopping"):
            proc.run(["true"], tmp_path / "o", tmp_path / "e", timeout=5)
    assert proc.run(["true"], tmp_path / "o", tmp_path / "e", timeout=5).rc == 0


def test_a_stop_kills_a_tool_that_ignores_sigterm_after_the_stop_grace(tmp_path: Path) -> None:
    """kill_all() (SIGTERM/SIGINT: scancel) TERMed the tools once and waited for them as long as
    their timeout: a tool ignoring TERM kept the harness (and the node's run lock) for up to 30
    minutes, past Slurm's KillWait. Now it is KILLed STOP_GRACE_S after the stop."""
    import signal
    import threading

    ready = tmp_path / "ready"
    code = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "open(sys.argv[1], 'w').close(); time.sleep(300)")

    def stop_when_ready() -> None:
        wait_for(ready.exists, 30, "the tool to start")
        proc.kill_all()

    stopper = threading.Thread(target=stop_when_ready, daemon=True)
    stopper.start()
    t0 = time.monotonic()
    res = proc.run([sys.executable, "-c", code, str(ready)], tmp_path / "o", tmp_path / "e", timeout=120)
    took = time.monotonic() - t0
    stopper.join(5)
    assert res.interrupted and not res.timed_out and res.rc == -signal.SIGKILL, res
    assert took < 30, took  # bounded by the stop, not by the tool's timeout (120 s) or its sleep


def test_tools_carry_a_fresh_token_nested_ones_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(procscan.TOKEN_VAR, "outer")
    code = "import os; print(os.environ['HARNESS_RUN_TOKEN'])"
    a = proc.capture([sys.executable, "-c", code]).strip()
    b = proc.capture([sys.executable, "-c", code]).strip()
    assert a != b and a.endswith(":outer") and b.endswith(":outer")
    # the outer harness finds its tools' tools too
    nested = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                              env={**os.environ, procscan.TOKEN_VAR: "inner:outer"})
    try:  # the environment shows once exec() has set it up (Popen may return a moment before)
        wait_for(lambda: procscan.has_token(nested.pid, "inner"), 5, "the new environment")
        assert procscan.has_token(nested.pid, "outer")
        assert not procscan.has_token(nested.pid, "out")
    finally:
        nested.kill()
        nested.wait()
