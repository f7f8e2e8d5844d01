"""The Slurm edge: run sbatch, squeue, sinfo, scontrol and scancel as argument lists, no shell.

Only this module starts Slurm commands; what they print is parsed by harness.fleet.slurmtext.
The cluster is whichever the environment names (SLURM_CONF, or the node's /etc/slurm).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.errors import ToolError, ToolMissing
from harness.platform import proc

HINT = "apt-get install slurm-client (and a reachable slurmctld)"


class SlurmError(ToolError):
    """A Slurm command failed (exit status non-zero) or could not run."""


def call(argv: Sequence[str], timeout: float = 60.0, check: bool = True) -> tuple[int, str, str]:
    """Run one Slurm command; return (rc, stdout, stderr). With `check`, rc != 0 raises SlurmError."""
    argv = tuple(str(a) for a in argv)
    try:
        rc, out, err = proc.capture_rc(argv, timeout=timeout)
    except ToolMissing as e:
        raise SlurmError(f"{argv[0]} not found; install it with: {HINT}", argv=argv) from e
    if check and rc != 0:
        why = err.strip() or out.strip() or f"exit {rc}"
        raise SlurmError(f"{' '.join(argv[:2])}: {why[-500:]}", argv=argv, rc=rc, output_tail=err[-2000:])
    return rc, out, err
