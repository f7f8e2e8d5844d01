"""The fleet directory: what dispatch wrote, the last scheduler state seen, and each node's runs.

    DIR/fleet-run.json          manifest: suite, profile, options, node -> job id (written once)
    DIR/fleet-jobs.json         last state seen per job (kept because Slurm forgets finished jobs
                                after MinJobAge, and sacct may be unavailable)
    DIR/nodes/<node>/job.sh     the batch script; slurm-<jobid>.out its output
    DIR/nodes/<node>/job-exit.json  written by the job itself: the harness exit status
    DIR/nodes/<node>/<host>-<UTC time>/  the node's `harness run` directory (results.json ...)

A results volume that Kubernetes Jobs wrote (`harness k8s render`) has no manifest and no nodes/:

    VOLUME/<node>/<node>-<UTC time>/    each node's runs; the nodes are the folders holding one
                                        (never a symlink: one where a node's folder would be is
                                        that node, refused by name)
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
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
RESULTS = "results.json"
VOLUME = "volume"  # Manifest.options["layout"] of a results volume
_NODE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}")


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


def _is_run(run_dir: Path) -> bool:
    """A run directory, neither reached through a symlink nor holding one as its results.json."""
    try:
        return stat.S_ISDIR(os.lstat(run_dir).st_mode) and _regular(run_dir / RESULTS)
    except OSError:
        return False


def _looks_like_node(p: Path) -> bool:
    return _NODE.fullmatch(p.name) is not None and ".." not in p.name


def refused_volume_nodes(volume: Path) -> dict[str, str]:
    """The symlinks in a results volume that stand where a node's folder would (named like a host,
    pointing at a directory), each with why it is refused: a node's folder is never followed, so
    someone's link cannot pass another directory's runs (root's, another node's) off as a node's."""
    try:
        links = sorted(p for p in volume.iterdir() if p.is_symlink() and _looks_like_node(p) and p.is_dir())
    except OSError:
        return {}
    return {p.name: (f"{p} is a symlink, not the node's own folder: a node's folder in a results "
                     "volume is never followed") for p in links}


def volume_nodes(volume: Path) -> list[str]:
    """The nodes of a results volume: its folders (not symlinks) named like a host that hold a run
    directory."""
    try:
        entries = sorted(p for p in volume.iterdir()
                         if not p.is_symlink() and p.is_dir() and _looks_like_node(p))
    except OSError:
        return []
    return [p.name for p in entries if any(_is_run(r) for r in p.iterdir())]


VOLUME_RESULTS_MAX = 64 * 2**20  # bytes of the newest run's results.json read for the suite's name


def volume_manifest(volume: Path) -> Manifest | None:
    """A results volume read as a fleet whose jobs nobody polls (None when it holds no node):
    the suite is the newest run's, `submitted` the oldest node's newest run's time. A symlink
    where a node's folder would be is a node with the reason it is refused (its submit_error)."""
    nodes = volume_nodes(volume)
    refused = refused_volume_nodes(volume)
    if not nodes and not refused:
        return None
    newest = {n: max(p for p in (volume / n).iterdir() if _is_run(p)) for n in nodes}
    suite: dict[str, Any] = {}
    when = datetime.now(timezone.utc)
    if nodes:
        latest = newest[max(newest, key=lambda n: (newest[n] / RESULTS).lstat().st_mtime)] / RESULTS
        try:
            doc = json.loads(read_regular(latest, VOLUME_RESULTS_MAX).decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            doc = {}
        suite = doc.get("suite", {}) if isinstance(doc, dict) and isinstance(doc.get("suite"), dict) else {}
        oldest = min((newest[n] / RESULTS).lstat().st_mtime for n in nodes)
        when = datetime.fromtimestamp(oldest, timezone.utc)
    jobs = {n: NodeJob(n, None) for n in nodes} | {n: NodeJob(n, None, why) for n, why in refused.items()}
    return Manifest(str(suite.get("path", "")), str(suite.get("name", "")), None, tuple(sorted(jobs)),
                    when.strftime("%Y-%m-%dT%H:%M:%SZ"), jobs, {"layout": VOLUME})


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
        volume = volume_manifest(fleet_dir)
        if volume is not None:
            return volume
        raise ConfigError([ConfigProblem(str(fleet_dir / MANIFEST), 1, 1,
                                         "no fleet-run.json: not a fleet directory (nor a results "
                                         "volume of <node>/<run>/ directories)")])
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


def is_volume(manifest: Manifest) -> bool:
    return manifest.options.get("layout") == VOLUME


def run_dirs(fleet_dir: Path, node: str, volume: bool = False) -> list[Path]:
    """The node's run directories (those holding results.json), oldest first; `volume`: in
    VOLUME/<node>/ of a results volume rather than DIR/nodes/<node>/. Neither the folder nor a
    run in it is followed through a symlink."""
    base = fleet_dir / node if volume else node_dir(fleet_dir, node)
    try:  # a node's folder, and each run in it, is never reached through a symlink
        if not stat.S_ISDIR(os.lstat(base).st_mode):
            return []
        with os.scandir(base) as entries:
            names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False)
                           and _regular(os.path.join(e.path, RESULTS)))
    except OSError:
        return []  # not there, or not readable: no run
    return [base / name for name in names]


def _regular(path: str | Path) -> bool:
    """A regular file, not reached through a symlink."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def slurm_output(fleet_dir: Path, node: str, job_id: str | None) -> Path | None:
    """The job's stdout/stderr file, when it exists."""
    if not job_id:
        return None
    path = node_dir(fleet_dir, node) / f"slurm-{job_id}.out"
    try:
        os.lstat(path)
    except OSError:
        return None
    return path
