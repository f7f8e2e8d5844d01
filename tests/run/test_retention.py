"""`--quiet` runs keep the newest N run directories; nothing else in the output directory is touched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from harness.run import retention
from harness.run import session as app

SUITE = ("name: gate\nchecks:\n  - {id: ok, kind: command, params: {argv: [/bin/true]},\n"
         "    expect: [{metric: command.duration, max: 3600, unit: s}]}\n")


def quiet_run(tmp_path: Path, keep: int, out: Path, quiet: bool = True) -> Path:
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    done = app.execute(suite=str(suite), profile="generic", output=out, argv=("harness",),
                       inventory_probe=lambda: {"host": {"hostname": "node"}}, history="off",
                       quiet=quiet, keep=keep)
    assert done.code == 0 and done.run_dir is not None
    return done.run_dir


def aged(run_dir: Path, started: str) -> Path:
    """Make a run directory look older (its recorded start)."""
    doc: dict[str, Any] = json.loads((run_dir / "results.json").read_text())
    doc["started"] = started
    (run_dir / "results.json").write_text(json.dumps(doc))
    return run_dir


def test_quiet_runs_beyond_keep_are_deleted_and_nothing_else(tmp_path: Path):
    out = tmp_path / "prolog"
    old = [aged(quiet_run(tmp_path, 5, out), f"2020-01-0{i}T00:00:00Z") for i in (1, 2, 3)]
    loud = aged(quiet_run(tmp_path, 5, out, quiet=False), "2019-01-01T00:00:00Z")  # not a quiet run
    # an old quiet run outside OUTPUT, reached through a symlink planted inside it
    outside = tmp_path / "elsewhere"
    shutil.copytree(old[0], outside / old[0].name)
    (out / "link").symlink_to(outside / old[0].name)
    # a foreign directory with a marker and a results.json that is not ours
    foreign = out / "foreign"
    foreign.mkdir()
    (foreign / retention.MARK).touch()
    (foreign / "results.json").write_text('{"format_version": 99, "run_id": "foreign", "started": "1999"}')
    # a marked directory whose results.json is a symlink to a real one
    sneaky = out / old[1].name.replace("node", "sneak")
    sneaky.mkdir()
    (sneaky / retention.MARK).touch()
    (sneaky / "results.json").symlink_to(old[1] / "results.json")
    (out / "notes.txt").write_text("mine")

    newest = quiet_run(tmp_path, 2, out)  # keeps itself and the newest older one

    survivors = {p.name for p in out.iterdir()}
    assert newest.name in survivors and old[2].name in survivors
    assert old[0].name not in survivors and old[1].name not in survivors
    assert {loud.name, "link", "foreign", sneaky.name, "notes.txt"} <= survivors
    assert (outside / old[0].name / "results.json").is_file()  # the symlink's target is untouched
    assert (out / "link").is_symlink() and (foreign / "results.json").is_file()
    assert (old[2] / "report.html").is_file() and (newest / retention.MARK).is_file()
    assert not (loud / retention.MARK).exists()


def test_a_directory_whose_run_id_or_json_is_wrong_is_never_a_quiet_run(tmp_path: Path):
    out = tmp_path / "o"
    run = quiet_run(tmp_path, 5, out)
    assert retention.started_of(run) is not None
    renamed = run.rename(out / "renamed")  # results.json names another directory
    assert retention.started_of(renamed) is None
    (renamed / "results.json").write_text("not json")
    assert retention.started_of(renamed) is None
    assert retention.started_of(out / "missing") is None
    assert retention.prunable(tmp_path / "no-such-output", 1, out / "x") == []


def test_prune_reports_what_it_cannot_delete(tmp_path: Path, monkeypatch: Any):
    out = tmp_path / "o"
    first = aged(quiet_run(tmp_path, 5, out), "2020-01-01T00:00:00Z")

    def refuse(path: Any, *a: Any, **kw: Any) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(shutil, "rmtree", refuse)
    current = quiet_run(tmp_path, 5, out)
    warnings = retention.prune(out, 1, current)
    assert len(warnings) == 1 and warnings[0].startswith(f"{first}: cannot delete an old quiet run")
    assert first.is_dir()
