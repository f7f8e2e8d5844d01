"""The compiled-template cache: used when private and ours, refused otherwise, never fatal."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from clihelp import harness, run_dirs, write

from harness.report import tplcache


def test_cache_dir_is_created_private(tmp_path: Path):
    d = tplcache.private_dir(tmp_path)
    assert d == tmp_path / tplcache.DIRNAME
    assert stat.S_IMODE(d.stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_cache_dir_others_can_write_is_refused(tmp_path: Path, mode: int):
    d = tmp_path / tplcache.DIRNAME
    d.mkdir()
    d.chmod(mode)
    assert tplcache.private_dir(tmp_path) is None
    assert tplcache.bytecode_cache(tmp_path) is None


def test_cache_dir_symlink_or_file_or_foreign_owner_is_refused(tmp_path: Path):
    (tmp_path / "a").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "a" / tplcache.DIRNAME).symlink_to(elsewhere)
    assert tplcache.private_dir(tmp_path / "a") is None
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / tplcache.DIRNAME).write_text("x")
    assert tplcache.private_dir(tmp_path / "b") is None
    if os.geteuid() == 0:  # root can give the directory away
        (tmp_path / "c").mkdir()
        d = tmp_path / "c" / tplcache.DIRNAME
        d.mkdir(mode=0o700)
        os.chown(d, 65534, 65534)
        assert tplcache.private_dir(tmp_path / "c") is None


def test_unwritable_parent_means_no_cache(tmp_path: Path):
    assert tplcache.bytecode_cache(tmp_path / "missing" / "deeper") is None
    assert tplcache.bytecode_cache(None) is None


def test_runs_fill_the_cache_and_a_corrupt_cache_is_ignored(tmp_path: Path):
    suite = write(tmp_path / "s.yaml",
                  "name: s\nchecks:\n  - {id: t, kind: command, params: {argv: [/bin/true]},\n"
                  "     expect: [{metric: command.duration, max: 3600, unit: s}]}\n")
    out = tmp_path / "reports"
    first = harness("run", str(suite), "--profile", "generic", "--output", str(out))
    assert first.returncode == 0, first.stderr
    cached = sorted((out / tplcache.DIRNAME).iterdir())
    assert cached, "the first run compiles the templates into the cache"
    for f in cached:  # garbage where compiled code should be: recompiled, not a crash
        f.write_bytes(b"\x00garbage")
    second = harness("run", str(suite), "--profile", "generic", "--output", str(out))
    assert second.returncode == 0, second.stderr
    reports = [(d / "report.html").read_text() for d in run_dirs(out)]
    assert len(reports) == 2 and all("ACCEPTED" in r for r in reports)
