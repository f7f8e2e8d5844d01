"""Tools that hang, crash, print garbage or are missing, in real runs: errored, never failed.

Each fault is a real process. The run goes on to the next check, and nothing a tool started
is left running. A broken tool is the environment's fault, never a hardware verdict.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write
from faulthelp import HANG, alive, pids_in

PY = sys.executable
SEGV = "import os, signal; print('partial line 1'); print('last words', flush=True); " \
       "os.kill(os.getpid(), signal.SIGSEGV)"
GARBAGE = "import random, sys; sys.stdout.buffer.write(random.Random(8).randbytes(8192))"


def _suite(piddir: Path) -> str:
    return f"""\
name: faults
checks:
  - id: hang
    kind: command
    timeout: 4
    params: {{argv: [{PY}, -c, {json.dumps(HANG)}, {piddir}]}}
  - id: segv
    kind: command
    params: {{argv: [{PY}, -c, {json.dumps(SEGV)}]}}
  - id: garbage
    kind: command
    params:
      argv: [{PY}, -c, {json.dumps(GARBAGE)}]
      metrics: [{{name: app.bw, unit: GB/s, regex: "bw=(?P<value>[0-9.]+)"}}]
  - id: missing
    kind: command
    params: {{argv: [no-such-tool-4711, --fast]}}
  - id: nan
    kind: command
    params:
      argv: [/bin/echo, "bw=nan lat=1e999"]
      metrics: [{{name: app.bw, unit: GB/s, regex: "bw=(?P<value>[^ ]+)"}},
                {{name: app.lat, unit: us, regex: "lat=(?P<value>[^ ]+)"}}]
  - id: after
    kind: command
    params: {{argv: [/bin/true]}}
    expect: [{{metric: command.duration, max: 3600, unit: s}}]
"""


def test_faulty_tools_error_and_the_run_goes_on(tmp_path: Path):
    piddir = tmp_path / "pids"
    piddir.mkdir()
    suite = write(tmp_path / "faults.yaml", _suite(piddir))
    out = tmp_path / "r"
    t0 = time.monotonic()
    r = harness("run", str(suite), "--profile", "generic", "--output", str(out))
    assert r.returncode == 3, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    doc = results(run_dirs(out)[0])
    by = {c["id"]: c for c in doc["checks"]}
    assert {k: c["status"] for k, c in by.items()} == {
        "hang": "errored", "segv": "errored", "garbage": "errored", "missing": "errored",
        "nan": "errored", "after": "passed"}
    assert doc["counts"]["failed"] == 0 and doc["verdict"] == "ERRORED"

    # hang: the whole group is gone, the TERM-ignoring child and the double-forked grandchild too
    assert "timed out after 4 s; process group killed" in by["hang"]["message"]
    assert by["hang"]["tool_runs"][0]["timed_out"] is True
    pids = pids_in(piddir)
    assert set(pids) == {"leader", "child", "grandchild"}
    for name, pid in pids.items():
        assert not alive(pid), f"{name} of the hung tool survived"
    assert by["hang"]["duration_s"] < 60  # timeout + the TERM grace, not the tool's 300 s

    # crash: the signal and the tail of the output
    assert "killed by signal 11" in by["segv"]["message"]
    assert "last words" in by["segv"]["message"]
    assert by["segv"]["tool_runs"][0]["rc"] == -11

    # garbage: an invalid run, with what was missing
    assert by["garbage"]["message"].startswith("invalid run: app.bw: regex")
    assert "matched nothing in stdout" in by["garbage"]["message"]

    assert by["missing"]["message"] == "no-such-tool-4711 not found on PATH"

    # numbers that are not numbers: an invalid run, and results.json (strict JSON) still written
    assert by["nan"]["message"] == ("invalid run: app.bw{} is not a finite number (nan); "
                                    "app.lat{} is not a finite number (inf)")
    assert [m["name"] for m in by["nan"]["metrics"]] == ["command.duration"]
    assert time.monotonic() - t0 < 150


FIO_SUITE = """\
name: fio-only
checks:
  - id: fio
    kind: fio
    params:
      jobs: [{name: randread_4k, rw: randread, bs: 4k, iodepth: 4, size: 16M, runtime: 1}]
"""

SHIMS = {  # a `fio` on PATH that misbehaves
    "garbage": "import random, sys; sys.stdout.buffer.write(random.Random(3).randbytes(4096))",
    "segv": SEGV,
    "json-garbage": "import sys; out = [a for a in sys.argv if a.startswith('--output=')][0][9:]; "
                    "open(out, 'w').write('{\"fio version\": \"fio-3.33\", \"jobs\": [{\"jobname\": 7')",
}


@pytest.mark.parametrize("fault", [*SHIMS, "missing"])
def test_fio_that_misbehaves_or_is_missing_is_an_error(tmp_path: Path, fault: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if fault in SHIMS:
        shim = bin_dir / "fio"
        shim.write_text(f"#!{PY}\n{SHIMS[fault]}\n")
        shim.chmod(0o755)
        path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    else:
        path = str(bin_dir)  # nothing at all on PATH, fio included
    suite = write(tmp_path / "fio.yaml", FIO_SUITE)
    out = tmp_path / "r"
    r = harness("run", str(suite), "--profile", "generic", "--output", str(out), env={"PATH": path})
    assert r.returncode == 3, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    (chk,) = results(run_dirs(out)[0])["checks"]
    assert chk["status"] == "errored", chk
    msg = chk["message"]
    expected = {
        "garbage": "invalid run:",
        "segv": "fio: killed by signal 11: last words",
        "json-garbage": "invalid run:",
        "missing": "fio not found; install it with: apt-get install fio",
    }[fault]
    assert msg.startswith(expected) if fault != "segv" else expected in msg, msg
