"""Pure parsers of Slurm command output (sbatch --parsable, squeue, scontrol -o show job, sinfo).

The commands are asked for a fixed layout (the formats below) so the parsers stay small; every
free-text field (job name, node reason) is the last one, so a '|' inside it is harmless.
Accounting (sacct) is not used: a lab or a site may run with accounting_storage/none, where sacct
answers nothing. Final job states come from squeue/scontrol while the controller still holds the
job (MinJobAge), then from the state the dispatcher saved and the job's own exit file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# squeue -h -t all -o SQUEUE_FORMAT: job id, long state, reason, node list, job name
SQUEUE_FORMAT = "%i|%T|%r|%N|%j"
# sinfo -h -N -o SINFO_FORMAT: node, long state, reason (free text from whoever set it)
SINFO_FORMAT = "%N|%T|%E"

NOT_STARTED = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                         "RESV_DEL_HOLD"})
ACTIVE = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT",
                    "RESIZING"})
# GONE is the harness's own word (not Slurm's) for a job the controller no longer knows.
GONE = "GONE"
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                      "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT", GONE})

_SBATCH_ID = re.compile(r"^\s*(\d+(?:_\d+)?)(?:;\S+)?\s*$")
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


class SlurmParseError(ValueError):
    """Output that does not have the layout the parser asked for."""


@dataclass(frozen=True)
class JobInfo:
    """One job as the scheduler reports it."""

    job_id: str
    state: str  # long state name, e.g. PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT
    reason: str = ""  # the scheduler's reason, "" when it says None
    nodes: str = ""  # node list as Slurm prints it (folded)
    name: str = ""
    exit_code: int | None = None  # the batch script's exit status (scontrol ExitCode=rc:signal)
    exit_signal: int | None = None

    @property
    def started(self) -> bool:
        return self.state not in NOT_STARTED

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    def describe(self) -> str:
        """'FAILED (NonZeroExitCode, exit 3)' or 'PENDING (ReqNodeNotAvail, ...)'."""
        parts = [self.reason] if self.reason else []
        if self.finished and self.exit_code and self.state != "CANCELLED":
            parts.append(f"exit {self.exit_code}")
        if self.finished and self.exit_signal:
            parts.append(f"signal {self.exit_signal}")
        return self.state + (f" ({', '.join(parts)})" if parts else "")


@dataclass(frozen=True)
class NodeInfo:
    """One node's scheduler state and the reason someone set on it."""

    name: str
    state: str  # e.g. idle, allocated, drained, draining, down*, idle+drain
    reason: str = ""  # "" when sinfo says none

    @property
    def drained(self) -> bool:
        """Drained or draining (no new jobs start on it)."""
        return "drain" in self.state.lower()


def _reason(text: str) -> str:
    text = text.strip()
    return "" if text in ("None", "none", "(null)") else text


def _state(text: str) -> str:
    # "CANCELLED by 0" (newer squeue), "down*" style flags are kept for nodes but not for jobs
    return text.strip().split(" ")[0].upper()


def parse_sbatch(text: str) -> str:
    """The job id printed by `sbatch --parsable` ('123' or '123;cluster')."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines:
        m = _SBATCH_ID.match(lines[-1])
        if m:
            return m.group(1)
    raise SlurmParseError(f"sbatch printed no job id: {text.strip()[:200]!r}")


def parse_squeue(text: str) -> list[JobInfo]:
    """Rows of `squeue -h -o SQUEUE_FORMAT`."""
    jobs = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|", 4)
        if len(parts) != 5 or not parts[0].strip():
            raise SlurmParseError(f"squeue line {n}: expected 5 '|'-separated fields: {line[:200]!r}")
        job_id, state, reason, nodes, name = parts
        jobs.append(JobInfo(job_id.strip(), _state(state), _reason(reason), nodes.strip(), name))
    return jobs


def split_key_values(line: str) -> dict[str, str]:
    """'A=1 B=x y C=' -> {'A': '1', 'B': 'x y', 'C': ''}: a value runs to the next ' Key='."""
    keys = list(_KEY.finditer(line))
    out: dict[str, str] = {}
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
        out.setdefault(m.group(1), line[m.end():end].strip())
    return out


def _exit(text: str) -> tuple[int | None, int | None]:
    m = re.fullmatch(r"(\d+):(\d+)", text.strip())
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def parse_scontrol_jobs(text: str) -> list[JobInfo]:
    """Records of `scontrol -o show job [ID]` (one line per job; the multi-line form works too)."""
    records: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith("JobId="):
            records.append(line.strip())
        elif line.strip() and records:
            records[-1] += " " + line.strip()
    jobs = []
    for rec in records:
        kv = split_key_values(rec)
        if "JobState" not in kv:
            raise SlurmParseError(f"scontrol record without JobState: {rec[:200]!r}")
        rc, sig = _exit(kv.get("ExitCode", ""))
        reason = _reason(kv.get("Reason", "")).replace(",_", ", ")  # -o writes spaces as '_'
        jobs.append(JobInfo(kv["JobId"], _state(kv["JobState"]), reason,
                            "" if kv.get("NodeList") == "(null)" else kv.get("NodeList", ""),
                            kv.get("JobName", ""), rc, sig))
    return jobs


def parse_sinfo_nodes(text: str) -> dict[str, NodeInfo]:
    """Rows of `sinfo -h -N -o SINFO_FORMAT` by node name (a node in two partitions shows twice)."""
    nodes: dict[str, NodeInfo] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|", 2)
        if len(parts) != 3 or not parts[0].strip():
            raise SlurmParseError(f"sinfo line {n}: expected 3 '|'-separated fields: {line[:200]!r}")
        name, state, reason = parts
        nodes.setdefault(name.strip(), NodeInfo(name.strip(), state.strip(), _reason(reason)))
    return nodes
