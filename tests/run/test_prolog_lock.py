"""Prolog mode (issue #20): read-only runs share the node's lock; load runs still exclude.

Several Slurm jobs starting on one node run the prolog at once; each must exit 0, or Slurm
drains the node. A run with any load-generating check still takes the lock alone.
"""

from __future__ import annotations

from pathlib import Path

from clihelp import ROOT, harness, run_dirs, write
from faulthelp import procs_with, sigkill, start, wait_for

from harness import config
from harness.checks.registry import kinds
from harness.run import plan

NAP = """\
name: nap
checks:
  - id: nap
    kind: command
    params:
      argv: [python3, -c, "import time; time.sleep(120)", "{marker}"]
      loads_node: {loads}
"""


def test_every_kind_says_whether_it_loads_the_node() -> None:
    table = kinds()
    readers = {n for n, k in table.items() if k.hooks.loads_node is False}
    assert {"config_audit", "inventory", "gpu_health", "nvme_health", "mdraid"} <= readers
    assert not {"fio", "gpu_burn", "nccl", "iperf3", "power_headroom"} & readers
    prolog = config.load_suite(ROOT / "suites" / "prolog.yaml", kinds())
    planned = plan.build(prolog, config.load_profile("generic"), (), ())
    assert not any(pc.check.kind.loads(pc.check.params) for pc in planned)
    assert table["command"].loads(table["command"].params.model_validate({"argv": ["x"]}))


def test_four_concurrent_prologs_all_pass(tmp_path: Path) -> None:
    out = tmp_path / "prolog"
    env = {"HARNESS_HISTORY": "off"}
    runs = [start("run", "prolog", "--quiet", "--profile", "generic", "--output", str(out), env=env)
            for _ in range(4)]
    results = [(p.wait(timeout=170), *p.communicate()) for p in runs]
    for rc, stdout, stderr in results:
        assert rc == 0, stdout + stderr
        assert "another run is in progress" not in stdout + stderr
    assert len(run_dirs(out)) == 4


def test_a_load_run_excludes_and_is_excluded(tmp_path: Path) -> None:
    quick = write(tmp_path / "quick.yaml", "name: q\nchecks:\n  - {id: ok, kind: command, "
                  "params: {argv: [/bin/true]}}\n")
    env = {"HARNESS_HISTORY": "off"}
    for loads in ("true", "false"):
        marker = f"nap-marker-{loads}:{tmp_path}"
        nap = write(tmp_path / f"nap-{loads}.yaml", NAP.format(marker=marker, loads=loads))
        first = start("run", str(nap), "--profile", "generic", "--output", str(tmp_path / "o1"), env=env)
        try:
            wait_for(lambda marker=marker, pid=first.pid: procs_with(marker, "python3", under=pid), 60,
                     "the nap")
            load = harness("run", str(quick), "--profile", "generic", "--output", str(tmp_path / "o2"),
                           env=env)
            reader = harness("run", "prolog", "--quiet", "--profile", "generic", "--output",
                             str(tmp_path / "o3"), env=env)
        finally:
            sigkill(first)
        assert load.returncode == 3 and "another run is in progress" in load.stderr, load.stderr
        if loads == "true":  # a load run holds it: nothing else runs
            assert reader.returncode == 3 and f"harness PID {first.pid}" in reader.stdout + reader.stderr
        else:  # a read-only run holds it: other read-only runs go on
            assert reader.returncode == 0, reader.stdout + reader.stderr
