#!/usr/bin/env python3
"""Fixed cost of a command: `harness fleet report` of a 10-node fleet (SuperBench-shaped, 476
metrics a node) and `harness run` of a one-check suite (`true`), each a fresh child, against the
bare interpreter (`python -c pass`). Prints the median wall and CPU seconds and the peak resident MiB
(ru_maxrss of the child, from wait4) over --runs alternated rounds, and the load beside them: the
machine may be shared, so compare medians of alternated runs, not one number.

Goal (issue #30): start-up on 10 nodes <= 0.4 s.

    python benchmarks/bench_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_fleet_report import make_fleet  # noqa: E402

GOAL_FLEET_S = 0.4
SUITE = 'name: one\nchecks:\n  - id: app\n    kind: command\n    params:\n      argv: ["true"]\n'


def timed(argv: list[str], cwd: Path) -> tuple[float, float, float]:
    """(wall s, peak MiB, CPU s) of one child command; SystemExit when it fails."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                                       if p)}
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    rc = os.waitstatus_to_exitcode(status)
    if rc not in (0, 1, 4):  # 1: a node rejected; 4: the `true` check is recorded, not judged
        raise SystemExit(f"{' '.join(argv)} failed (exit {rc}):\n{err.decode()[-3000:]}")
    return wall, ru.ru_maxrss / 1024, ru.ru_utime + ru.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        make_fleet(tmp / "fleet", 10, "superbench")
        (tmp / "one.yaml").write_text(SUITE)
        py = sys.executable
        cases = {
            "python -c pass": lambda i: [py, "-c", "pass"],
            "harness fleet report (10 nodes)": lambda i: [py, "-m", "harness", "fleet", "report",
                                                          str(tmp / "fleet")],
            "harness run (one `true` check)": lambda i: [py, "-m", "harness", "run", "one.yaml", "--output",
                                                         str(tmp / f"out{i}"), "--history", "off"],
        }
        got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cases}
        for i in range(args.runs):
            names = list(cases) if i % 2 == 0 else list(reversed(cases))
            for name in names:
                got[name].append(timed(cases[name](i), tmp))
        print(f"load {os.getloadavg()[0]:.1f} (2-core machine shared: figures are noisy)")
        for name, runs in got.items():
            walls, cpu, mib = [w for w, _, _ in runs], [c for _, _, c in runs], [m for _, m, _ in runs]
            print(f"{name}: median {statistics.median(walls):.3f} s wall (min {min(walls):.3f}), "
                  f"{statistics.median(cpu):.3f} s CPU, peak {max(mib):.0f} MiB over {len(runs)} runs")
        fleet = statistics.median(w for w, _, _ in got["harness fleet report (10 nodes)"])
        met = fleet <= GOAL_FLEET_S
        print(f"goal fleet report of 10 nodes <= {GOAL_FLEET_S} s: {fleet:.3f} s "
              f"{'met' if met else 'MISSED'}")
        return 0 if met else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
