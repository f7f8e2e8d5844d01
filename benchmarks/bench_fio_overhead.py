#!/usr/bin/env python3
"""Overhead of the harness around fio, and the start-up time of `harness --help`.

Runs one fio job (randread 4k, QD32, 5 s, in a fresh temporary directory) two ways, alternating:
inside a one-check suite under `harness run SUITE --profile generic --output DIR` (one DIR for
every run, as an operator's reports/ directory is), and bare, with the very argv the fio check
kind plans (placeholders filled in), so both lay the file out fresh and both have fio remove it.
Two cases: `small` (a 256M file) and `fresh-3g` (a 3 GiB file, whose layout is most of the run;
issue #18). Prints every wall time, the medians, the ratio harness/bare (goal <= 1.05x) and the
harness's own seconds (harness wall minus the fio run it recorded), then the median start-up time
of `harness --help` over 10 runs (goal <= 0.3 s).

The harness's modules are byte-compiled first, as `pip install` does (this matters where
PYTHONDONTWRITEBYTECODE is set: each run would compile them again).

    python benchmarks/bench_fio_overhead.py [--case small fresh-3g] [--rounds 3] [--runtime 5]
                                            [--bare-only]
"""

from __future__ import annotations

import argparse
import compileall
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
CASES = {"small": "256M", "fresh-3g": "3G"}  # file size of the one job
SETTLE_S = 1.0
SUITE = """name: bench
checks:
  - id: fio
    kind: fio
    params:
      jobs:
        - {{name: randread_4k, rw: randread, bs: 4k, iodepth: 32, runtime: {runtime}, size: {size}}}
"""


def harness_cmd() -> list[str]:
    """The installed `harness` console script, else `python -m harness` from this checkout."""
    exe = shutil.which("harness")
    return [exe] if exe else [sys.executable, "-m", "harness"]


def job_params(runtime: int, size: str) -> FioParams:
    return FioParams.model_validate({"jobs": [{"name": "randread_4k", "rw": "randread", "bs": "4k",
                                               "iodepth": 32, "runtime": runtime, "size": size}]})


def timed(argv: list[str], settle: bool = True) -> tuple[float, int, str]:
    """Wall time, exit status and output tail of one run (from this checkout, so that
    `python -m harness` finds the package even when it is not installed). The disk is synced
    and left to settle first: no run pays for the writeback or discards of the one before."""
    path = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    if settle:
        os.sync()
        time.sleep(SETTLE_S)
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


def harness_run(suite: Path, out: Path) -> tuple[float, float]:
    """One `harness run` into `out` (wall s, fio's own s as recorded); fails loudly unless its fio
    check really ran and measured.

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
    return wall, sum(t["duration_s"] for t in fio["tool_runs"])


def help_startup(runs: int) -> list[float]:
    cmd = [*harness_cmd(), "--help"]
    times = []
    for _ in range(runs):
        wall, rc, tail = timed(cmd, settle=False)
        if rc != 0:
            raise SystemExit(f"{' '.join(cmd)} failed (exit {rc}):\n{tail}")
        times.append(wall)
    return times


def case(name: str, rounds: int, runtime: int, bare_only: bool) -> bool:
    """One case, `rounds` runs of each kind alternating; True when the ratio goal is met."""
    params = job_params(runtime, CASES[name])
    with tempfile.TemporaryDirectory(prefix="bench-fio-") as tmp:
        work = Path(tmp)
        suite = work / "bench.yaml"
        suite.write_text(SUITE.format(runtime=runtime, size=CASES[name]))
        print(f"case {name}: fio job randread 4k QD32, {runtime} s, {CASES[name]} laid out fresh in "
              f"{tempfile.gettempdir()}; harness = {' '.join(harness_cmd())}")
        bare: list[float] = []
        wrapped: list[float] = []
        own: list[float] = []
        for i in range(rounds):
            order = ["bare", "harness"] if i % 2 == 0 else ["harness", "bare"]
            for which in ["bare"] if bare_only else order:
                if which == "bare":
                    bare.append(bare_fio(params, work))
                    print(f"round {i + 1}  bare     {bare[-1]:7.3f} s")
                else:
                    t, fio_s = harness_run(suite, work / "reports")
                    wrapped.append(t)
                    own.append(t - fio_s)
                    print(f"round {i + 1}  harness  {t:7.3f} s  (fio {fio_s:.3f} s, harness's own "
                          f"{t - fio_s:.3f} s)")
        mb = statistics.median(bare)
        print(f"median bare    {mb:7.3f} s  ({len(bare)} runs)")
        if not wrapped:
            return True
        mh = statistics.median(wrapped)
        ratio = mh / mb
        paired = statistics.median(h / b for h, b in zip(wrapped, bare, strict=True))
        own_s = statistics.median(own)
        print(f"median harness {mh:7.3f} s  ({len(wrapped)} runs); harness's own {own_s:.3f} s")
        print(f"case {name}: ratio harness/bare {ratio:.3f}x  (goal <= {RATIO_GOAL}x: "
              f"{'met' if ratio <= RATIO_GOAL else 'MISSED'}); median of each round's ratio {paired:.3f}x; "
              f"(bare + harness's own) / bare {(mb + own_s) / mb:.3f}x (the disk's noise left out)",
              flush=True)
        return ratio <= RATIO_GOAL


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", nargs="+", choices=sorted(CASES), default=["small", "fresh-3g"])
    ap.add_argument("--rounds", type=int, default=5, help="runs of each kind (default 5)")
    ap.add_argument("--runtime", type=int, default=5, help="fio job runtime in seconds (default 5)")
    ap.add_argument("--help-runs", type=int, default=10, help="runs of `harness --help` (default 10)")
    ap.add_argument("--bare-only", action="store_true", help="time bare fio only (no harness CLI)")
    args = ap.parse_args()
    if shutil.which("fio") is None:
        raise SystemExit("fio not found; install it with: apt-get install fio")
    compileall.compile_dir(ROOT / "harness", quiet=1)  # as pip install does
    ok = True
    for name in args.case:
        ok &= case(name, args.rounds, args.runtime, args.bare_only)
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
