"""`harness run --resume RUN_DIR`: finish a killed or interrupted run where it stopped.

A run records, at its start, a digest of the suite and of the effective (merged) profile and
the ids of the checks it selected. Resuming reloads both from their paths and refuses (exit 2)
when either digest differs: comments and formatting may change, content may not. Checks with
a result in RUN_DIR/checks/<id>.json (any status but not_run) are kept; the rest run again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from harness import results
from harness.checks.base import CheckKind
from harness.checks.registry import kinds
from harness.config import LoadedProfile, LoadedSuite, load_profile, load_suite
from harness.errors import UsageError
from harness.model import CheckResult, RunRecord, Status


def digest(model: BaseModel) -> str:
    """sha256 of a validated suite or profile's content (canonical JSON)."""
    text = json.dumps(model.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Resumption:
    """What a resumed run needs from the run directory it finishes."""

    run_dir: Path
    record: RunRecord  # as the earlier attempt left it
    suite: LoadedSuite[CheckKind]
    profile: LoadedProfile
    selected: tuple[str, ...]
    finished: Mapping[str, CheckResult]  # kept, not run again


def _recorded(info: Mapping[str, Any], what: str, run_dir: Path) -> tuple[str, str]:
    """The file to reload (absolute when recorded, so any working directory will do) and its digest."""
    path, want = info.get("file") or info.get("path"), info.get("digest")
    if not isinstance(path, str) or not isinstance(want, str):
        raise UsageError(f"{run_dir}: the run recorded no {what} digest (an older harness started "
                         "it); it cannot be resumed: start a new run")
    return path, want


def prepare(run_dir: Path) -> Resumption:
    """Load the run directory and its suite and profile; UsageError when it cannot be resumed."""
    record = results.load(run_dir)
    if record.finished and not record.interrupted:
        raise UsageError(f"{run_dir}: the run finished at {record.finished} ({record.verdict}); "
                         "nothing to resume")
    suite_path, suite_digest = _recorded(record.suite, "suite", run_dir)
    profile_path, profile_digest = _recorded(record.profile, "profile", run_dir)
    suite = load_suite(Path(suite_path), kinds())
    profile = load_profile(Path(profile_path))
    for what, path, want, got in (("suite", suite_path, suite_digest, digest(suite.suite)),
                                  ("profile", profile_path, profile_digest, digest(profile.profile))):
        if got != want:
            raise UsageError(f"{run_dir}: the {what} {path} changed since the run started "
                             f"(recorded {want[:19]}, now {got[:19]}); results would not be "
                             "comparable, so it cannot be resumed: start a new run")
    selected = tuple(str(i) for i in record.suite.get("selected") or [c.id for c in record.checks])
    known = {c.spec.id for c in suite.checks}
    if not selected or any(i not in known for i in selected):
        raise UsageError(f"{run_dir}: the recorded checks do not match {suite_path}; cannot resume")
    finished = {}
    for cid in selected:
        kept = _finished(run_dir, cid)
        if kept is not None:
            finished[cid] = kept
    return Resumption(run_dir, record, suite, profile, selected, finished)


def _finished(run_dir: Path, cid: str) -> CheckResult | None:
    """The check's persisted result when it finished; None when it must run (again). A file that is
    there but not a valid check result is a RecordError (exit 2)."""
    path = run_dir / "checks" / f"{cid}.json"
    if not path.exists():
        return None
    result = results.load_check(path)  # a tampered file is an error naming it, not a rerun
    if result.id != cid or result.status == Status.NOT_RUN:
        return None
    return result


def clear_partial(run_dir: Path, cids: list[str]) -> None:
    """Remove what unfinished checks left (raw output, scratch) before they run again."""
    for cid in cids:
        for sub in ("raw", "scratch"):
            shutil.rmtree(run_dir / sub / cid, ignore_errors=True)
        (run_dir / "checks" / f"{cid}.json").unlink(missing_ok=True)
