"""Planted secrets never reach a run's files; files get sane modes; nothing lands outside --output.

The run is real (fio, a command check with its own env, the inventory), started with a
careless umask of 000 and HOME/TMPDIR pointing at empty directories.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from clihelp import ROOT, harness, results, run_dirs, write

SECRETS = {
    "HARNESS_TEST_TOKEN": "tok-5f2a9c1e-planted-in-env",
    "IPMI_PASSWORD": "ipmi-Pl4nted-Passw0rd",
    "AWS_SECRET_ACCESS_KEY": "aws/Pl4nted+SecretKey0123456789",
}
CHECK_SECRET = "api-token-only-in-the-check-env-77"

SUITE = f"""\
name: secretive
checks:
  - id: inventory
    kind: inventory
  - id: app
    kind: command
    params:
      argv: [{sys.executable}, -c, "import os; print('token length:', len(os.environ.get('API_TOKEN', '')))"]
      env: {{API_TOKEN: {CHECK_SECRET}}}
      metrics: [{{name: app.ok, unit: count, regex: "token length: (?P<value>[1-9][0-9]*)"}}]
    expect: [{{metric: app.ok, min: 1, unit: count}}]
  - id: fio
    kind: fio
    params:
      jobs: [{{name: randread_4k, rw: randread, bs: 4k, iodepth: 4, size: 8M, runtime: 1}}]
    expect: [{{metric: fio.iops, labels: {{job: randread_4k, rw: read}}, min: 1, unit: IOPS}}]
"""


def test_secrets_modes_and_footprint(tmp_path: Path):
    suite = write(tmp_path / "secretive.yaml", SUITE)
    home, tmp, out = tmp_path / "home", tmp_path / "tmp", tmp_path / "reports"
    home.mkdir()
    tmp.mkdir()
    env = {**os.environ, **SECRETS, "HOME": str(home), "TMPDIR": str(tmp)}
    env.pop("XDG_CACHE_HOME", None)
    env.pop("XDG_DATA_HOME", None)
    r = subprocess.run([sys.executable, "-m", "harness", "run", str(suite), "--profile", "generic",
                        "--output", str(out)], cwd=ROOT, env=env, text=True, capture_output=True,
                       timeout=180, preexec_fn=lambda: os.umask(0))
    assert r.returncode == 0, r.stdout + r.stderr
    (run_dir,) = run_dirs(out)
    doc = results(run_dir)
    assert [c["status"] for c in doc["checks"]] == ["passed"] * 3  # the check saw its token

    files = [p for p in run_dir.rglob("*") if p.is_file()]
    names = {str(p.relative_to(run_dir)) for p in files}
    assert {"results.json", "report.html", "junit.xml", "harness.log", "checks/app.json"} <= names
    for p in files:  # raw tool output included: these tools do not print their environment
        data = p.read_bytes()
        for value in (*SECRETS.values(), CHECK_SECRET):
            assert value.encode() not in data, f"{value} leaked into {p.relative_to(run_dir)}"
    for text in (r.stdout, r.stderr):
        assert CHECK_SECRET not in text and all(v not in text for v in SECRETS.values())

    # modes: umask 000 was given, the run still writes nothing group- or world-writable
    for p in [run_dir, *run_dir.rglob("*")]:
        mode = stat.S_IMODE(p.lstat().st_mode)
        assert mode == (0o755 if p.is_dir() else 0o644), f"{p}: {oct(mode)}"
    assert stat.S_IMODE(out.stat().st_mode) == 0o755

    # nothing outside the output directory: fio's scratch directory in TMPDIR is gone again
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []


def test_dry_run_shows_env_keys_not_values(tmp_path: Path):
    suite = write(tmp_path / "secretive.yaml", SUITE)
    r = harness("run", str(suite), "--profile", "generic", "--dry-run", env=SECRETS)
    assert r.returncode == 0, r.stderr
    assert "env: API_TOKEN=..." in r.stdout
    assert CHECK_SECRET not in r.stdout and all(v not in r.stdout for v in SECRETS.values())
