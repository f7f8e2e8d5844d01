"""Dispatch a suite to every node on Slurm and follow the jobs.

One batch job per node, not a job array: each node must be tested exactly once and by name
(`--nodelist=<node> --exclusive`), and an array's tasks cannot each be pinned to a different
node; a job per node also gives each node its own pending reason (a drained or down node
shows up as "ReqNodeNotAvail" on its own job) and its own exit state. The job runs
`harness run SUITE --output DIR/nodes/<node>` with this Python, isolated (`-I`: no PYTHON*
variables, no user site, neither the current nor the script's directory on sys.path) from `/`,
the caller's harness put first on sys.path: the fleet runs exactly the code that dispatched it,
and nothing in the fleet directory (or whatever directory the job starts in) is imported.

DIR must be new, or a directory of root's or this user's that no one else can write and that
holds no `nodes/` yet: every node's directory and job script is made fresh (O_EXCL|O_NOFOLLOW),
never one that stood before.

Job state comes from squeue (all states, while the controller keeps the job) and, once a job
ended, `scontrol show job` for its exit status; both are saved in DIR/fleet-jobs.json because
Slurm forgets finished jobs after MinJobAge. sacct is not used: with accounting_storage/none
(as in the test lab) it has nothing to say.
"""

from __future__ import annotations

import re
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import harness
from harness.errors import HarnessError, StorageError, UsageError
from harness.fleet import layout
from harness.fleet.layout import Manifest, NodeJob, SeenJob
from harness.fleet.slurmtext import (
    GONE,
    SINFO_FORMAT,
    SQUEUE_FORMAT,
    JobInfo,
    NodeInfo,
    parse_sbatch,
    parse_scontrol_jobs,
    parse_sinfo_nodes,
    parse_squeue,
)
from harness.fsutil import create_new, untrusted, why_not
from harness.platform import slurm


def utcnow() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _age_s(iso: str, now: float) -> float:
    try:
        t = datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
    return now - t


# A node name becomes a directory (DIR/nodes/<node>) and a job name: a host name, nothing else.
_NODE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def check_node_name(node: str) -> str:
    """`node` when it is a host name (letters, digits, '-', '_', '.'; no leading '.'/'-', no '..',
    at most 253 characters); UsageError naming it otherwise, before any file is written."""
    if len(node) > 253 or not _NODE_NAME.fullmatch(node) or ".." in node:
        raise UsageError(f"--nodes: {node!r} is not a node name (a host name: letters, digits, "
                         "'-', '_' and '.', not starting with '.' or '-', no '/' or '..', "
                         "at most 253 characters)")
    return node


def expand_nodes(spec: str) -> list[str]:
    """A Slurm hostlist ('gpu[001-128],login1') as node names, through ClusterShell's NodeSet.

    Every name must be a host name (check_node_name): a name is a directory under the fleet's."""
    # start-up: ClusterShell loads only for node sets
    from ClusterShell.NodeSet import NodeSet, NodeSetParseError

    try:
        nodes = list(NodeSet(spec))
    except NodeSetParseError as e:
        raise UsageError(f"--nodes {spec!r}: {e}") from e
    if not nodes:
        raise UsageError("--nodes names no node")
    return [check_node_name(n) for n in nodes]


def fold_nodes(nodes: Sequence[str]) -> str:
    """Node names folded back into a hostlist ('n[1-3,5]')."""
    from ClusterShell.NodeSet import NodeSet  # start-up: ClusterShell loads only for node sets

    return str(NodeSet.fromlist(list(nodes))) if nodes else ""


@dataclass(frozen=True)
class JobOptions:
    """What every node's job gets besides its node name."""

    suite_path: str  # absolute
    profile: str | None = None  # name or absolute path, passed to `harness run --profile`
    partition: str | None = None
    account: str | None = None
    time_limit: str | None = None  # Slurm's --time syntax, passed as given
    python: str = sys.executable
    history: str | None = None  # `harness run --history`: one store on a shared file system, or 'off'


def job_script(node: str, node_dir: Path, opts: JobOptions) -> str:
    """The batch script for one node. Every value is shell-quoted; nothing is interpolated later."""
    q = shlex.quote
    root = str(Path(harness.__file__).resolve().parent.parent)
    boot = f"import sys; sys.path.insert(0, {root!r}); from harness.cli.start import main; main()"
    argv = [opts.python, "-I", "-c", boot, "run", opts.suite_path, "--output", str(node_dir)]
    exit_tmp = q(f"{node_dir / layout.EXIT_FILE}.tmp")
    if opts.profile:
        argv += ["--profile", opts.profile]
    if opts.history:
        argv += ["--history", opts.history]
    return "\n".join([
        "#!/bin/bash",
        f"# harness fleet job for node {node}: written by `harness fleet run`, every value quoted",
        "set -u",
        f"node={q(node)}",
        'if [ "${SLURMD_NODENAME:-}" != "$node" ]; then',
        '  echo "harness: this job is for $node but runs on ${SLURMD_NODENAME:-an unknown node}" >&2',
        "fi",
        "# several slurmd on one host (a lab): HARNESS_LOCK_FILE=/x/harness-{node}.lock gives each its lock",
        'if [ -n "${HARNESS_LOCK_FILE:-}" ]; then',
        r'  export HARNESS_LOCK_FILE="${HARNESS_LOCK_FILE//\{node\}/$node}"',
        "fi",
        "cd / || exit 97  # not the fleet directory: nothing there is read as code or configuration",
        "# The harness runs as this shell's child and the shell waits for it. Slurm tracks a job by its",
        "# process tree (proctrack/linuxproc): a shell that died of scancel's SIGTERM left the harness",
        "# to init, the job ended and the node took the next job while the harness, still stopping,",
        "# held the run lock. A signal is passed on and waited out: the job ends when the harness has.",
        "pid='' sig=''",
        """trap 'sig=TERM; [ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null' TERM""",
        """trap 'sig=INT; [ -z "$pid" ] || kill -INT "$pid" 2>/dev/null' INT""",
        """trap 'sig=TERM; [ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null' HUP  # TERM: a clean stop""",
        "# (an asynchronous command starts with SIGINT and SIGQUIT ignored: given back their defaults)",
        "( trap - INT QUIT; exec " + " ".join(q(a) for a in argv) + " ) &",
        "pid=$!",
        '[ -z "$sig" ] || kill -"$sig" "$pid" 2>/dev/null',
        'wait "$pid"; rc=$?',
        """while [ -n "$sig" ]; do sig=''; wait "$pid"; rc=$?; done  # until the harness itself has exited""",
        "set -C  # the exit file's temporary is made new (O_EXCL), never written through what stands",
        "printf '{\"node\": \"%s\", \"job_id\": \"%s\", \"rc\": %d, \"finished\": \"%s\"}\\n' "
        '"${SLURMD_NODENAME:-}" "${SLURM_JOB_ID:-}" "$rc" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" '
        f"> {exit_tmp} && mv -f {exit_tmp} {q(str(node_dir / layout.EXIT_FILE))}",
        'exit "$rc"',
        "",
    ])


def sbatch_argv(node: str, node_dir: Path, script: Path, opts: JobOptions) -> list[str]:
    """`sbatch` for one node: exclusive, pinned to it by name, never requeued behind our back."""
    argv = ["sbatch", "--parsable", f"--job-name=harness-{node}", f"--nodelist={node}", "--nodes=1",
            "--ntasks=1", "--exclusive", "--no-requeue", f"--chdir={node_dir}",
            f"--output={node_dir / 'slurm-%j.out'}"]
    argv += [f"--partition={opts.partition}"] if opts.partition else []
    argv += [f"--account={opts.account}"] if opts.account else []
    argv += [f"--time={opts.time_limit}"] if opts.time_limit else []
    return [*argv, str(script)]


def fresh_nodes(fleet_dir: Path) -> None:
    """Make DIR (if missing) and DIR/nodes, new; UsageError when DIR is not trusted (another user
    owns or may write it or a directory above it) or DIR/nodes already stands (it could hold a
    planted node directory, a job script or a Python module)."""
    try:
        fleet_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as e:
        raise StorageError(f"{fleet_dir}: cannot make the fleet directory: {why_not(e)}") from e
    why = untrusted(fleet_dir)
    if why:
        raise UsageError(f"--output {fleet_dir}: not trusted: {why}; a fleet directory must be new, or "
                         "one that no one but root and you can write")
    try:
        (fleet_dir / layout.NODES).mkdir(mode=0o755)
    except FileExistsError:
        raise UsageError(f"--output {fleet_dir} already has {layout.NODES}/ (an earlier fleet run's, or "
                         "planted): choose a new --output") from None
    except OSError as e:
        raise StorageError(f"{fleet_dir / layout.NODES}: cannot make it: {why_not(e)}") from e


def submit(fleet_dir: Path, suite_name: str, nodes: Sequence[str], opts: JobOptions,
           extra: Mapping[str, object] | None = None) -> Manifest:
    """Write each node's script and submit it; a refused node is recorded, the others go on."""
    if (fleet_dir / layout.MANIFEST).exists():
        raise UsageError(f"{fleet_dir} already holds a fleet run; choose another --output")
    for node in nodes:  # all of them before the first file is written
        check_node_name(node)
    fresh_nodes(fleet_dir)
    jobs: dict[str, NodeJob] = {}
    for node in nodes:
        ndir = layout.node_dir(fleet_dir, node)
        try:
            ndir.mkdir(mode=0o755)
        except OSError as e:
            raise StorageError(f"{ndir}: cannot make the node's directory: {why_not(e)}") from e
        script = ndir / layout.SCRIPT
        create_new(script, job_script(node, ndir, opts).encode("utf-8"), 0o755)
        try:
            _, out, _ = slurm.call(sbatch_argv(node, ndir, script, opts))
            jobs[node] = NodeJob(node, parse_sbatch(out))
        except (slurm.SlurmError, ValueError) as e:
            jobs[node] = NodeJob(node, None, f"sbatch refused: {e}")
    manifest = Manifest(opts.suite_path, suite_name, opts.profile, tuple(nodes), utcnow(), jobs,
                        {"partition": opts.partition, "account": opts.account,
                         "time": opts.time_limit, "python": opts.python, "history": opts.history,
                         **(extra or {})})
    layout.save_manifest(fleet_dir, manifest)
    return manifest


def query_jobs(job_ids: Sequence[str]) -> dict[str, JobInfo]:
    """The scheduler's view of these jobs, by id (jobs it no longer knows are absent)."""
    if not job_ids:
        return {}
    rc, out, err = slurm.call(["squeue", "-h", "-t", "all", "-j", ",".join(job_ids),
                               "-o", SQUEUE_FORMAT], check=False)
    if rc != 0:
        if "Invalid job id" in err:
            return {}
        raise slurm.SlurmError(f"squeue: {err.strip() or f'exit {rc}'}", rc=rc)
    return {j.job_id: j for j in parse_squeue(out)}


def job_details(job_id: str) -> JobInfo | None:
    """`scontrol show job` for one job (exit status included), None once Slurm forgot it."""
    rc, out, _ = slurm.call(["scontrol", "-o", "show", "job", job_id], check=False)
    jobs = parse_scontrol_jobs(out) if rc == 0 else []
    return jobs[0] if jobs else None


def node_states(nodes: Sequence[str]) -> dict[str, NodeInfo]:
    """sinfo's state and reason for these nodes."""
    _, out, _ = slurm.call(["sinfo", "-h", "-N", "-n", fold_nodes(nodes), "-o", SINFO_FORMAT])
    return parse_sinfo_nodes(out)


def refresh(fleet_dir: Path, manifest: Manifest) -> dict[str, SeenJob]:
    """Poll Slurm once, merge with the saved states, save and return them by node.

    A job that squeue and scontrol no longer know, and that had not been seen ending, is
    recorded as GONE: its exit file and results are then all there is. When every job was seen
    ending, Slurm is not asked and nothing is written (a report of a finished fleet).
    """
    saved = layout.load_jobs(fleet_dir)
    ids = {j.job_id: n for n, j in manifest.jobs.items() if j.job_id}
    open_ids = [i for i, n in ids.items() if n not in saved or not saved[n].job.finished]
    if not open_ids:
        return saved
    live = query_jobs(open_ids)
    now = utcnow()
    for job_id in open_ids:
        node = ids[job_id]
        prev = saved.get(node)
        info = live.get(job_id)
        if info is None or info.finished:
            info = job_details(job_id) or info or JobInfo(job_id, GONE, "no longer known to Slurm")
        saved[node] = SeenJob(info, now, prev.note if prev else "")
    layout.save_jobs(fleet_dir, saved)
    return saved


def cancel_unstarted(fleet_dir: Path, manifest: Manifest, seen: dict[str, SeenJob],
                     start_timeout_s: float, now: float | None = None) -> list[str]:
    """Cancel jobs still waiting to start after start_timeout_s; note the scheduler's reason."""
    now = time.time() if now is None else now
    late = [n for n, s in seen.items() if not s.job.started
            and _age_s(manifest.submitted, now) > start_timeout_s]
    if not late:
        return []
    try:
        nodes = node_states(late)
    except slurm.SlurmError:
        nodes = {}
    for n in late:
        info = nodes.get(n)
        why = f"; node {n} is {info.state}" + (f": {info.reason}" if info.reason else "") if info else ""
        note = (f"never started: still {seen[n].job.describe()} after {start_timeout_s:g} s{why}; "
                "cancelled by harness")
        slurm.call(["scancel", seen[n].job.job_id], check=False)
        seen[n] = replace(seen[n], note=note)
    layout.save_jobs(fleet_dir, seen)
    return late


@dataclass(frozen=True)
class Cancelled:
    """What an interrupted `fleet run` did to its jobs: node -> job id cancelled, node -> why left."""

    cancelled: Mapping[str, str]
    left: Mapping[str, str]


def cancel_open(fleet_dir: Path, manifest: Manifest, why: str, timeout_s: float = 20.0) -> Cancelled:
    """Ask Slurm to cancel every submitted job not seen ending (one bounded scancel by job id), note
    it on each job and mark the fleet interrupted. A job that ended, or that scancel refused, is
    left with the reason. Never raises for Slurm: a controller that does not answer is said."""
    saved = layout.load_jobs(fleet_dir)
    try:
        saved = refresh(fleet_dir, manifest)
    except HarnessError:  # a controller that does not answer: cancel what was last seen open
        pass
    open_jobs = {n: j.job_id for n, j in manifest.jobs.items()
                 if j.job_id and not (n in saved and saved[n].job.finished)}
    left = {n: f"job {j.job_id} had ended ({saved[n].job.describe()})" for n, j in manifest.jobs.items()
            if j.job_id and n not in open_jobs}
    cancelled: dict[str, str] = {}
    if open_jobs:
        try:
            rc, _, err = slurm.call(["scancel", *open_jobs.values()], timeout=timeout_s, check=False)
        except HarnessError as e:  # scancel missing or hung (bounded by timeout_s)
            rc, err = -1, str(e)
        if rc == 0:
            cancelled = dict(open_jobs)
        else:
            left.update({n: f"job {jid}: scancel failed: {err.strip()[-200:] or f'exit {rc}'}; cancel it "
                            f"with: scancel {jid}" for n, jid in open_jobs.items()})
    now = utcnow()
    for n, jid in cancelled.items():
        prev = saved.get(n)
        job = prev.job if prev else JobInfo(jid, "RUNNING")
        saved[n] = SeenJob(job, now, f"{why}: cancelled by harness")
    layout.save_jobs(fleet_dir, saved)
    layout.save_manifest(fleet_dir, replace(manifest, options={**manifest.options, "interrupted": now,
                                                               "interrupted_by": why}))
    return Cancelled(cancelled, left)


def await_ended(fleet_dir: Path, manifest: Manifest, nodes: Sequence[str], timeout_s: float = 20.0,
                poll_s: float = 0.5) -> bool:
    """Poll (bounded) until the jobs of `nodes` have ended, as cancelled jobs do after COMPLETING;
    whether they all did. A failing poll ends the wait (the states saved last are reported)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            seen = refresh(fleet_dir, manifest)
        except HarnessError:
            return False
        if all(n in seen and seen[n].job.finished for n in nodes):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def wait(fleet_dir: Path, manifest: Manifest, *, poll_s: float, start_timeout_s: float,
         on_poll: Callable[[Mapping[str, SeenJob]], None] = lambda _s: None,
         on_error: Callable[[str], None] = lambda _m: None, max_errors: int = 10) -> dict[str, SeenJob]:
    """Poll until every submitted job has ended (or was cancelled for never starting).

    A failing squeue/scontrol (a controller restarting) is reported and retried; after
    `max_errors` failures in a row the last error is raised.
    """
    errors = 0
    while True:
        try:
            seen = refresh(fleet_dir, manifest)
            cancelled = cancel_unstarted(fleet_dir, manifest, seen, start_timeout_s)
        except slurm.SlurmError as e:
            errors += 1
            if errors >= max_errors:
                raise
            on_error(f"{e} (retry {errors}/{max_errors - 1})")
            time.sleep(poll_s)
            continue
        errors = 0
        on_poll(seen)
        if cancelled:
            continue  # poll again at once to pick up the CANCELLED states
        if all(n in seen and seen[n].job.finished for n, j in manifest.jobs.items() if j.job_id):
            return seen
        time.sleep(poll_s)
