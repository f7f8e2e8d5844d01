#!/usr/bin/env python3
"""`harness fleet report` over synthetic fleets of 1,000 and 2,000 nodes (10,000 with --big), timed
against the floor of reading the data: a bare Python loop that json.loads every node's results.json.

Two fleet shapes, both SYNTHETIC and written as full RunRecords on disk:

- "harness": the metrics the project's own parsers read from real captured tool output in
  tests/data (nvbandwidth and nccl-tests on 8x H100, nvidia-smi -q of one H200 replicated to 8 GPUs,
  fio 3.33), each node with +-1 % noise; a few nodes get one planted outlier each (a series moved
  30 % to its bad side) and two nodes a failed check.
- "superbench": SuperBench's default 8-GPU set as catalogue series (GEMM TFLOPS per precision and
  GPU, H2D/D2H/D2D and P2P bandwidth and latency, NCCL bus/alg bandwidth and time per op and size,
  IB loopback, disk, GPU burn, ...): 476 metrics a node, 10 planted problems per 1,000 nodes (a
  series 30 % to its bad side), and a control node at the edge of the noise (+-1 %) that must be
  left alone.

Each report is a fresh child `python -m harness fleet report DIR` (fleet-jobs.json says COMPLETED,
so no Slurm is asked); its wall time, CPU time and peak resident memory (ru_maxrss of that child,
from wait4) are printed beside the floor's, run the same way in its own child, and the ratio of each
(CPU is the steadier one on a shared machine). The check: every planted problem is in fleet.json,
no other node is flagged or rejected, the control node ACCEPTED.

The figures are of a shared machine: print them with the load (os.getloadavg) beside them and
compare alternated runs, not one number. 10,000 nodes take minutes to generate and report on a
busy 2-core machine: --big adds them.

Goals (issue #30): <= 2.0x the bare read at 1,000 nodes; 2,000/1,000 <= 2.0; 10,000 nodes
<= 15 s wall with <= 250 MiB; every planted problem found, no false positive, the control left alone.

    python benchmarks/bench_fleet_report.py [--shape superbench harness] [--nodes 1000 2000] [--big]
        [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import catalog, results  # noqa: E402
from harness.fleet import layout  # noqa: E402
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
GOAL_RATIO_1000, GOAL_GROWTH, GOAL_BIG_S, GOAL_BIG_MIB = 2.0, 2.0, 15.0, 250
INVENTORY = {"host": {"hostname": "synthetic"}, "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480+",
                                                        "online": 224},
             "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3"} for i in range(8)]}
SB_METRICS = 476  # SuperBench's default set on one 8-GPU node, as `sb result diagnosis` reads it
CONTROL = "control"
Base = list[tuple[str, str, list[Metric]]]


def base_checks() -> Base:
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


def plantable(base: Base) -> list[tuple[str, int]]:
    """(check, metric index) of series with a direction and a value far from zero."""
    return [(c, i) for c, _, ms in base for i, m in enumerate(ms)
            if better(m.name) in ("higher", "lower") and abs(m.value) > 1.0]

def superbench_checks() -> Base:
    """SuperBench's default benchmarks on an 8x H100 node as catalogue series: 476 metrics."""
    gpus = range(8)
    m = Metric
    sizes = [2 ** k for k in range(10, 34, 3)]  # 1 KiB .. 8 GiB, 8 sizes
    checks: Base = [
        ("gemm-flops", "command", [m("gpu.tflops", t, "TFLOPS", {"gpu": g, "precision": p})
                                   for p, t in (("fp64", 60.0), ("fp32", 60.0), ("tf32", 400.0),
                                                ("fp16", 720.0), ("bf16", 720.0), ("fp8", 1400.0),
                                                ("int8", 1400.0), ("fp64_tc", 59.0)) for g in gpus]),
        ("mem-bw", "command", [m(n, v, "GB/s", {"gpu": g}) for n, v in
                               (("gpu.h2d_bw", 55.0), ("gpu.d2h_bw", 55.0), ("gpu.d2d_bw", 2900.0))
                               for g in gpus]),
        ("gpu-copy-bw", "command", [m(n, v, u, {"src": a, "dst": b}) for n, v, u in
                                    (("gpu.p2p_bw", 390.0, "GB/s"), ("gpu.p2p_lat", 2.5, "us"))
                                    for a in gpus for b in gpus if a != b]),
        ("nccl-bw", "command", [m(n, v * min(1.0, s / 2 ** 28) + 1.5, u, {"op": op, "size": s})
                                for op in ("all_reduce", "all_gather", "reduce_scatter", "alltoall",
                                           "broadcast") for s in sizes
                                for n, v, u in (("nccl.busbw", 480.0, "GB/s"), ("nccl.algbw", 260.0, "GB/s"),
                                                ("nccl.time", 9000.0, "us"))]),
        ("ib-loopback", "command", [m("rdma.bw_avg", 48.0, "GB/s", {"hca": f"mlx5_{h}", "size": s})
                                    for h in range(8) for s in (8192, 65536, 1048576, 8388608)]
         + [m("rdma.lat_avg", 3.1, "us", {"hca": f"mlx5_{h}"}) for h in range(8)]),
        ("disk", "command", [m(n, v, u, {"disk": f"nvme{d}n1", "job": j}) for d in range(4)
                             for j in ("seqread", "seqwrite", "randread", "randwrite")
                             for n, v, u in (("fio.bw", 6.5, "GB/s"), ("fio.iops", 900000.0, "IOPS"),
                                             ("fio.clat_p99", 180.0, "us"))]),
        ("gpu-burn", "command", [m(n, v, u, {"gpu": g}) for n, v, u in
                                 (("gpu_burn.tflops", 650.0, "TFLOPS"), ("gpu_burn.temp_max", 71.0, "C"),
                                  ("gpu.sm_clock_mean", 1980.0, "MHz"), ("gpu.temp_max", 68.0, "C"))
                                 for g in gpus]),
        ("nvbandwidth", "command", [m("gpu.host_lat", 1.8, "us", {"gpu": g}) for g in gpus]
         + [m("net.tcp_bw", 11.5, "GB/s", {"nic": f"eth{e}"}) for e in range(8)]),
    ]
    have = sum(len(ms) for _, _, ms in checks)
    pad = [m("gpu.mem_temp_max", 60.0 + k % 7, "C", {"gpu": k % 8, "probe": k // 8})
           for k in range(SB_METRICS - have)]
    checks.append(("cpu-memory", "command", pad))
    assert sum(len(ms) for _, _, ms in checks) == SB_METRICS, have
    return checks


def node_record(node: str, base: Base, rng: random.Random, plant: tuple[str, int] | None, fail: bool,
                edge: bool = False) -> RunRecord:
    """One node's run: every metric +-1 % (`edge`: every one 1 % to its bad side), `plant` 30 %."""
    checks = []
    for check, kind, metrics in base:
        ms = []
        for i, m in enumerate(metrics):
            bad = 1 if better(m.name) == "lower" else -1
            v = m.value * (1 + (0.01 * bad if edge else rng.uniform(-0.01, 0.01))) if m.value else m.value
            if plant == (check, i):
                v = m.value * (1 + 0.3 * bad)
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


@dataclass(frozen=True)
class Fleet:
    base: Base
    planted: set[tuple[str, str, int]]  # (node, check, metric index)
    failing: set[str]  # nodes with a failed check
    control: str | None


def make_fleet(root: Path, n: int, shape: str, seed: int = 7) -> Fleet:
    """Write a fleet directory of n nodes of `shape` ('harness' or 'superbench')."""
    rng = random.Random(seed)
    base = superbench_checks() if shape == "superbench" else base_checks()
    candidates = plantable(base)
    nodes = [f"gpu{i:05d}" for i in range(n - (shape == "superbench"))]
    n_plant = max(1, n // 100) if shape == "superbench" else 10
    picked = rng.sample(nodes, n_plant + (2 if shape == "harness" else 0))
    planted = {(nd, *rng.choice(candidates)) for nd in picked[:n_plant]}
    failing = set(picked[n_plant:])
    control = None
    if shape == "superbench":
        control = CONTROL
        nodes.insert(rng.randrange(len(nodes)), control)
    plant_of = {p[0]: (p[1], p[2]) for p in planted}
    jobs, seen = {}, {}
    for i, nd in enumerate(nodes):
        rec = node_record(nd, base, rng, plant_of.get(nd), nd in failing, edge=nd == control)
        run_dir = layout.node_dir(root, nd) / rec.run_id
        run_dir.mkdir(parents=True)
        results.write(run_dir, rec, durable=False)
        jobs[nd] = NodeJob(nd, str(1000 + i))
        seen[nd] = SeenJob(JobInfo(str(1000 + i), "COMPLETED", "", nd, f"harness-{nd}", 0, 0),
                           "2026-11-29T10:31:00Z")
    layout.save_manifest(root, Manifest("/synthetic.yaml", "synthetic-fleet", None, tuple(nodes),
                                        "2026-11-29T10:00:00Z", jobs))
    layout.save_jobs(root, seen)
    return Fleet(base, planted, failing, control)


FLOOR = """import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob('nodes/*/*/results.json')):
    with open(p, 'rb') as f:
        json.load(f)
"""


def timed(argv: list[str]) -> dict[str, float]:
    """Wall and CPU seconds and peak resident MiB (ru_maxrss from wait4) of one child command."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                                       if p)}
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):  # 1: the fleet holds a rejected node
        raise SystemExit(f"{argv[:4]} failed (exit {proc.returncode}):\n{err.decode()[-3000:]}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "maxrss_mib": ru.ru_maxrss / 1024}


def check(fleet_dir: Path, fleet: Fleet) -> list[str]:
    """What fleet.json got wrong: a planted problem missed, a node flagged or judged that should not be."""
    doc = json.loads((fleet_dir / "fleet.json").read_text())
    found = {(o["node"], o["check"], o["metric"], tuple(sorted(o["labels"].items())))
             for o in doc["outliers"]}
    wrong = []
    want_nodes = set()
    for nd, chk, i in sorted(fleet.planted):
        m = next(ms for c, _, ms in fleet.base if c == chk)[i]
        key = (nd, chk, m.name, tuple(sorted((k, str(v)) for k, v in m.labels.items())))
        want_nodes.add(nd)
        if key not in found:
            wrong.append(f"MISSED {key}")
    for nd in sorted({o["node"] for o in doc["outliers"]} - want_nodes):
        wrong.append(f"FALSE POSITIVE outlier on {nd}")
    status = {n["node"]: n["status"] for n in doc["nodes"]}
    for nd, st in sorted(status.items()):
        if (st == "REJECTED") != (nd in fleet.failing) or st not in ("REJECTED", "ACCEPTED"):
            wrong.append(f"node {nd} is {st}")
    if fleet.control is not None and status.get(fleet.control) != "ACCEPTED":
        wrong.append(f"control node {fleet.control} is {status.get(fleet.control)}")
    return wrong


def run(n: int, shape: str, keep: bool) -> tuple[dict[str, float], float, bool]:
    """The report's figures, its ratio to the bare read, and whether fleet.json is right, for n nodes."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-fleet-{shape}-{n}-"))
    try:
        t0 = time.monotonic()
        fleet = make_fleet(tmp, n, shape)
        os.sync()  # the nodes wrote their results long before a report: no flush of them is timed
        gen = time.monotonic() - t0
        mb = sum(p.stat().st_size for p in tmp.glob("nodes/*/*/results.json")) / 1e6
        floor = timed([sys.executable, "-c", FLOOR, str(tmp)])
        fig = timed([sys.executable, "-m", "harness", "fleet", "report", str(tmp)])
        wrong = check(tmp, fleet)
        ratio = fig["wall_s"] / floor["wall_s"]
        per_node = sum(len(ms) for _, _, ms in fleet.base)
        print(f"{shape} {n} nodes ({per_node} metrics/node, {mb:.0f} MB of results.json, generated in "
              f"{gen:.0f} s; load {os.getloadavg()[0]:.1f}): report {fig['wall_s']:.2f} s wall / "
              f"{fig['cpu_s']:.2f} s CPU, peak {fig['maxrss_mib']:.0f} MiB; bare json.load "
              f"{floor['wall_s']:.2f} s wall / {floor['cpu_s']:.2f} s CPU, {floor['maxrss_mib']:.0f} MiB; "
              f"ratio {ratio:.2f}x wall, {fig['cpu_s'] / floor['cpu_s']:.2f}x CPU; planted "
              f"{len(fleet.planted)}, wrong {len(wrong)}", flush=True)
        for w in wrong:
            print(f"  {w}")
        return fig, ratio, not wrong
    finally:
        if keep:
            print(f"  kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", nargs="+", choices=("superbench", "harness"),
                    default=["superbench", "harness"])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1000, 2000])
    ap.add_argument("--big", action="store_true", help="also 10,000 nodes (minutes on a busy 2-core machine)")
    ap.add_argument("--keep", action="store_true", help="keep the generated fleet directories")
    args = ap.parse_args()
    sizes = [*args.nodes, *([10000] if args.big and 10000 not in args.nodes else [])]
    ok = True
    for shape in args.shape:
        figs: dict[int, dict[str, float]] = {}
        for n in sizes:
            figs[n], ratio, right = run(n, shape, args.keep)
            ok &= right
            if n == 1000:
                met = ratio <= GOAL_RATIO_1000
                ok &= met
                print(f"  goal {shape} 1000 nodes <= {GOAL_RATIO_1000}x the bare read: {ratio:.2f}x "
                      f"{'met' if met else 'MISSED'}")
            if n == 10000:
                met = figs[n]["wall_s"] <= GOAL_BIG_S and figs[n]["maxrss_mib"] <= GOAL_BIG_MIB
                ok &= met
                print(f"  goal {shape} 10000 nodes <= {GOAL_BIG_S:g} s, <= {GOAL_BIG_MIB} MiB: "
                      f"{'met' if met else 'MISSED'}")
        if 1000 in figs and 2000 in figs:
            growth = figs[2000]["wall_s"] / figs[1000]["wall_s"]
            ok &= growth <= GOAL_GROWTH
            print(f"  goal {shape} 2000/1000 <= {GOAL_GROWTH}x: {growth:.2f}x "
                  f"{'met' if growth <= GOAL_GROWTH else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
