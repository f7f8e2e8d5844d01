"""SIGKILL of the harness mid-run, then `harness run --resume RUN_DIR`, with real fio.

A SIGKILLed harness cannot stop its tools: fio runs in its own session and keeps going. The
resume (and, in test_runlock.py, the next run) must find and kill it, keep the checks that
finished, rerun the rest and end with one coherent results.json, report.html and junit.xml.
"""

from __future__ import annotations

import json
import signal
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from clihelp import harness, results, run_dirs, write
from faulthelp import alive, ledger_groups, procs_with, sigkill, start, wait_for

from harness.results import validate

# fio expands ${FIO_RUNTIME} in a job file: the killed attempt runs for a minute, the resumed
# one for a second, while the suite (and so its digest) stays the same.
JOBFILE = """\
[global]
directory={dir}
size=16M
runtime=${{FIO_RUNTIME}}
time_based
ioengine=psync
rw=randread
bs=4k
[randread]
"""

SUITE = """\
name: crashy
checks:
  - id: first
    kind: command
    params: {{argv: [/bin/true]}}
    expect: [{{metric: command.duration, max: 3600, unit: s}}]
  - id: long
    kind: command
    params:
      argv: [fio, --output-format=json, {jobfile}]
      metrics:
        - {{name: app.iops, unit: IOPS, better: higher, json_path: "jobs[0].read.iops"}}
    expect: [{{metric: app.iops, min: 1, unit: IOPS}}]
  - id: after
    kind: command
    params: {{argv: [/bin/true]}}
    expect: [{{metric: command.duration, max: 3600, unit: s}}]
"""


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    (tmp_path / "fio").mkdir()
    jobfile = write(tmp_path / "job.fio", JOBFILE.format(dir=tmp_path / "fio"))
    suite = write(tmp_path / "crashy.yaml", SUITE.format(jobfile=jobfile))
    return suite, jobfile, tmp_path / "reports"


def _kill_during_fio(suite: Path, jobfile: Path, out: Path) -> tuple[Path, list[int]]:
    """Start a run, SIGKILL the harness while fio runs; return the run dir and fio's PIDs."""
    p = start("run", str(suite), "--profile", "generic", "--output", str(out),
              env={"FIO_RUNTIME": "60"})
    try:
        wait_for(lambda: run_dirs(out) if out.exists() else [], 60, "the run directory")
        (run_dir,) = run_dirs(out)
        # fio runs and the harness has recorded its group (a moment after starting it)
        wait_for(lambda: set(procs_with(str(jobfile), "fio")) & set(ledger_groups(run_dir)), 60,
                 "fio to start and be recorded")
    finally:
        sigkill(p)
    stale = procs_with(str(jobfile), "fio")
    assert stale, "fio should outlive a SIGKILLed harness (it runs in its own session)"
    ledger = json.loads((run_dir / ".running").read_text())
    assert [g["argv"][0] for g in ledger["groups"]] == ["fio"]
    return run_dir, stale


def test_sigkill_then_resume(tmp_path: Path):
    suite, jobfile, out = _setup(tmp_path)
    run_dir, stale = _kill_during_fio(suite, jobfile, out)
    before = results(run_dir)
    first = (run_dir / "checks/first.json").read_text()
    assert not (run_dir / "checks/long.json").exists()

    t0 = time.monotonic()
    p = start("run", "--resume", str(run_dir), env={"FIO_RUNTIME": "1"})
    try:
        # fio would run on for most of a minute; the resume kills it before rerunning the check
        wait_for(lambda: not any(alive(pid) for pid in stale), 30, "the stale fio to be killed")
        assert time.monotonic() - t0 < 30
        stdout, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, stdout + stderr
    assert "note: killed" in stderr and "`fio --output-format=json" in stderr
    assert "ACCEPTED: 3 passed" in stdout

    doc = results(run_dir)
    assert validate(doc) == []
    assert doc["verdict"] == "ACCEPTED" and doc["interrupted"] is False
    assert doc["started"] == before["started"] and len(doc["resumed"]) == 1
    assert doc["suite"]["digest"] == before["suite"]["digest"]
    assert [c["status"] for c in doc["checks"]] == ["passed", "passed", "passed"]
    assert (run_dir / "checks/first.json").read_text() == first  # kept, not rerun
    long = next(c for c in doc["checks"] if c["id"] == "long")
    assert long["metrics"][0]["name"] == "app.iops" and long["metrics"][0]["value"] > 0
    log = (run_dir / "harness.log").read_text()
    assert log.count("check first (command) started") == 1
    assert "check first kept from the earlier attempt" in log
    assert log.count("check long (command) started") == 2  # killed once, rerun once
    suite_el = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    assert (suite_el.get("tests"), suite_el.get("failures"), suite_el.get("errors")) == ("3", "0", "0")
    html = (run_dir / "report.html").read_text()
    assert "ACCEPTED" in html and "<dt>Resumed</dt>" in html
    assert not (run_dir / ".running").exists()
    assert procs_with(str(jobfile), "fio") == []  # no fio survives, stale or rerun


SLOW = """\
name: slow
checks:
  - id: first
    kind: command
    params: {argv: [/bin/true]}
    expect: [{metric: command.duration, max: 3600, unit: s}]
  - id: slow
    kind: command
    params:
      argv: [python3, -c, "import os, time; time.sleep(float(os.environ.get('SLOW_S', '60')))"]
    expect: [{metric: command.duration, max: 3600, unit: s}]
  - id: after
    kind: command
    params: {argv: [/bin/true]}
    expect: [{metric: command.duration, max: 3600, unit: s}]
"""


def test_resume_refuses_a_changed_suite_and_finishes_an_interrupted_run(tmp_path: Path):
    suite = write(tmp_path / "slow.yaml", SLOW)
    out = tmp_path / "reports"
    # started from another directory with a relative path: the resume below runs elsewhere
    p = start("run", "slow.yaml", "--profile", "generic", "--output", str(out), cwd=tmp_path)
    try:
        wait_for(lambda: run_dirs(out) if out.exists() else [], 60, "the run directory")
        wait_for(lambda: procs_with("SLOW_S", "python3", under=p.pid), 60, "the slow check")
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130
    (run_dir,) = run_dirs(out)

    write(suite, SLOW.replace("id: after\n    kind: command\n    params: {argv: [/bin/true]}",
                              "id: after\n    kind: command\n    params: {argv: [/bin/false]}"))
    r = harness("run", "--resume", str(run_dir))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"the suite {suite} changed since the run started" in r.stderr
    assert "Traceback" not in r.stderr

    write(suite, "# only a comment and spacing changed\n" + SLOW.replace("name: slow", "name:   slow"))
    r = harness("run", "--resume", str(run_dir), env={"SLOW_S": "0"})
    assert r.returncode == 0, r.stdout + r.stderr
    doc = results(run_dir)
    assert [c["status"] for c in doc["checks"]] == ["passed"] * 3 and doc["verdict"] == "ACCEPTED"

    r = harness("run", "--resume", str(run_dir))
    assert r.returncode == 2 and "nothing to resume" in r.stderr
    r = harness("run", str(suite), "--resume", str(run_dir))
    assert r.returncode == 2 and "drop SUITE" in r.stderr
    r = harness("run", "--resume", str(tmp_path / "nope"))
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = harness("run", "--resume", str(tmp_path))
    assert r.returncode == 2 and "no results.json" in r.stderr


FIO_SUITE = """\
name: scratchy
checks:
  - id: fio
    kind: fio
    params:
      target: {target}
      jobs:
        - {{name: rr, rw: randread, bs: 4k, size: 8M, runtime: 60}}
"""


def test_sigkill_during_fio_check_then_next_run_removes_its_scratch_directory(tmp_path: Path):
    """The fio kind's scratch files (harness-fio-* under the target) outlive a SIGKILL; the ledger
    names the directory and the next run on that run directory removes it."""
    target = tmp_path / "target"
    target.mkdir()
    suite, out = write(tmp_path / "s.yaml", FIO_SUITE.format(target=target)), tmp_path / "reports"
    p = start("run", str(suite), "--profile", "generic", "--output", str(out))
    try:
        wait_for(lambda: run_dirs(out) if out.exists() else [], 60, "the run directory")
        (run_dir,) = run_dirs(out)
        wait_for(lambda: set(procs_with(str(target), "fio")) & set(ledger_groups(run_dir)), 60,
                 "fio to start and be recorded")
    finally:
        sigkill(p)
    (work,) = target.iterdir()
    assert work.name.startswith("harness-fio-")
    st = work.lstat()  # recorded with device and inode: only that very directory is removed
    assert json.loads((run_dir / ".running").read_text())["scratch"] == [
        {"path": str(work), "dev": st.st_dev, "ino": st.st_ino}]

    quick = write(tmp_path / "q.yaml",
                  "name: q\nchecks:\n  - {id: t, kind: command, params: {argv: [/bin/true]},\n"
                  "     expect: [{metric: command.duration, max: 3600, unit: s}]}\n")
    res = harness("run", str(quick), "--profile", "generic", "--output", str(out))  # takes the run lock
    assert f"removed leftover scratch directory {work} from {run_dir}" in res.stderr, res.stderr
    assert "killed" in res.stderr and not work.exists() and list(target.iterdir()) == []
    assert procs_with(str(target), "fio") == []
    assert res.returncode == 0, res.stdout + res.stderr
