"""`harness observe` against hostile input: a process name with escape sequences cannot repaint the
verdict line, a setsid child of the command does not outlive the window, thresholds must be numbers
that mean something, and an --output that is not a directory is a usage error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from clihelp import harness
from prochelp import assert_ends

HOSTILE = ("import ctypes\n"
           "ctypes.CDLL(None).prctl(15, b'\\x1b[2Jevil', 0, 0, 0)\n"  # PR_SET_NAME
           "while True: pass\n")


def test_a_hostile_process_name_is_escaped_in_the_verdict_line() -> None:
    r = harness("observe", "--duration", "2", "--interval", "0.5", "--threshold", "cpu_busy=0.05",
                "--threshold", "min_share=0.05", "--threshold", "cpu_wait=0.0", "--",
                sys.executable, "-c", HOSTILE, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout
    verdict = r.stdout.splitlines()[0]
    assert verdict.startswith("cpu-bound: ") and r"\x1b[2Jevil (pid " in verdict


def test_a_setsid_child_of_the_command_does_not_outlive_the_window(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    r = harness("observe", "--duration", "1", "--interval", "0.2", "--", "sh", "-c",
                f"setsid sleep 300 & echo $! > {pidfile}; sleep 30", timeout=60)
    assert r.returncode == 0, r.stderr
    pid = int(pidfile.read_text())
    assert_ends(pid, 10, f"the setsid child {pid} outlived the window")


@pytest.mark.parametrize("value", ["min_share=nan", "min_share=inf", "min_share=-5", "majflt=inf",
                                   "tcp_backlog=-1"])
def test_a_threshold_that_means_nothing_is_a_usage_error(value: str) -> None:
    r = harness("observe", "--duration", "1", "--threshold", value, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"observe threshold {value.split('=')[0]}=" in r.stderr and "must be" in r.stderr
    assert "internal error" not in r.stderr


def test_an_output_that_is_not_a_directory_is_a_usage_error() -> None:
    r = harness("observe", "--duration", "1", "--interval", "0.5", "-o", "/dev/null", timeout=60)
    assert r.returncode == 2 and "--output /dev/null: not a directory" in r.stderr, r.stderr
