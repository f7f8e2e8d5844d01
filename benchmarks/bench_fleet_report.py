#!/usr/bin/env python3
"""Fleet report over 1,000, 2,000 and 10,000 nodes: time, peak memory, fleet.html size, and every
planted outlier found.

The fleet is SYNTHETIC, generated from real single-node results: the metrics the project's own
parsers read from real captured tool output in tests/data (nvbandwidth and nccl-tests on 8x H100,
nvidia-smi -q of one H200 replicated to 8 GPUs, fio 3.33), each node with +-1 % noise. A few nodes
get one planted outlier each (a series moved 30 % to its bad side) and two nodes get a failed
check. Every results.json is a full RunRecord on disk, read back through results.load exactly as
`harness fleet report DIR` does (fleet-jobs.json says COMPLETED, so no Slurm is asked).

Each size is reported by a fresh child process (`--child DIR`), which runs what `harness fleet
report DIR` runs (analysis, then fleet.json, junit.xml and fleet.html) and prints its wall and CPU
time and its peak resident memory (VmHWM of /proc/self/status: everything the process ever held,
interpreter and imports included, and not the parent's, which ru_maxrss carries across exec;
the figure after the imports is printed too). With --tracemalloc a second child
per size reports the peak of Python's own allocations (numpy's included), which tracemalloc slows.

Goals (issues #7, #18): 1,000 nodes <= 4 s on a 2-core machine, 2,000 nodes <= 2.2x that time;
peak memory nearly flat in the node count: <= 250 MiB at 2,000 nodes, <= 600 MiB at 10,000;
fleet.html < 15 MB up to 2,000 nodes; every planted outlier found.

    python benchmarks/bench_fleet_report.py [--nodes 1000 2000 10000] [--keep] [--tracemalloc]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import catalog, results  # noqa: E402
from harness.fleet import commands, layout  # noqa: E402
from harness.fleet.layout import Manifest, NodeJob, SeenJob  # noqa: E402
from harness.fleet.slurmtext import JobInfo  # noqa: E402
from harness.model import CheckResult, Evaluation, Metric, Outcome, RunRecord, Status  # noqa: E402
from harness.parsers.registry import parsers  # noqa: E402

DATA = ROOT / "tests" / "data"
NVBW = "nvbandwidth/nvbandwidth_v0.10.0_8x_h100_"
SOURCES = [  # (check id, parse kind, captured file, replicate per-GPU metrics of GPU 0 to 8 GPUs)
    ("nvbw-d2d", "nvbandwidth", NVBW + "d2d_memcpy_read_ce.txt", False),
    ("nvbw-d2h", "nvbandwidth", NVBW + "device_to_host_memcpy_ce.txt", False),
    ("nccl", "nccl", "nccl-tests/all_reduce_h100_2node_16rank_oci.txt", False),
    ("gpu-query", "nvidia-smi-q", "nvidia-smi/nvidia-smi_-q_h200_550.90.12.txt", True),
    ("fio", "fio", "fio/fio3.33_json_randrw_libaio_direct_tmpfile.json", False),
]
GOAL_1000_S, GOAL_RATIO, GOAL_HTML_MB, HTML_GOAL_UP_TO = 4.0, 2.2, 15.0, 2000
GOAL_MIB = {2000: 250, 10000: 600}  # peak resident memory of the report, by node count
INVENTORY = {"host": {"hostname": "synthetic"}, "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480+",
                                                        "online": 224},
             "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3"} for i in range(8)]}


def base_checks() -> list[tuple[str, str, list[Metric]]]:
    table = parsers()
    out = []
    for check, kind, rel, replicate in SOURCES:
        metrics = list(table[kind]((DATA / rel).read_text()).metrics)
        if replicate:
            gpu0 = [m for m in metrics if str(m.labels.get("gpu", "")) in ("0", "")]
            metrics = [Metric(m.name, m.value, m.unit, {**m.labels, "gpu": g}) if "gpu" in m.labels else m
                       for g in range(8) for m in gpu0 if g == 0 or "gpu" in m.labels]
        out.append((check, kind, metrics))
    return out


def better(name: str) -> str:
    spec = catalog.spec(name)
    return spec.better if spec else "none"


def plantable(base: list[tuple[str, str, list[Metric]]]) -> list[tuple[str, int]]:
    """(check, metric index) of series with a direction and a value far from zero."""
    return [(c, i) for c, _, ms in base for i, m in enumerate(ms)
            if better(m.name) in ("higher", "lower") and abs(m.value) > 1.0]


def node_record(node: str, base: list[tuple[str, str, list[Metric]]], rng: random.Random,
                plant: tuple[str, int] | None, fail: bool) -> RunRecord:
    checks = []
    for check, kind, metrics in base:
        ms = []
        for i, m in enumerate(metrics):
            v = m.value * (1 + rng.uniform(-0.01, 0.01)) if m.value else m.value
            if plant == (check, i):
                v = m.value * (0.7 if better(m.name) == "higher" else 1.3)
            ms.append(replace(m, value=v))
        status, evs = Status.PASSED, ()
        if fail and check == "nccl":
            status = Status.FAILED
            evs = (Evaluation(metric="nccl.avg_busbw", labels={}, outcome=Outcome.FAIL, severity="fail",
                              measured=10.0, unit="GB/s", reference=None, low=100.0, high=None,
                              reduce="each", message="below floor", source="profile"),)
        checks.append(CheckResult(check, kind, status, "", "2026-11-29T10:00:00Z", 1.0, tuple(ms), evs))
    return RunRecord(f"{node}-20261129T100000Z", node, {"name": "synthetic-fleet"},
                     {"name": "h100-sxm-8x"}, "2026-11-29T10:00:00Z", "2026-11-29T10:30:00Z", 1800.0,
                     INVENTORY, tuple(checks), "0.1.0")


def make_fleet(root: Path, n: int, seed: int = 7) -> set[tuple[str, str, int]]:
    """Write a fleet directory of n nodes; return the planted (node, check, metric index)."""
    rng = random.Random(seed)
    base = base_checks()
    candidates = plantable(base)
    nodes = [f"gpu{i:04d}" for i in range(n)]
    planted_nodes = rng.sample(nodes, 12)
    planted = {(nd, *rng.choice(candidates)) for nd in planted_nodes[:10]}
    failing = set(planted_nodes[10:])
    plant_of = {p[0]: (p[1], p[2]) for p in planted}
    jobs, seen = {}, {}
    for i, nd in enumerate(nodes):
        rec = node_record(nd, base, rng, plant_of.get(nd), nd in failing)
        run_dir = layout.node_dir(root, nd) / rec.run_id
        run_dir.mkdir(parents=True)
        results.write(run_dir, rec)
        jobs[nd] = NodeJob(nd, str(1000 + i))
        seen[nd] = SeenJob(JobInfo(str(1000 + i), "COMPLETED", "", nd, f"harness-{nd}", 0, 0),
                           "2026-11-29T10:31:00Z")
    layout.save_manifest(root, Manifest("/synthetic.yaml", "synthetic-fleet", None, tuple(nodes),
                                        "2026-11-29T10:00:00Z", jobs))
    layout.save_jobs(root, seen)
    return {(nd, c, i) for nd, c, i in planted}


def peak_rss_mib() -> float:
    """This process's peak resident memory: VmHWM (Linux), else ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(fleet_dir: Path, trace: bool) -> int:
    """In a fresh process: the report of `fleet_dir`, then one JSON line of figures on stdout."""
    from harness.fleet import report

    if trace:
        import tracemalloc

        tracemalloc.start()
    base_mib = peak_rss_mib()
    t0, c0 = time.monotonic(), time.process_time()
    rep = commands.analyse_dir(fleet_dir, poll=False)
    paths = report.write(fleet_dir, rep)
    took, cpu = time.monotonic() - t0, time.process_time() - c0
    peak = tracemalloc.get_traced_memory()[1] if trace else None
    print(json.dumps({"wall_s": took, "cpu_s": cpu, "verdict": rep.verdict,
                      "rejected": rep.counts["REJECTED"], "flagged": len(rep.outlier_nodes),
                      "maxrss_mib": peak_rss_mib(), "imports_mib": base_mib,
                      "tracemalloc_peak_mib": peak and peak / 2**20,
                      "sizes_mb": {k: p.stat().st_size / 1e6 for k, p in paths.items()}}))
    return 0


def in_child(fleet_dir: Path, trace: bool = False) -> dict:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", str(fleet_dir)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                                       if p)}
    res = subprocess.run([*argv, *(["--tracemalloc"] if trace else [])], capture_output=True, text=True,
                         env=env)
    if res.returncode != 0:
        raise SystemExit(f"the report child failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def missed(fleet_dir: Path, planted: set[tuple[str, str, int]]) -> list[tuple[object, ...]]:
    """The planted outliers fleet.json does not list."""
    doc = json.loads((fleet_dir / "fleet.json").read_text())
    found = {(o["node"], o["check"], o["metric"], tuple(sorted(o["labels"].items())))
             for o in doc["outliers"]}
    base = base_checks()
    out = []
    for nd, check, i in sorted(planted):
        m = next(ms for c, _, ms in base if c == check)[i]
        key = (nd, check, m.name, tuple(sorted((k, str(v)) for k, v in m.labels.items())))
        if key not in found:
            out.append(key)
    return out


def run(n: int, keep: bool, trace: bool) -> tuple[float, float, float, bool]:
    """(report wall s, peak MiB, fleet.html MB, every planted outlier found) for n nodes."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-fleet-{n}-"))
    try:
        t0 = time.monotonic()
        planted = make_fleet(tmp, n)
        os.sync()  # the nodes wrote their results long before a report: no flush of them is timed
        gen = time.monotonic() - t0
        fig = in_child(tmp)
        lost = missed(tmp, planted)
        sizes = fig["sizes_mb"]
        per_node = sum(len(ms) for _, _, ms in base_checks())
        print(f"{n} nodes: {per_node} metrics/node, generated in {gen:.1f} s; report in "
              f"{fig['wall_s']:.2f} s wall, {fig['cpu_s']:.2f} s CPU; peak RSS {fig['maxrss_mib']:.0f} MiB "
              f"({fig['imports_mib']:.0f} MiB after imports); fleet.html {sizes['html']:.2f} MB, "
              f"fleet.json {sizes['json']:.2f} MB, "
              f"junit.xml {sizes['junit']:.2f} MB; verdict {fig['verdict']} {fig['rejected']} rejected; "
              f"outliers on {fig['flagged']} node(s); planted {len(planted)}, missed {len(lost)}", flush=True)
        for key in lost:
            print(f"  MISSED {key}")
        if trace:
            t = in_child(tmp, trace=True)
            print(f"  tracemalloc peak {t['tracemalloc_peak_mib']:.0f} MiB (report {t['wall_s']:.2f} s under "
                  "tracemalloc)", flush=True)
        return fig["wall_s"], fig["maxrss_mib"], sizes["html"], not lost
    finally:
        if keep:
            print(f"  kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, nargs="+", default=[1000, 2000, 10000])
    ap.add_argument("--keep", action="store_true", help="keep the generated fleet directories")
    ap.add_argument("--tracemalloc", action="store_true", help="also report tracemalloc's peak per size")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.tracemalloc)
    times = {}
    ok = True
    for n in args.nodes:
        took, mib, size_mb, found_all = run(n, args.keep, args.tracemalloc)
        times[n] = took
        ok &= found_all and (n > HTML_GOAL_UP_TO or size_mb < GOAL_HTML_MB)
        if n in GOAL_MIB:
            met = mib <= GOAL_MIB[n]
            ok &= met
            print(f"goal {n} nodes <= {GOAL_MIB[n]} MiB: {mib:.0f} MiB {'met' if met else 'MISSED'}")
    if 1000 in times:
        ok &= times[1000] <= GOAL_1000_S
        print(f"goal 1000 nodes <= {GOAL_1000_S:g} s: {'met' if times[1000] <= GOAL_1000_S else 'MISSED'}")
        if 2000 in times:
            ratio = times[2000] / times[1000]
            ok &= ratio <= GOAL_RATIO
            verdict = "met" if ratio <= GOAL_RATIO else "MISSED"
            print(f"goal 2000/1000 <= {GOAL_RATIO}x: {ratio:.2f}x {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
