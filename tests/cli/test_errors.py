"""main(): the one place errors become exit codes. A bug is exit 3 and one line, never a traceback;
Ctrl-C and sys.exit keep their own codes; --keep without --quiet is a usage error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clihelp import harness

from harness.cli.main import main
from harness.run import session


def call_main(monkeypatch: pytest.MonkeyPatch, exc: BaseException, tmp_path: Path) -> int:
    def execute(**_: Any) -> Any:
        raise exc

    monkeypatch.setattr(session, "execute", execute)
    monkeypatch.setattr("sys.argv", ["harness", "run", "smoke", "--output", str(tmp_path)])
    with pytest.raises(SystemExit) as e:
        main()
    return int(e.value.code or 0)


def test_a_bug_outside_the_checks_is_exit_3_and_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]):
    monkeypatch.delenv("HARNESS_DEBUG", raising=False)
    assert call_main(monkeypatch, RuntimeError("boom\n  detail line"), tmp_path) == 3
    err = capsys.readouterr().err
    assert err.splitlines() == ["error: internal error: RuntimeError: boom (a bug in the harness; "
                                "HARNESS_DEBUG=1 prints the traceback)"]


def test_harness_debug_adds_the_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("HARNESS_DEBUG", "1")
    assert call_main(monkeypatch, KeyError("k"), tmp_path) == 3
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_interrupt_and_exit_are_not_swallowed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]):
    assert call_main(monkeypatch, KeyboardInterrupt(), tmp_path) == 130
    assert capsys.readouterr().err.split() == ["aborted"]  # click turns Ctrl-C into Abort
    assert call_main(monkeypatch, SystemExit(7), tmp_path) == 7


def test_keep_without_quiet_is_a_usage_error(tmp_path: Path):
    r = harness("run", "smoke", "--keep", "3", "--output", str(tmp_path), "--dry-run")
    assert r.returncode == 2 and "--keep prunes --quiet runs" in r.stderr
    r = harness("run", "smoke", "-q", "--keep", "0", "--output", str(tmp_path))
    assert r.returncode == 2 and "--keep" in r.stderr and not list(tmp_path.iterdir())
