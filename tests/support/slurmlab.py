"""A real Slurm cluster for tests: scripts/slurm-up.sh in a temporary lab, scripts/slurm-down.sh after.

munged, slurmctld and one slurmd per fake node run on this host on free ports; every file lives
in the lab directory. Skipped when Slurm or munge is not installed, except under CI=true.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BINARIES = ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "scancel", "munged")


@dataclass(frozen=True)
class Lab:
    dir: Path
    nodes: tuple[str, ...]
    env: dict[str, str]  # SLURM_CONF and a per-node harness lock file

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def node_state(self, node: str) -> tuple[str, str]:
        r = self.run("sinfo", "-h", "-N", "-n", node, "-o", "%T|%E")
        state, _, reason = r.stdout.strip().partition("|")
        return state, reason

    def wait_for(self, what: str, predicate, timeout: float = 120) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
            time.sleep(0.5)


def _ports_free(base: int, count: int) -> bool:
    for port in range(base, base + count + 1):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("0.0.0.0", port))  # probing: slurmctld listens on all addresses
            except OSError:
                return False
    return True


def _free_base(count: int) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        start = int(s.getsockname()[1]) % 20000 + 20000
    for base in range(start, start + 2000, count + 1):
        if _ports_free(base, count):
            return base
    raise RuntimeError("no free port range for the Slurm lab")


def require_slurm() -> None:
    if os.geteuid() != 0:
        pytest.skip("the Slurm lab runs its daemons and jobs as root")
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        msg = (f"Slurm/munge not installed ({', '.join(missing)}): "
               "apt-get install slurmctld slurmd slurm-client munge")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + "; CI=true requires them", pytrace=False)
        pytest.skip(msg)


OWNER = "owner.pid"  # the pytest process that started a lab


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_orphans() -> None:
    """Stop labs left by a test process that died before its teardown (killed, timed out)."""
    for lab in Path("/tmp").glob("harness-slurmlab-*"):
        try:
            owner = int((lab / OWNER).read_text())
        except (OSError, ValueError):
            continue  # being set up right now, or not ours
        if not _alive(owner):
            subprocess.run([str(ROOT / "scripts" / "slurm-down.sh"), "--purge"], capture_output=True,
                           env={**os.environ, "SLURM_LAB": str(lab)}, timeout=300, check=False)


@contextmanager
def slurm_lab(nodes: int = 4) -> Iterator[Lab]:
    """Start a lab in a fresh /tmp/harness-slurmlab-* with the project's own script; always stop and
    remove it. (Not under pytest's tmp: munged wants o+x on every directory above its socket.)"""
    require_slurm()
    stop_orphans()
    lab_dir = Path(tempfile.mkdtemp(prefix="harness-slurmlab-", dir="/tmp"))
    lab_dir.chmod(0o755)
    (lab_dir / OWNER).write_text(str(os.getpid()))
    env = {"SLURM_LAB": str(lab_dir), "SLURM_NODES": str(nodes), "SLURM_BASE_PORT": str(_free_base(nodes)),
           "SLURM_NO_INSTALL": "1", "SLURM_UP_TIMEOUT": "120"}
    full = {**os.environ, **env}
    try:
        up = subprocess.run([str(ROOT / "scripts" / "slurm-up.sh")], env=full, capture_output=True, text=True,
                            timeout=300, check=False)
        if up.returncode != 0:
            raise RuntimeError(f"slurm-up.sh failed ({up.returncode}):\n{up.stdout}\n{up.stderr}")
        yield Lab(lab_dir, tuple(f"n{i}" for i in range(1, nodes + 1)),
                  {"SLURM_CONF": str(lab_dir / "etc" / "slurm.conf"),
                   "HARNESS_LOCK_FILE": str(lab_dir / "run" / "harness-{node}.lock")})
    finally:
        subprocess.run([str(ROOT / "scripts" / "slurm-down.sh"), "--purge"], env=full, capture_output=True,
                       text=True, timeout=300, check=False)
