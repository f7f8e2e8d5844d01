"""A report of a fleet whose jobs all ended asks Slurm nothing and rewrites no job state; one with a
job still open asks about that job only and saves what it heard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fleetdirs import make_fleet

from harness.fleet import dispatch, layout
from harness.fleet.layout import SeenJob
from harness.fleet.slurmtext import JobInfo


def test_a_finished_fleet_is_not_polled_and_its_job_states_are_left_as_they_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    make_fleet(tmp_path, {})
    jobs = tmp_path / layout.JOBS
    before = jobs.stat()
    asked: list[Any] = []
    monkeypatch.setattr(dispatch.slurm, "call", lambda argv, **_k: asked.append(argv) or (0, "", ""))
    seen = dispatch.refresh(tmp_path, layout.load_manifest(tmp_path))
    assert asked == [] and seen == layout.load_jobs(tmp_path) and len(seen) == 4
    after = jobs.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_an_open_job_is_asked_about_and_its_state_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    make_fleet(tmp_path, {})
    saved = layout.load_jobs(tmp_path)
    saved["n2"] = SeenJob(JobInfo("3", "RUNNING", "", "n2", "h", 0, 0), "2026-11-29T10:00:30Z")
    layout.save_jobs(tmp_path, saved)
    asked: list[Any] = []
    monkeypatch.setattr(dispatch, "query_jobs", lambda ids: asked.append(("squeue", *ids)) or {})
    monkeypatch.setattr(dispatch, "job_details",
                        lambda job_id: JobInfo(job_id, "COMPLETED", "", "n2", "h", 0, 0))
    seen = dispatch.refresh(tmp_path, layout.load_manifest(tmp_path))
    assert asked == [("squeue", "3")]
    assert seen["n2"].job.state == "COMPLETED" and layout.load_jobs(tmp_path)["n2"].job.state == "COMPLETED"
