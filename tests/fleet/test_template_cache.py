"""Issue #30: the fleet report's compiled templates are kept between reports (compiling them took
~0.25 s of a 10-node report), in the invoking user's private cache, never in the fleet directory
(nodes write there: compiled code from it would run as the reporting user); a cache directory
others can write to is not used, and the report is the same with or without it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from clihelp import harness
from fleetdirs import make_fleet


def _report(fleet: Path, cache: Path) -> str:
    r = harness("fleet", "report", str(fleet), env={"XDG_CACHE_HOME": str(cache)})
    assert r.returncode == 0, r.stdout + r.stderr
    html = (fleet / "fleet.html").read_text()
    return re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d", "WHEN", html)


def test_compiled_templates_live_in_the_user_s_private_cache(tmp_path: Path):
    fleet, cache = tmp_path / "fleet", tmp_path / "cache"
    make_fleet(fleet, {})
    first = _report(fleet, cache)
    kept = cache / "harness" / ".template-cache"
    assert kept.is_dir() and (kept.stat().st_mode & 0o777) == 0o700 and any(kept.iterdir())
    assert not (fleet / ".template-cache").exists()
    assert _report(fleet, cache) == first  # read back compiled


def test_a_cache_others_can_write_is_not_used(tmp_path: Path):
    fleet, cache = tmp_path / "fleet", tmp_path / "cache"
    make_fleet(fleet, {})
    open_dir = cache / "harness" / ".template-cache"
    open_dir.mkdir(parents=True)
    os.chmod(open_dir, 0o777)
    (open_dir / "planted").write_text("x")
    first = _report(fleet, cache)
    assert sorted(p.name for p in open_dir.iterdir()) == ["planted"]  # nothing written, nothing read
    assert _report(tmp_path / "fleet", tmp_path / "elsewhere") == first
