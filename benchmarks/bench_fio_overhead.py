#!/usr/bin/env python3
"""Overhead of the harness around fio, and the start-up time of `harness --help`.

Runs one fio job (randread 4k, QD32, 5 s, 256M file in a fresh temporary directory) two ways,
alternating: inside a one-check suite under `harness run SUITE --profile generic --output DIR`
(one DIR for every run, as an operator's reports/ directory is),
and bare, with the very argv the fio check kind plans (placeholders filled in). Prints every
wall time, the medians and the ratio harness/bare (goal <= 1.05x), then the median start-up time
of `harness --help` over 10 runs (goal <= 0.3 s).

    python benchmarks/bench_fio_overhead.py [--rounds 3] [--runtime 5] [--bare-only]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.checks.fio import KIND, FioParams  # noqa: E402

RATIO_GOAL = 1.05
HELP_GOAL_S = 0.3
SUITE = """name: bench
checks:
  - id: fio
    kind: fio
    params:
      jobs:
        - {{name: randread_4k, rw: randread, bs: 4k, iodepth: 32, runtime: {runtime}, size: 256M}}
"""


def harness_cmd() -> list[str]:
    """The installed `harness` console script, else `python -m harness` from this checkout."""
    exe = shutil.which("harness")
    return [exe] if exe else [sys.executable, "-m", "harness"]


def job_params(runtime: int) -> FioParams:
    return FioParams.model_validate({"jobs": [{"name": "randread_4k", "rw": "randread", "bs": "4k",
                                               "iodepth": 32, "runtime": runtime, "size": "256M"}]})


def timed(argv: list[str]) -> tuple[float, int, str]:
    """Wall time, exit status and output tail of one run (from this checkout, so that
    `python -m harness` finds the package even when it is not installed)."""
    path = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    t0 = time.perf_counter()
    res = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    return time.perf_counter() - t0, res.returncode, (res.stderr + res.stdout).strip()[-600:]


def bare_fio(params: FioParams, work: Path) -> float:
    """One bare fio run with the check's planned argv, in a fresh directory like the check's."""
    (cmd,) = KIND.plan(params, {})
    scratch = Path(tempfile.mkdtemp(prefix="harness-fio-", dir=tempfile.gettempdir()))
    raw = work / "bare-raw"
    raw.mkdir(exist_ok=True)
    argv = [a.replace("<tmpdir>", str(scratch)).replace("<raw_dir>", str(raw)) for a in cmd.argv]
    try:
        wall, rc, tail = timed(argv)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if rc != 0:
        raise SystemExit(f"bare fio failed (exit {rc}): {' '.join(argv)}\n{tail}")
    return wall


def harness_run(suite: Path, out: Path) -> float:
    """One `harness run` into `out`; fails loudly unless its fio check really ran and measured.

    Every run shares one output directory, as an operator's reports/ is: its history store and
    compiled-template cache are warm after the first run, as they are in use."""
    before = set(out.glob("*/results.json"))
    wall, rc, tail = timed([*harness_cmd(), "run", str(suite), "--profile", "generic",
                            "--output", str(out)])
    results = sorted(set(out.glob("*/results.json")) - before)
    checks = json.loads(results[0].read_text())["checks"] if results else []
    fio = next((c for c in checks if c.get("id") == "fio"), None)
    if fio is None or fio["status"] not in ("passed", "recorded", "warned", "failed") or not fio["metrics"]:
        why = f"check status {fio['status']}: {fio.get('message')}" if fio else "no results.json"
        raise SystemExit(f"harness run did not measure (exit {rc}, {why}):\n{tail}")
    return wall


def help_startup(runs: int) -> list[float]:
    cmd = [*harness_cmd(), "--help"]
    times = []
    for _ in range(runs):
        wall, rc, tail = timed(cmd)
        if rc != 0:
            raise SystemExit(f"{' '.join(cmd)} failed (exit {rc}):\n{tail}")
        times.append(wall)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="runs of each kind (default 3)")
    ap.add_argument("--runtime", type=int, default=5, help="fio job runtime in seconds (default 5)")
    ap.add_argument("--help-runs", type=int, default=10, help="runs of `harness --help` (default 10)")
    ap.add_argument("--bare-only", action="store_true", help="time bare fio only (no harness CLI)")
    args = ap.parse_args()
    if shutil.which("fio") is None:
        raise SystemExit("fio not found; install it with: apt-get install fio")

    params = job_params(args.runtime)
    with tempfile.TemporaryDirectory(prefix="bench-fio-") as tmp:
        work = Path(tmp)
        suite = work / "bench.yaml"
        suite.write_text(SUITE.format(runtime=args.runtime))
        print(f"suite {suite}; harness = {' '.join(harness_cmd())}; fio job: "
              f"randread 4k QD32, {args.runtime} s, 256M in {tempfile.gettempdir()}")
        bare: list[float] = []
        wrapped: list[float] = []
        for i in range(args.rounds):
            order = ["bare", "harness"] if i % 2 == 0 else ["harness", "bare"]
            if args.bare_only:
                order = ["bare"]
            for which in order:
                t = bare_fio(params, work) if which == "bare" else harness_run(suite, work / "reports")
                (bare if which == "bare" else wrapped).append(t)
                print(f"round {i + 1}  {which:8s} {t:7.3f} s")
        mb = statistics.median(bare)
        print(f"median bare    {mb:7.3f} s  ({len(bare)} runs)")
        ok = True
        if wrapped:
            mh = statistics.median(wrapped)
            ratio = mh / mb
            ok = ratio <= RATIO_GOAL
            print(f"median harness {mh:7.3f} s  ({len(wrapped)} runs)")
            print(f"ratio harness/bare {ratio:.3f}x  (goal <= {RATIO_GOAL}x: {'met' if ok else 'MISSED'})")
    if not args.bare_only:
        times = help_startup(args.help_runs)
        mh = statistics.median(times)
        met = mh <= HELP_GOAL_S
        ok = ok and met
        print(f"`harness --help` start-up: median {mh:.3f} s over {len(times)} runs "
              f"(min {min(times):.3f}, max {max(times):.3f}; goal <= {HELP_GOAL_S} s: "
              f"{'met' if met else 'MISSED'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
