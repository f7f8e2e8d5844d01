"""`harness fleet` against a real Slurm cluster (munged + slurmctld + 4 slurmd on this host).

One lab serves the module. The suite is inventory + a small fio job + a command check whose
numbers depend on the node it runs on ($SLURMD_NODENAME): n3 is the planted bad node (its check
fails), n2 the planted outlier (passes its floor, far below its siblings).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from clihelp import ROOT, write
from promhelp import pushgateway, scrape
from slurmlab import OWNER, Lab, slurm_lab, stop_orphans

from harness.history.store import SqliteStore

pytestmark = pytest.mark.slow

BENCH = """\
import os, sys, time
node = os.environ.get("SLURMD_NODENAME", "?")
if node in sys.argv[1:]:
    time.sleep(300)  # made to hang: the test cancels this job
bw = {"n2": 60.0, "n3": 99.0}.get(node, 100.0 + int(node.lstrip("n") or 0) % 2 * 0.5)
print(f"bw: {bw}")
print(f"errors: {3 if node == 'n3' else 0}")
"""

SUITE = """\
name: fleet-test
checks:
  - id: inventory
    kind: inventory
{fio}  - id: app
    kind: command
    params:
      argv: [{python}, {bench}{hang}]
      metrics:
        - {{name: app.bw, unit: GB/s, better: higher, regex: 'bw: (?P<value>[0-9.]+)'}}
        - {{name: app.errors, unit: count, better: lower, regex: 'errors: (?P<value>[0-9]+)'}}
    expect:
      - {{metric: app.bw, min: 50, unit: GB/s}}
      - {{metric: app.errors, max: 0, unit: count}}
"""

FIO = """\
  - id: fio
    kind: fio
    params:
      jobs:
        - {name: randread_4k, rw: randread, bs: 4k, iodepth: 4, size: 8M, runtime: 1}
"""

PROFILE = "name: lenient\nhardware:\n  memory_min_bytes: 1048576\nexpectations: []\n"


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    with slurm_lab(nodes=4) as lab:
        yield lab


def files(tmp: Path, fio: bool = True, hang: str = "") -> tuple[Path, Path]:
    (tmp / "bench.py").write_text(BENCH)
    suite = tmp / "suite.yaml"
    suite.write_text(SUITE.format(fio=FIO if fio else "", python=sys.executable, bench=tmp / "bench.py",
                                  hang=f", {hang}" if hang else ""))
    (tmp / "lenient.yaml").write_text(PROFILE)
    return suite, tmp / "lenient.yaml"


def operator_drain(lab: Lab, node: str) -> subprocess.CompletedProcess[str]:
    return lab.run("scontrol", "update", f"nodename={node}", "state=drain", "reason=operator: bad fan")


def fleet(lab: Lab, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return lab.run(sys.executable, "-m", "harness", "fleet", *args, timeout=timeout)


def test_fleet_run_reports_drains_exports_and_resumes(lab: Lab, tmp_path: Path):
    suite, profile = files(tmp_path)
    out = tmp_path / "fleet"
    (tmp_path / "shared").mkdir()  # a shared file system's folder: the jobs write one store there
    t0 = time.monotonic()
    with pushgateway(tmp_path) as url:
        r = fleet(lab, "run", str(suite), "--nodes", "n[1-4]", "--output", str(out),
                  "--profile", str(profile), "--time", "10", "--drain-failed", "--poll-interval", "1s",
                  "--start-timeout", "5m", "--pushgateway", url, "--prom-textfile", str(out),
                  "--history", str(tmp_path / "shared" / "history.sqlite"))
        took = time.monotonic() - t0
        assert r.returncode == 1, r.stdout + r.stderr
        pushed = scrape(url)
    print(f"fleet run on 4 nodes: {took:.1f} s")
    assert "submitted 4 of 4 job(s) for n[1-4]" in r.stdout
    assert "4 node(s): 0 pending, 0 running, 4 done, 0 failed" in r.stderr  # the plain progress lines
    # (fio on four fake nodes sharing one disk may add outliers of its own: not asserted)
    assert "REJECTED: 4 node(s): 3 accepted, 1 rejected; " in r.stdout
    assert "OUTLIER    n2: app: app.bw 60 GB/s vs fleet median 99.5 GB/s (-39.7 %, z -3" in r.stdout
    doc = json.loads((out / "fleet.json").read_text())
    nodes = {n["node"]: n for n in doc["nodes"]}
    assert {n: v["status"] for n, v in nodes.items()} == {"n1": "ACCEPTED", "n2": "ACCEPTED",
                                                          "n3": "REJECTED", "n4": "ACCEPTED"}
    reason = "harness: app app.errors measured 3, expected <= 0"
    assert doc["drain"] == [{"node": "n3", "reason": reason}]
    assert nodes["n3"]["evidence"][0] == {"check": "app", "what": "app.errors",
                                          "detail": "measured 3, expected <= 0", "kind": "failed"}
    bw = [o for o in doc["outliers"] if o["metric"] == "app.bw"]
    assert [(o["node"], o["value"]) for o in bw] == [("n2", 60.0)]
    assert "n2" in doc["outlier_nodes"]
    for n in lab.nodes:  # each node's own run, written by its job
        (run_dir,) = [p for p in (out / "nodes" / n).iterdir() if (p / "results.json").is_file()]
        assert nodes[n]["run_dir"] == str(run_dir.relative_to(out))
        assert json.loads((out / "nodes" / n / "job-exit.json").read_text())["node"] == n
    shared = tmp_path / "shared" / "history.sqlite"
    with SqliteStore(shared) as store:  # every node's run in one store: the lab's nodes share a
        # hostname, and their runs of one second used to share a run id (4 nodes stored as 1 row)
        recorded = [r.run_id for n in store.nodes() for r in store.runs(n.node_id)]
    assert len(recorded) == len(set(recorded)) == 4, recorded
    recorded = set(recorded)
    ran = {json.loads((p / "results.json").read_text())["run_id"]: json.loads(
        (p / "results.json").read_text())["history"]["store"]
           for n in lab.nodes for p in (out / "nodes" / n).iterdir() if (p / "results.json").is_file()}
    assert recorded == set(ran) and set(ran.values()) == {str(shared)}
    # JUnit: one testsuite per node
    suites = {s.get("name"): s for s in ET.parse(out / "junit.xml").getroot().findall("testsuite")}
    assert sorted(suites) == ["n1", "n2", "n3", "n4"] and suites["n3"].get("failures") == "1"
    html = (out / "fleet.html").read_text()
    assert "Nodes to drain / RMA (1)" in html and reason.replace(">", "&gt;").replace("<", "&lt;") in html
    # drained for real, with the reason; the Pushgateway and the textfile hold each node's series
    assert lab.node_state("n3") == ("drained", reason)
    status = {dict(k[1])["node"]: dict(k[1])["status"] for k, v in pushed.items()
              if k[0] == "harness_fleet_node_status" and v == 1.0}
    assert status == {"n1": "ACCEPTED", "n2": "ACCEPTED", "n3": "REJECTED", "n4": "ACCEPTED"}
    assert any(k[0] == "harness_fleet_outlier_zscore" and dict(k[1])["node"] == "n2" and v < -3.5
               for k, v in pushed.items())
    assert "harness_app_bandwidth_bytes_per_second{" in (out / "harness.prom").read_text()

    # an operator drains n4 for a reason of their own: resume must leave it alone
    assert operator_drain(lab, "n4").returncode == 0
    try:
        r = fleet(lab, "resume", str(out))
        assert r.returncode == 0, r.stderr
        assert f"resumed n3 (was: {reason})" in r.stdout
        assert "kept n4: drained by someone else: operator: bad fan" in r.stdout
        assert lab.node_state("n4") == ("drained", "operator: bad fan")
        lab.wait_for("n3 to be idle", lambda: lab.node_state("n3")[0].rstrip("*") == "idle", 60)
        log = json.loads((out / "drain.json").read_text())
        assert [(a["node"], a["action"], a["done"]) for a in log] == [
            ("n3", "drain", True), ("n1", "keep", False), ("n2", "keep", False), ("n3", "resume", True),
            ("n4", "keep", False)]
    finally:
        lab.run("scontrol", "update", "nodename=n4", "state=resume")

    # the report can be made again later from the directory
    r = fleet(lab, "report", str(out))
    assert r.returncode == 1 and "REJECTED: 4 node(s): 3 accepted, 1 rejected" in r.stdout


def test_never_started_cancelled_and_refused_nodes_are_errored(lab: Lab, tmp_path: Path):
    suite, profile = files(tmp_path, fio=False, hang="n1")
    out = tmp_path / "fleet"
    assert operator_drain(lab, "n4").returncode == 0
    try:
        proc = subprocess.Popen([sys.executable, "-m", "harness", "fleet", "run", str(suite), "--nodes",
                                 "n[1,4,9]", "--output", str(out), "--profile", str(profile),
                                 "--drain-failed",
                                 "--poll-interval", "1s", "--start-timeout", "20s"],
                                cwd=ROOT, env={**os.environ, **lab.env}, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            # once n1's harness is running its (hanging) app check, cancel the job like an operator
            started = lambda: any((out / "nodes" / "n1").glob("*/checks/inventory.json"))  # noqa: E731
            lab.wait_for("n1's run to start", started)
            job = json.loads((out / "fleet-run.json").read_text())["jobs"]["n1"]["job_id"]
            assert lab.run("scancel", job).returncode == 0
            stdout, stderr = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 3, stdout + stderr
        doc = json.loads((out / "fleet.json").read_text())
        nodes = {n["node"]: n for n in doc["nodes"]}
        assert {v["status"] for v in nodes.values()} == {"ERRORED"} and sorted(nodes) == ["n1", "n4", "n9"]
        assert nodes["n1"]["reason"].startswith(f"job {job} ended CANCELLED")
        assert "the run is incomplete" in nodes["n1"]["reason"]
        assert nodes["n4"]["reason"].startswith("never started: still PENDING (ReqNodeNotAvail")
        assert "node n4 is drained: operator: bad fan; cancelled by harness" in nodes["n4"]["reason"]
        assert nodes["n9"]["reason"] == "sbatch refused: sbatch --parsable: sbatch: error: Batch job " \
                                        "submission failed: Invalid node name specified"
        assert doc["drain"] == [] and "  drained " not in stdout  # errors are not hardware verdicts
        assert lab.node_state("n4") == ("drained", "operator: bad fan")
        assert lab.node_state("n1")[0].rstrip("*") in ("idle", "completing")
    finally:
        lab.run("scontrol", "update", "nodename=n4", "state=resume")


STUBBORN = """\
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # ignores scancel's TERM (sent to every process)
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(300)
"""


def _gone(pid: int) -> bool:
    """Whether `pid` has exited (a zombie left to init counts as gone: it holds no lock, runs nothing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def test_a_cancelled_job_ends_only_once_its_harness_and_tools_are_gone(lab: Lab, tmp_path: Path):
    """scancel TERMs every process of the job. The job's shell died of it, which handed the harness
    to init: Slurm (proctrack/linuxproc tracks the process tree) ended the job at once and gave the
    node to the next job while the harness, waiting on a tool that ignores TERM, held the node's run
    lock for the tool's whole 300 s ("another run is in progress"). Now the job ends only once the
    harness and its tools are gone, within KillWait (5 s), with the run written and interrupted."""
    import fcntl

    (tmp_path / "stubborn.py").write_text(STUBBORN)
    tool_pid_file = tmp_path / "tool.pid"
    suite = write(tmp_path / "suite.yaml", f"""\
name: stubborn
checks:
  - id: inventory
    kind: inventory
  - id: app
    kind: command
    params: {{argv: [{sys.executable}, {tmp_path / "stubborn.py"}, {tool_pid_file}]}}
    expect: [{{metric: command.duration, max: 3600, unit: s}}]
""")
    profile = write(tmp_path / "lenient.yaml", PROFILE)
    out = tmp_path / "fleet"
    lab.wait_for("n1 to be idle", lambda: lab.node_state("n1")[0].rstrip("*") == "idle")
    r = fleet(lab, "run", str(suite), "--nodes", "n1", "--output", str(out), "--profile", str(profile),
              "--no-wait", "--history", "off")
    assert r.returncode == 0, r.stdout + r.stderr
    job = json.loads((out / "fleet-run.json").read_text())["jobs"]["n1"]["job_id"]
    lab.wait_for("the tool to start", lambda: tool_pid_file.is_file() and tool_pid_file.read_text() != "")
    tool = int(tool_pid_file.read_text())
    lock = lab.dir / "run" / "harness-n1.lock"
    harness = int(json.loads(lock.read_text())["pid"])
    assert not _gone(harness) and not _gone(tool)
    t0 = time.monotonic()
    assert lab.run("scancel", job).returncode == 0
    lab.wait_for("the cancelled job to end", lambda: lab.run("squeue", "-h", "-j", job).stdout.strip() == "",
                 timeout=60)
    ended = time.monotonic() - t0
    print(f"scancel to the job's end: {ended:.1f} s; harness gone: {_gone(harness)}, "
          f"tool gone: {_gone(tool)}")
    # the moment Slurm calls the job over (and may start the next one on n1), nothing of it is left
    assert _gone(harness), f"job {job} ended {ended:.1f} s after scancel; its harness (PID {harness}) runs"
    assert _gone(tool), f"job {job} ended, its tool (PID {tool}) still runs"
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while anyone holds n1's run lock
    finally:
        os.close(fd)
    (run_dir,) = [p for p in (out / "nodes" / "n1").iterdir() if (p / "report.html").is_file()]
    doc = json.loads((run_dir / "results.json").read_text())
    assert doc["interrupted"] is True, doc
    assert [(c["id"], c["status"]) for c in doc["checks"]] == [("inventory", "passed"), ("app", "not_run")]
    assert doc["checks"][1]["message"] == "interrupted by SIGTERM while running"
    assert json.loads((out / "nodes" / "n1" / "job-exit.json").read_text())["rc"] == 143  # the harness's own
    r = fleet(lab, "report", str(out))
    assert r.returncode == 3, r.stdout + r.stderr
    (node,) = json.loads((out / "fleet.json").read_text())["nodes"]
    assert node["reason"].startswith(f"job {job} ended CANCELLED"), node
    assert "the run is incomplete" in node["reason"], node


def no_slurm_report(out: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "fleet", "report", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "SLURM_CONF": str(tmp_path / "no-such-slurm.conf")})


def test_drain_unfit_drains_an_errored_node_with_its_own_reason_and_resume_resumes_it(lab: Lab,
                                                                                        tmp_path: Path):
    """Issue #25 item 5: --drain-failed drains rejected nodes only; --drain-unfit drains an errored
    node too ("harness: ERRORED ..."), and `fleet resume` resumes it like any harness drain."""
    (tmp_path / "bench.py").write_text("import os, sys\n"
                                       "sys.exit(5 if os.environ.get('SLURMD_NODENAME') == 'n2' else 0)\n")
    suite = write(tmp_path / "suite.yaml", f"""\
name: unfit
checks:
  - id: app
    kind: command
    params: {{argv: [{sys.executable}, {tmp_path / "bench.py"}]}}
    expect: [{{metric: command.duration, max: 3600, unit: s}}]
""")
    profile = write(tmp_path / "lenient.yaml", PROFILE)
    out = tmp_path / "fleet"
    # an earlier test's cancelled job may still be completing on n1: start on idle nodes
    lab.wait_for("n1 and n2 to be idle", lambda: all(lab.node_state(n)[0].rstrip("*") == "idle"
                                                     for n in ("n1", "n2")), timeout=120)
    r = fleet(lab, "run", str(suite), "--nodes", "n[1-2]", "--output", str(out), "--profile", str(profile),
              "--time", "10", "--drain-failed", "--poll-interval", "1s", "--history", "off")
    assert r.returncode == 3, r.stdout + r.stderr
    assert json.loads((out / "fleet.json").read_text())["drain"] == [] and "  drained " not in r.stdout
    try:
        r = fleet(lab, "report", str(out), "--drain-unfit")
        assert r.returncode == 3, r.stdout + r.stderr
        drained = [ln for ln in r.stdout.splitlines() if ln.startswith("  drained ")]
        assert len(drained) == 1, r.stdout
        (line,) = drained
        assert line.startswith("  drained n2: harness: ERRORED app "), line
        state, reason = lab.node_state("n2")
        assert state.startswith("drain") and reason.startswith("harness: ERRORED app ")
        r = fleet(lab, "resume", str(out))
        assert r.returncode == 0 and "resumed n2 (was: harness: ERRORED app " in r.stdout, r.stdout
    finally:
        for n in ("n1", "n2"):
            if lab.node_state(n)[0].startswith("drain"):
                lab.run("scontrol", "update", f"nodename={n}", "state=resume")


def test_no_wait_then_status_then_report(lab: Lab, tmp_path: Path):
    suite, profile = files(tmp_path, fio=False)
    out = tmp_path / "fleet"
    r = fleet(lab, "run", str(suite), "--nodes", "n[1-2]", "--output", str(out), "--profile", str(profile),
              "--no-wait")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"follow with: harness fleet status {out}" in r.stdout
    # a report while Slurm cannot be asked: a warning, then what the files say (pending nodes, or
    # nodes whose results are already complete: the jobs may have finished by now)
    early = no_slurm_report(out, tmp_path)
    assert "warning: cannot ask Slurm (squeue" in early.stderr and (out / "fleet.html").is_file()
    assert early.returncode in (0, 1) and "report: " in early.stdout
    codes: list[int] = []

    def finished() -> bool:
        s = fleet(lab, "status", str(out))
        codes.append(s.returncode)
        return s.returncode == 0 and "2 accepted" in s.stdout

    lab.wait_for("both nodes to finish", finished, timeout=240)
    r = fleet(lab, "report", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ACCEPTED: 2 node(s): 2 accepted; 0 outlier node(s)")
    assert json.loads((out / "fleet.json").read_text())["verdict"] == "ACCEPTED"
    # later, with the scheduler out of reach, nothing is left to ask: the saved states suffice
    gone = no_slurm_report(out, tmp_path)
    assert gone.returncode == 0 and gone.stdout.startswith("ACCEPTED: 2 node(s)"), gone.stderr
    r = fleet(lab, "run", str(suite), "--nodes", "n1", "--output", str(out), "--no-wait")
    assert r.returncode == 2 and "already holds a fleet run" in r.stderr


def test_a_lab_left_by_a_dead_test_process_is_stopped_and_removed():
    dead = subprocess.Popen(["true"])
    dead.wait()
    lab = Path(tempfile.mkdtemp(prefix="harness-slurmlab-", dir="/tmp"))
    (lab / "run").mkdir()
    (lab / OWNER).write_text(str(dead.pid))
    stop_orphans()
    assert not lab.exists()


def test_ctrl_c_cancels_the_submitted_jobs_and_says_which(lab: Lab, tmp_path: Path):
    """A SIGINT printed a bare 'aborted' (exit 130) and left the jobs RUNNING with no hint."""
    import signal

    suite, profile = files(tmp_path, fio=False, hang="n1")
    out = tmp_path / "fleet"
    proc = subprocess.Popen([sys.executable, "-m", "harness", "fleet", "run", str(suite), "--nodes", "n1",
                             "--output", str(out), "--profile", str(profile), "--poll-interval", "1s"],
                            cwd=ROOT, env={**os.environ, **lab.env}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lab.wait_for("n1's run to start", lambda: any((out / "nodes" / "n1").glob("*/checks/inventory.json")))
        job = json.loads((out / "fleet-run.json").read_text())["jobs"]["n1"]["job_id"]
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stdout + stderr
    assert f"  cancelled n1: job {job}" in stderr and "aborted" not in stderr, stderr
    assert "fleet run interrupted: 1 job(s) cancelled, 0 left" in stderr
    lab.wait_for("the job to end", lambda: lab.run("squeue", "-h", "-j", job).stdout.strip() == "")
    manifest = json.loads((out / "fleet-run.json").read_text())
    assert manifest["options"]["interrupted_by"] == "interrupted (SIGINT)"
    doc = json.loads((out / "fleet.json").read_text())
    (node,) = doc["nodes"]
    assert node["status"] == "ERRORED", node
    assert "interrupted (SIGINT): cancelled by harness" in node["reason"], node


def test_a_planted_or_reused_fleet_directory_is_refused_and_jobs_start_isolated(lab: Lab, tmp_path: Path):
    """Root's `fleet run -o` into a directory another user made (her nodes/n1/yaml/__init__.py and a
    job.sh symlinked to a root 0600 file in it) or one holding nodes/ already submits nothing and
    touches nothing; into a fresh one, each job.sh is root's, made new, and starts Python isolated."""
    import pwd

    if os.geteuid() != 0:
        pytest.skip("plants files as another user: needs root")
    suite, _ = files(tmp_path, fio=False)
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    shared = Path(tempfile.mkdtemp(prefix="harness-shared-", dir="/tmp"))
    shared.chmod(0o1777)
    try:
        planted = shared / "fleet"
        subprocess.run(["sh", "-c", "set -e; mkdir -p fleet/nodes/n1/yaml; "
                        f"echo 'open(\"{shared / 'proof'}\", \"w\")' > fleet/nodes/n1/yaml/__init__.py; "
                        f"ln -s {secret} fleet/nodes/n1/job.sh"],
                       cwd=shared, user="nobody", check=True, timeout=30)
        r = fleet(lab, "run", str(suite), "--nodes", "n1", "--output", str(planted), "--poll-interval", "1s")
        uid = pwd.getpwnam("nobody").pw_uid
        assert r.returncode == 2, r.stdout + r.stderr
        assert f"--output {planted}: not trusted: {planted} is owned by uid {uid} (nobody)" in r.stderr
        assert "submitted" not in r.stdout and secret.read_text() == "root only\n"
        assert (secret.stat().st_mode & 0o777) == 0o600 and not (shared / "proof").exists()
        # one of root's own that already holds nodes/ (an earlier run's, or planted before it was root's)
        mine = tmp_path / "mine"
        (mine / "nodes" / "n1").mkdir(parents=True)
        r = fleet(lab, "run", str(suite), "--nodes", "n1", "--output", str(mine))
        assert r.returncode == 2 and f"--output {mine} already has nodes/" in r.stderr
        # a fresh one in the shared directory: root's own, the job runs
        fresh = shared / "fresh"
        r = fleet(lab, "run", str(suite), "--nodes", "n1", "--output", str(fresh), "--poll-interval", "1s",
                  "--time", "5")
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"suite fleet-test: given as a path, {suite}" in r.stdout  # where what was sent came from
        script = fresh / "nodes" / "n1" / "job.sh"
        st = script.lstat()
        assert (st.st_uid, st.st_mode & 0o777) == (0, 0o755)
        text = script.read_text()
        assert " -I -c " in text and "\ncd / || exit 97" in text and "PYTHONPATH" not in text
        (run_dir,) = [p for p in (fresh / "nodes" / "n1").iterdir() if (p / "results.json").is_file()]
        doc = json.loads((run_dir / "results.json").read_text())
        assert doc["profile"]["from"] == "shipped"  # no --profile: never the fleet directory's profiles/
    finally:
        subprocess.run(["rm", "-rf", str(shared)], check=False)


SRUN_ENV = """\
name: srun-env
checks:
  - id: ranks
    kind: command
    params:
      argv: [srun, --overlap, -n, "1", {python}, -c,
            "import os; print('leaked:', sum(k in os.environ for k in ('REDFISH_PASSWORD','IPMI_PASSWORD')))"]
      metrics:
        - {{name: app.leaked, unit: count, better: lower, regex: 'leaked: (?P<value>[0-9]+)'}}
    expect:
      - {{metric: app.leaked, max: 0, unit: count}}
"""


def test_no_srun_rank_inherits_the_bmc_passwords(lab: Lab, tmp_path: Path):
    """The dispatching shell's REDFISH_PASSWORD/IPMI_PASSWORD reach the node's harness (it may read
    a BMC), but no tool: not srun, so no rank."""
    suite = tmp_path / "srun.yaml"
    suite.write_text(SRUN_ENV.format(python=sys.executable))
    out = tmp_path / "fleet"
    r = subprocess.run([sys.executable, "-m", "harness", "fleet", "run", str(suite), "--nodes", "n1",
                        "--output", str(out), "--profile", "generic", "--poll-interval", "1s", "--time", "5"],
                       env={**os.environ, **lab.env, "REDFISH_PASSWORD": "hunter2",
                            "IPMI_PASSWORD": "hunter3"},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (run_dir,) = [p for p in (out / "nodes" / "n1").iterdir() if (p / "results.json").is_file()]
    doc = json.loads((run_dir / "results.json").read_text())
    (check,) = doc["checks"]
    assert [m["value"] for m in check["metrics"] if m["name"] == "app.leaked"] == [0.0]
    assert check["status"] == "passed"
