#!/usr/bin/env python3
"""What a node's history costs each run: RunHistory.annotate (read the node's earlier runs, pick
go-live and previous, trends, events) on a store holding 1, 50, 200 and 400 earlier runs of one
node (a lab node that runs daily CI has ~400 after a year), with its ratio to the first.

The record is one real run of the quick fio suite (`harness run`, into a temporary directory),
stored again under new run ids and start times; eight GPUs are added to its inventory, as a GPU
node's identity has them.

    python benchmarks/bench_history.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import results  # noqa: E402
from harness.history import record as hist  # noqa: E402
from harness.model import RunRecord  # noqa: E402

SIZES = (1, 50, 200, 400)
SUITE = """name: quick
checks:
  - id: fio
    kind: fio
    params:
      jobs:
        - {name: randread_4k, rw: randread, bs: 4k, iodepth: 8, runtime: 1, size: 16M}
"""


def one_run(tmp: Path) -> RunRecord:
    suite = tmp / "quick.yaml"
    suite.write_text(SUITE)
    out = tmp / "reports"
    res = subprocess.run([sys.executable, "-m", "harness", "run", str(suite), "--profile", "generic",
                          "--output", str(out), "--history", "off"], cwd=ROOT, capture_output=True,
                         text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                                         "HARNESS_LOCK_FILE": str(tmp / "run.lock"),
                                         "HARNESS_CONTENTION": "record"})
    run_dir = next((d for d in out.iterdir() if d.is_dir() and not d.name.startswith(".")), None)
    if run_dir is None:
        raise SystemExit(f"harness run wrote no run (exit {res.returncode}): {res.stderr[-400:]}")
    record = results.load(run_dir)
    gpus = [{"index": i, "name": "NVIDIA H200", "serial": str(1753724031847 + i),
             "uuid": f"GPU-cb3dfa52-e2f3-9ca4-a399-7d1604{i:06x}", "vbios": "96.00.A5.00.01"}
            for i in range(8)]
    return replace(record, inventory={**record.inventory, "gpus": gpus})


def at(record: RunRecord, i: int) -> RunRecord:
    day = i % 365
    return replace(record, run_id=f"bench-{i:05d}",
                   started=f"2026-{1 + day // 31 % 12:02d}-{1 + day % 28:02d}T{i // 365 % 24:02d}:00:00Z")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7, help="annotations timed at each size (median)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-history-") as t:
        tmp = Path(t)
        record = one_run(tmp)
        store, run_dir = tmp / "history.sqlite", tmp / "reports"
        stored, first = 0, None
        for n in SIZES:
            for i in range(stored, n):
                h = hist.RunHistory(store)
                h.annotate(at(record, i))
                h.keep(at(record, i), run_dir)
            stored = n
            times = []
            for k in range(args.repeat):
                h = hist.RunHistory(store)
                now = replace(at(record, 10**5 + k), started="2027-06-01T00:00:00Z")
                t0 = time.perf_counter()
                h.annotate(now)
                times.append(time.perf_counter() - t0)
                h.close()
            ms = statistics.median(times) * 1000
            first = first or ms
            print(f"{n:4d} earlier runs: annotate {ms:6.2f} ms  ({ms / first:.1f}x the first run's; "
                  f"{(ms - first) / max(n - 1, 1) * 1000:.0f} us per earlier run)")


if __name__ == "__main__":
    main()
