"""The fleet directory: what dispatch wrote, the last scheduler state seen, and each node's runs.

    DIR/fleet-run.json          manifest: suite, profile, options, node -> job id (written once)
    DIR/fleet-jobs.json         last state seen per job (kept because Slurm forgets finished jobs
                                after MinJobAge, and sacct may be unavailable)
    DIR/nodes/<node>/job.sh     the batch script; slurm-<jobid>.out its output
    DIR/nodes/<node>/job-exit.json  written by the job itself: the harness exit status
    DIR/nodes/<node>/<host>-<UTC time>/  the node's `harness run` directory (results.json ...)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, ConfigProblem
from harness.fleet.slurmtext import JobInfo
from harness.fsutil import atomic_write_json, read_regular

FORMAT_VERSION = 1
MANIFEST = "fleet-run.json"
JOBS = "fleet-jobs.json"
NODES = "nodes"
SCRIPT = "job.sh"
EXIT_FILE = "job-exit.json"


@dataclass(frozen=True)
class NodeJob:
    """One node's submission: its job id, or why sbatch refused it."""

    node: str
    job_id: str | None
    submit_error: str = ""


@dataclass(frozen=True)
class Manifest:
    """What `harness fleet run` dispatched."""

    suite_path: str
    suite_name: str
    profile: str | None
    nodes: tuple[str, ...]
    submitted: str  # ISO 8601 UTC
    jobs: Mapping[str, NodeJob]
    options: Mapping[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": self.format_version, "suite_path": self.suite_path,
                "suite_name": self.suite_name, "profile": self.profile, "nodes": list(self.nodes),
                "submitted": self.submitted, "options": dict(self.options),
                "jobs": {n: asdict(j) for n, j in self.jobs.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Manifest:
        return cls(d["suite_path"], d["suite_name"], d.get("profile"), tuple(d["nodes"]),
                   d["submitted"], {n: NodeJob(**j) for n, j in d["jobs"].items()},
                   dict(d.get("options", {})), int(d["format_version"]))


@dataclass(frozen=True)
class SeenJob:
    """The last scheduler state seen for a job, with a note when the harness acted on it."""

    job: JobInfo
    seen: str  # ISO 8601 UTC
    note: str = ""  # e.g. "cancelled by harness: not started within 10 min"


def node_dir(fleet_dir: Path, node: str) -> Path:
    return fleet_dir / NODES / node


def save_manifest(fleet_dir: Path, manifest: Manifest) -> None:
    atomic_write_json(fleet_dir / MANIFEST, manifest.to_dict())


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError([ConfigProblem(str(path), 1, 1, f"unreadable: {e}")]) from e


def load_manifest(fleet_dir: Path) -> Manifest:
    """The manifest of a fleet directory (ConfigError when DIR is not one)."""
    data = _read_json(fleet_dir / MANIFEST)
    if data is None:
        raise ConfigError([ConfigProblem(str(fleet_dir / MANIFEST), 1, 1,
                                         "no fleet-run.json: not a fleet directory")])
    try:
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"format_version {data.get('format_version')!r} is not {FORMAT_VERSION}")
        return Manifest.from_dict(data)
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise ConfigError([ConfigProblem(str(fleet_dir / MANIFEST), 1, 1, f"invalid: {e}")]) from e


def save_jobs(fleet_dir: Path, jobs: Mapping[str, SeenJob]) -> None:
    atomic_write_json(fleet_dir / JOBS, {n: {"job": asdict(s.job), "seen": s.seen, "note": s.note}
                                         for n, s in sorted(jobs.items())})


def load_jobs(fleet_dir: Path) -> dict[str, SeenJob]:
    """The saved job states by node (empty before the first poll)."""
    data = _read_json(fleet_dir / JOBS) or {}
    try:
        return {n: SeenJob(JobInfo(**d["job"]), d["seen"], d.get("note", "")) for n, d in data.items()}
    except (AttributeError, KeyError, TypeError) as e:
        raise ConfigError([ConfigProblem(str(fleet_dir / JOBS), 1, 1, f"invalid: {e}")]) from e


EXIT_FILE_MAX = 64 * 1024  # bytes of job-exit.json read at most (the job writes one short line)


def read_exit_file(fleet_dir: Path, node: str) -> dict[str, Any] | None:
    """What the job wrote when `harness run` ended (None when it never got there, or when what
    stands there is not a regular file: a node's file is never read through a symlink)."""
    try:
        raw = read_regular(node_dir(fleet_dir, node) / EXIT_FILE, EXIT_FILE_MAX)
        data = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def run_dirs(fleet_dir: Path, node: str) -> list[Path]:
    """The node's run directories (those holding results.json), oldest first."""
    base = node_dir(fleet_dir, node)
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if (p / "results.json").is_file())


def slurm_output(fleet_dir: Path, node: str, job_id: str | None) -> Path | None:
    """The job's stdout/stderr file, when it exists."""
    if not job_id:
        return None
    path = node_dir(fleet_dir, node) / f"slurm-{job_id}.out"
    return path if path.exists() or path.is_symlink() else None
