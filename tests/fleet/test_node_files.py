"""A node's files are read on the report host without following symlinks, bounded, and what is
shown of them is escaped: a node's slurm-<job>.out symlinked to a root 0600 file reveals nothing,
and its escape sequences cannot repaint the terminal or a report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from clihelp import ROOT

from harness.fleet import layout
from harness.fleet.layout import Manifest, NodeJob, SeenJob
from harness.fleet.slurmtext import JobInfo


def _fleet(fleet: Path, secret: Path, secret_json: Path) -> None:
    nodes = ("n1", "n2", "n3")
    for n in nodes:
        layout.node_dir(fleet, n).mkdir(parents=True)
    (layout.node_dir(fleet, "n1") / "slurm-1.out").symlink_to(secret)
    (layout.node_dir(fleet, "n2") / "slurm-2.out").write_bytes(b"ok\n\x1b[2J\x1b[1;1HACCEPTED all fine\n")
    (layout.node_dir(fleet, "n3") / layout.EXIT_FILE).symlink_to(secret_json)
    jobs = {n: NodeJob(n, str(i)) for i, n in enumerate(nodes, 1)}
    layout.save_manifest(fleet, Manifest("/s.yaml", "s", None, nodes, "2026-11-29T10:00:00Z", jobs))
    layout.save_jobs(fleet, {n: SeenJob(JobInfo(j.job_id or "", "GONE" if n == "n3" else "FAILED",
                                                "NonZeroExitCode", n, "h", 1, 0),
                                        "2026-11-29T10:01:00Z") for n, j in jobs.items()})


def test_a_symlinked_job_output_reveals_nothing_and_escapes_are_shown_escaped(tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_text('{"rc": 0, "node": "n3"}\nroot:TOPSECRET-HASH\n')
    secret_json = tmp_path / "root.json"
    secret_json.write_text('{"rc": 42, "node": "n3"}\n')
    for f in (secret, secret_json):
        f.chmod(0o600)
    fleet = tmp_path / "fleet"
    _fleet(fleet, secret, secret_json)
    r = subprocess.run([sys.executable, "-m", "harness", "fleet", "report", str(fleet)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "SLURM_CONF": str(tmp_path / "no-such-slurm.conf")})
    assert r.returncode == 3, r.stdout + r.stderr
    written = [(fleet / f).read_text() for f in ("fleet.html", "fleet.json", "junit.xml")]
    for text in (r.stdout, r.stderr, *written):
        assert "TOPSECRET" not in text and "\x1b" not in text
    assert "n2: job 2 ended FAILED" in r.stdout
    assert r"last output: \x1b[2J\x1b[1;1HACCEPTED all fine" in r.stdout  # shown, escaped
    assert "n3: job 3 ended GONE" in r.stdout and "exited 42" not in r.stdout  # root's file: not read
