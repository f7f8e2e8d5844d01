#!/usr/bin/env python3
"""How good the time estimates are: the dry run's and the progress line's "about N s" against
the real run's wall time, per check and in all (issue #28: within 25 % on this machine's disk).

For each suite (default: smoke and quick) and round: `harness run SUITE --dry-run` gives the
total ("time    about N s in all"); `harness run SUITE --output TMP --history off` gives each
check's estimate (its progress line: "started (timeout T s, about N s)"), its duration
(results.json) and the run's wall time. For fio, its JSON names how much of that the jobs ran
(the rest is start-up, laying out files and removing them). The load average is printed with
every round: the machine may be shared, so quote the range over the rounds, not one number (a
check the contention gate errored still shows its times; a wait for competing load to go is
outside every estimate).
No assert on time: this prints.

    python benchmarks/bench_estimates.py [--suite smoke quick] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.25
TOTAL = re.compile(r"^time +about (\d+) s in all", re.M)
STARTED = re.compile(r"\] (\S+) \((\w+)\) started \(timeout [^,)]+(?:, about (\d+) s)?\)")
SETTLE_S = 1.0


def harness_cmd() -> list[str]:
    """The installed `harness` console script, else `python -m harness` from this checkout."""
    exe = shutil.which("harness")
    return [exe] if exe else [sys.executable, "-m", "harness"]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run(argv: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    path = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p), "HARNESS_HISTORY": "off"}
    t0 = time.perf_counter()
    res = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    return time.perf_counter() - t0, res


def fio_runtime_s(run_dir: Path, check_id: str) -> float | None:
    """Seconds fio's jobs ran (job_runtime, ms, summed), from the check's fio JSON."""
    try:
        doc = json.loads((run_dir / "raw" / check_id / "fio.json").read_text())
    except (OSError, ValueError):
        return None
    return sum(j.get("job_runtime", 0) for j in doc.get("jobs", [])) / 1000


def ratio(est: float | None, real: float) -> str:
    if est is None or real <= 0:
        return "     —"
    r = est / real
    return f"{r:6.2f}" + ("" if abs(r - 1) <= GOAL else "  *")


def one_round(suite: str, n: int) -> None:
    _, dry = run([*harness_cmd(), "run", suite, "--dry-run"])
    m = TOTAL.search(dry.stdout)
    if dry.returncode != 0 or m is None:
        raise SystemExit(f"dry run of {suite} failed (exit {dry.returncode}):\n"
                         f"{dry.stdout[-600:]}{dry.stderr[-600:]}")
    total_est = float(m.group(1))
    with tempfile.TemporaryDirectory(prefix="bench-est-") as tmp:
        os.sync()
        time.sleep(SETTLE_S)
        before = load()
        wall, res = run([*harness_cmd(), "run", suite, "--output", tmp])
        if res.returncode not in (0, 1, 3) or not list(Path(tmp).glob("*/results.json")):
            raise SystemExit(f"harness run {suite} exit {res.returncode}:\n{res.stderr[-800:]}")
        (doc_path,) = Path(tmp).glob("*/results.json")
        doc = json.loads(doc_path.read_text())
        ests = {cid: (float(e) if e else None) for cid, _k, e in STARTED.findall(res.stderr)}
        waited = "; waited for competing load first" if "waiting up to" in res.stderr else ""
        print(f"{suite} round {n}: exit {res.returncode}, load {before} before, {load()} after{waited}")
        print(f"  {'check':16} {'status':8} {'estimate':>9} {'real':>8} {'ratio':>6}  fio jobs ran")
        for c in doc["checks"]:
            est, real = ests.get(c["id"]), float(c.get("duration_s") or 0.0)
            fio = fio_runtime_s(doc_path.parent, c["id"]) if c["kind"] == "fio" else None
            extra = f"  {fio:.1f} s (+{real - fio:.1f} s start-up, layout, removal)" if fio else ""
            shown = f"{est:7.0f} s" if est is not None else "        —"
            print(f"  {c['id']:16} {c['status']:8} {shown} {real:6.1f} s {ratio(est, real)}{extra}")
        print(f"  {'total (dry run)':25} {total_est:7.0f} s {wall:6.1f} s {ratio(total_est, wall)}"
              "  (wall of the whole `harness run`)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", nargs="+", default=["smoke", "quick"])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"harness = {' '.join(harness_cmd())}; tmp in {tempfile.gettempdir()}; "
          f"* marks a ratio outside 1 ± {GOAL:.0%}")
    for i in range(args.rounds):
        for suite in args.suite:
            one_round(suite, i + 1)


if __name__ == "__main__":
    main()
