"""Retention of `--quiet` runs: keep the newest N in an output directory, delete the older ones.

A prolog or health check runs on every job start, each leaving a run directory behind. A quiet
run marks its directory (MARK); pruning deletes only directories that are, all at once: real
directories (not symlinks) directly in the output directory, owned by this user, marked quiet,
and holding a regular results.json of this harness's format whose run_id is the directory's
name. Anything else there (other runs, history.sqlite, foreign files) is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from harness.errors import StorageError
from harness.fsutil import why_not
from harness.model import FORMAT_VERSION

MARK = ".quiet-run"  # an empty file: this run directory was made by `harness run --quiet`
MAX_RESULTS_BYTES = 256 * 1024 * 1024


def mark(run_dir: Path) -> None:
    """Mark a run directory as a quiet run's (so later quiet runs may prune it)."""
    try:
        (run_dir / MARK).touch(exist_ok=False)
    except OSError as e:
        raise StorageError(f"{run_dir / MARK}: cannot write: {why_not(e)}") from e


def _regular(path: Path) -> os.stat_result | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def started_of(run_dir: Path) -> str | None:
    """The start time of a quiet run directory this harness made; None for anything else."""
    try:
        st = run_dir.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or _regular(run_dir / MARK) is None:
        return None
    res = _regular(run_dir / "results.json")
    if res is None or res.st_size > MAX_RESULTS_BYTES:
        return None
    try:
        fd = os.open(run_dir / "results.json", os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format_version") != FORMAT_VERSION \
            or doc.get("run_id") != run_dir.name or not isinstance(doc.get("started"), str):
        return None
    return str(doc["started"])


def prunable(output: Path, keep: int, current: Path) -> list[Path]:
    """The quiet run directories beyond the newest `keep` (`current`, this run, counts and stays)."""
    try:
        entries = list(os.scandir(output))
    except OSError:
        return []
    runs = []
    for entry in entries:
        path = Path(entry.path)
        if path == current:
            continue
        started = started_of(path)
        if started is not None:
            runs.append((started, path.name, path))
    runs.sort(reverse=True)  # newest first
    return [p for _, _, p in runs[max(0, keep - 1):]]


def prune(output: Path, keep: int, current: Path) -> list[str]:
    """Delete the quiet runs beyond the newest `keep`; returns a warning per one that could not be."""
    warnings = []
    for path in prunable(output, keep, current):
        try:
            shutil.rmtree(path)  # does not follow symlinks inside, and refuses a symlink itself
        except OSError as e:
            warnings.append(f"{path}: cannot delete an old quiet run: {why_not(e)}")
    return warnings
