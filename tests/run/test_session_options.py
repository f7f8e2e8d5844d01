"""RunOptions: what `harness run` was asked, built once by the CLI and passed whole to the session."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from harness.cli.main import main
from harness.errors import UsageError
from harness.run import nodeload, session
from harness.run.session import RunOptions


def test_options_are_frozen_and_selections_become_tuples() -> None:
    opts = RunOptions(suite="smoke", only=["a", "b"], skip=iter(["c"]))  # type: ignore[arg-type]
    assert opts.only == ("a", "b") and opts.skip == ("c",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.quiet = True  # type: ignore[misc]
    assert hash(opts) == hash(RunOptions(suite="smoke", only=("a", "b"), skip=("c",)))
    assert RunOptions().output == Path("reports") and RunOptions().keep == session.DEFAULT_KEEP


def test_the_cli_builds_one_options_value(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[RunOptions] = []

    def execute(options: RunOptions | None = None, **kw: Any) -> session.Finished:
        # and the start of the gate's first look, begun before the session loaded
        assert options is not None and set(kw) == {"first_look", "helper"}
        assert kw["helper"] is None  # no helper was forked: this process began nothing early
        assert isinstance(kw["first_look"], nodeload.Snapshot) and kw["first_look"].t <= time.monotonic()
        seen.append(options)
        return session.Finished(0)

    monkeypatch.setattr(session, "execute", execute)
    argv = ["harness", "run", "quick", "--only", "a,b", "--only", " c ", "--skip", "d", "-q", "--keep", "3",
            "--output", str(tmp_path), "--history", "off", "--allow-destructive", "--profile", "generic"]
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 0
    assert seen == [RunOptions(suite="quick", profile="generic", output=tmp_path, only=("a", "b", "c"),
                               skip=("d",), allow_destructive=True, argv=tuple(argv), history=Path("off"),
                               quiet=True, keep=3)]


def test_named_fields_override_the_options_and_a_misspelt_one_is_refused(tmp_path: Path) -> None:
    base = RunOptions(suite="smoke", output=tmp_path / "o", dry_run=True)
    with pytest.raises(TypeError, match="dryrun"):
        session.run(base, dryrun=False)
    with pytest.raises(UsageError, match="unknown check id"):
        session.run(base, only=("no-such-check",))
    assert not (tmp_path / "o").exists()


def test_a_dry_run_writes_nothing_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = session.execute(RunOptions(suite="smoke", profile="generic", output=tmp_path / "o", dry_run=True),
                           inventory_probe=lambda: {"host": {"hostname": "n"}})
    assert done == session.Finished(0)
    assert capsys.readouterr().out.startswith("suite   smoke")
    assert not (tmp_path / "o").exists()


def test_resume_refuses_a_selection_whatever_way_it_is_given(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"drop SUITE, --only"):
        session.run(RunOptions(suite="smoke", only=("x",), resume=tmp_path, output=tmp_path))
    with pytest.raises(UsageError, match=r"drop --profile, --dry-run"):
        session.run(resume=tmp_path, profile="generic", dry_run=True, output=tmp_path)
