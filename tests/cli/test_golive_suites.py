"""Issue #25's done-when: the shipped `acceptance` then `quarterly` suites, run one after the other
through `harness run` on one node, judge every `vs: golive` rule of quarterly.yaml against the
acceptance run (and a drop past a rule's limit is flagged).

The node: 8 fake H100s (NVML and the PCI bus, tests/support/nodelaunch.py), 8 NDR HCAs in a
/sys/class/infiniband tree (tests/support/ibsysfs.py), stand-in tools on PATH printing real
captures (tests/data/*/SOURCES.md): nvbandwidth (8 x H100, one capture per test, all from one
node; gpu-bandwidth runs as shipped: H2D, D2H, D2D read and write), all_reduce_perf
(8 x H100 nccl-tests), ib_write_bw (tests/support/fake_perftest.py, a real ib_write_bw report),
nvidia-smi topo -m (an 8 x H100 HGX). fio, stress-ng, the inventory and the history store are real.

The suites are the shipped files, copied as a site's ./suites (found before the shipped ones) with
only what this machine forces changed, the same in both (so pairing is as shipped):
  * lengths cut to seconds (gpu-burn duration, power-headroom duration, rdma duration_s, fio
    runtime and file size): harness.history.series.SPAN_PARAMS says they do not change what is measured;
  * gpu-burn and power-headroom's GPU load on the builtin burn's NumPy backend, one stand-in per
    fake GPU (tests/support/faultnode): there is no GPU and no real 8-GPU gpu_burn capture that
    passes; power-headroom's memory stress at 64 MiB (a shared test machine);
  * dcgm-diag is left out of the site's acceptance suite: no real dcgmi capture of 8 GPUs passes,
    and no drift rule reads it.
The profile is the test's own (no floors of a real SKU: the stand-ins' captures come from
different nodes), with the PSU block an estimate of node power needs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import fake_perftest
import ibsysfs
import pytest
import yaml
from clihelp import ROOT, results, run_dirs
from pcisysfs import gpu_addresses, lines, write_tree

DATA = ROOT / "tests" / "data"
LAUNCH = ROOT / "tests" / "support" / "nodelaunch.py"
BURN_SITE = ROOT / "tests" / "support" / "faultnode"
NVB = {"host_to_device_memcpy_ce": "nvbandwidth_v0.10.0_8x_h100_host_to_device_memcpy_ce.txt",
       "device_to_host_memcpy_ce": "nvbandwidth_v0.10.0_8x_h100_device_to_host_memcpy_ce.txt",
       "device_to_device_memcpy_read_ce": "nvbandwidth_v0.10.0_8x_h100_d2d_memcpy_read_ce.txt",
       "device_to_device_memcpy_write_ce": "nvbandwidth_v0.10.0_8x_h100_d2d_memcpy_write_ce.txt"}
NCCL = DATA / "nccl-tests" / "all_reduce_h100_2node_16rank_oci.txt"
RDMA = DATA / "perftest" / "ib_write_bw_dgx_spark_cx7_roce_4qp_report_gbits_rdma_cm.txt"
TOPO = DATA / "nvidia-smi-topo" / "topo_-m_8x_hopper_hgx_NV18_12x_mlx5_PXB_each_gpu.txt"
PROFILE = """\
name: node-under-test
hardware:
  memory_min_bytes: 1048576
  gpu: {count: 8}
  gpu_tdp_w: 700
  psu: {count: 6, rating_w: 3300, redundancy: "4+2", max_system_power_w: 10200}
"""
SHORT: dict[str, dict[str, Any]] = {
    "gpu-burn": {"engine": "builtin", "backend": "numpy", "dtype": "fp32", "size": 48, "duration": 2,
                 "telemetry_period": 0.1, "sibling_tolerance": None},
    "power-headroom": {"duration": 3, "idle": 1, "cooldown": 1, "backend": "numpy", "dtype": "fp32",
                       "size": 48, "vm_workers": 1, "vm_bytes": "64m"},
    "rdma": {"duration_s": 1},
}


def site_suite(name: str, into: Path) -> None:
    """The shipped suite `name` as a site copy, changed only as the module docstring says."""
    doc = yaml.safe_load((ROOT / "suites" / f"{name}.yaml").read_text())
    doc["checks"] = [c for c in doc["checks"] if c["id"] != "dcgm-diag"]
    for c in doc["checks"]:
        params = c.setdefault("params", {})
        if c["id"] == "gpu-burn":
            params.pop("tensor_cores", None)  # gpu_burn -tc: not the builtin engine's
        params.update(SHORT.get(c["id"], {}))
        if c["kind"] == "fio":
            params["jobs"] = [{**j, "runtime": 1, "size": "16M"} for j in params["jobs"]]
    into.mkdir(exist_ok=True)
    (into / f"{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def executable(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def tools(bins: Path, captures: Path, log: Path) -> None:
    """Stand-ins on PATH printing the captures in `captures` (real ones, or edited: degrade())."""
    bins.mkdir(parents=True, exist_ok=True)
    cases = "".join(f'  {t}) cat "{captures / f}";;\n' for t, f in NVB.items())
    unknown = '  *) echo "ERROR: no test $2" >&2; exit 1;;\n'
    executable(bins / "nvbandwidth", f'case "$2" in\n{cases}{unknown}esac\n')
    executable(bins / "all_reduce_perf", f'cat "{captures / NCCL.name}"\n')
    executable(bins / "nvidia-smi", f'cat "{TOPO}"\n')
    fake_perftest.write_fake(bins / "ib_write_bw", captures / RDMA.name, log=log)


def real_captures(into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    for src in [DATA / "nvbandwidth" / f for f in NVB.values()] + [NCCL, RDMA]:
        (into / src.name).write_text(src.read_text())
    return into


def degrade(into: Path) -> Path:
    """The real captures with three faults a quarter brought: GPU 3's D2H at half (a PCIe link
    trained down to x8), GPU 6's H2D 10% down (a replaced riser) and every HCA's ib_write_bw
    average at half (a cable at half rate)."""
    real_captures(into)
    h2d = into / NVB["host_to_device_memcpy_ce"]
    text = h2d.read_text()
    row = re.search(r"^ 0 +(?:\S+ +){6}(55\.36)", text, re.M)
    assert row, "the H2D capture's row changed"
    h2d.write_text(text[:row.start(1)] + "49.82" + text[row.end(1):])
    d2h = into / NVB["device_to_host_memcpy_ce"]
    text = d2h.read_text()
    row = re.search(r"^ 0 +(?:\S+ +){3}(55\.18)", text, re.M)
    assert row, "the D2H capture's row changed"
    d2h.write_text(text[:row.start(1)] + "27.59" + text[row.end(1):])
    rdma = into / RDMA.name
    rdma.write_text(rdma.read_text().replace("111.71", " 55.85"))
    return into


class Node:
    """One node: its fake GPUs, HCAs and PCI bus, its history store, and `harness run` on it."""

    def __init__(self, tmp_path: Path, fresh: bool = True) -> None:
        """`fresh`: build the node in `tmp_path`; else use the one a copy of such a folder holds."""
        self.tmp = tmp_path
        self.spec = tmp_path / "node.json"
        if not fresh:
            return
        ib = tmp_path / "ib"
        for dev in ibsysfs.IB_NDR:
            (ib / dev).mkdir(parents=True)
            (ib / dev / "fw_ver").write_text("28.39.1002\n")
            ibsysfs.write_port(ib, dev, 1, "Active", "LinkUp", "400", "InfiniBand", ibsysfs.zero_counters())
        idle = {"name": "NVIDIA H100 80GB HBM3", "util": 0.0, "temp": 35.0}  # settled at once
        self.spec.write_text(json.dumps({
            "gpus": [idle] * 8, "bus_ids": [a[4:] for a in gpu_addresses()],
            "pci_root": str(write_tree(tmp_path / "pci", lines())), "ib_root": str(ib)}))
        (tmp_path / "profile.yaml").write_text(PROFILE)
        for name in ("acceptance", "quarterly"):
            site_suite(name, tmp_path / "suites")

    def run(self, suite: str, captures: Path) -> dict[str, Any]:
        bins = self.tmp / f"bin-{suite}"
        tools(bins, captures, self.tmp / f"perftest-{suite}.log")
        env = {**os.environ, "PATH": f"{bins}{os.pathsep}{os.environ['PATH']}", "FAULT_NODE": str(self.spec),
               "PYTHONPATH": os.pathsep.join([str(BURN_SITE), str(ROOT)])}
        env.pop("HARNESS_SUITES_PATH", None)
        out = self.tmp / "out" / suite
        r = subprocess.run([sys.executable, str(LAUNCH), str(self.spec), "run", suite, "--profile",
                            str(self.tmp / "profile.yaml"), "--output", str(out),
                            "--history", str(self.tmp / "history.sqlite")],
                           cwd=self.tmp, env=env, text=True, capture_output=True, timeout=300)
        (run_dir,) = run_dirs(out)
        doc = results(run_dir)
        doc["_rc"], doc["_log"] = r.returncode, r.stdout + r.stderr
        doc["_html"] = (run_dir / "report.html").read_text()
        return doc


def statuses(doc: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in doc["checks"]}


def golive_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((ROOT / "suites" / "quarterly.yaml").read_text())
    return [r for r in doc["drift"] if r["vs"] == "golive"]


def golive_judged(q: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """metric -> the drift section's evaluations of it against go-live."""
    drift = next(c for c in q["checks"] if c["kind"] == "drift")
    out: dict[str, list[dict[str, Any]]] = {}
    for e in drift["evaluations"]:
        if e["labels"].get("vs") == "go-live":
            out.setdefault(e["metric"], []).append(e)
    return out


@pytest.fixture(scope="module")
def golive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One node's acceptance run, recorded as its go-live: run once for the module (it is the slow
    half), each test quarters a copy of the node (its own history store)."""
    tmp = tmp_path_factory.mktemp("golive")
    node = Node(tmp)
    doc = node.run("acceptance", real_captures(tmp / "captures-golive"))
    assert doc["_rc"] == 0 and doc["verdict"] == "ACCEPTED", (statuses(doc), doc["_log"][-3000:])
    assert statuses(doc)["nvme-health"] == "skipped"  # this machine has no NVMe: no drift rule vs go-live
    return tmp, doc


def acceptance_then_quarterly(golive: tuple[Path, dict[str, Any]], tmp_path: Path,
                              quarter: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    template, golive_doc = golive
    copy = tmp_path / "node"
    shutil.copytree(template, copy, symlinks=True)
    q = Node(copy, fresh=False).run("quarterly", quarter)
    assert q["history"]["golive"]["run_id"] == golive_doc["run_id"], q["history"]
    return golive_doc, q


def test_the_shipped_suites_judge_every_golive_rule(golive: tuple[Path, dict[str, Any]], tmp_path: Path):
    _, q = acceptance_then_quarterly(golive, tmp_path, real_captures(tmp_path / "captures-q"))
    assert q["_rc"] == 0 and q["verdict"] == "ACCEPTED", (statuses(q), q["_log"][-3000:])
    judged = golive_judged(q)
    drift = next(c for c in q["checks"] if c["kind"] == "drift")
    notes = drift["details"]["notes"]
    assert not [n for n in notes if "no go-live" in n or "measure something else" in n], notes
    counts = {"gpu.h2d_bw": 8, "gpu.d2h_bw": 8, "gpu.p2p_bw": 2 * 56, "gpu_burn.tflops": 8, "rdma.bw_avg": 8,
              "nccl.busbw": 10, "fio.iops": 4, "fio.bw": 4}
    for rule in golive_rules():
        metric = rule["metric"]
        evals = judged.get(metric, [])
        assert len(evals) == counts[metric], (metric, len(evals), notes)
        for e in evals:
            assert "since go-live" in e["message"] and e["reference"] is not None, e
    for metric in ("gpu.h2d_bw", "gpu.d2h_bw", "gpu.p2p_bw", "rdma.bw_avg", "nccl.busbw"):  # same capture
        assert {e["outcome"] for e in judged[metric]} == {"pass"}, judged[metric]
    assert "since go-live" in q["_html"]


def test_a_drop_past_the_limit_since_go_live_is_flagged(golive: tuple[Path, dict[str, Any]], tmp_path: Path):
    _, q = acceptance_then_quarterly(golive, tmp_path, degrade(tmp_path / "captures-q"))
    judged = golive_judged(q)
    d2h = {e["labels"]["gpu"]: e for e in judged["gpu.d2h_bw"]}  # labels as the history keeps them
    assert d2h["3"]["outcome"] == "warn" and "-50.0% since go-live" in d2h["3"]["message"], d2h["3"]
    assert d2h["3"]["reference"] == 55.18 and d2h["3"]["measured"] == 27.59
    assert {e["outcome"] for g, e in d2h.items() if g != "3"} == {"pass"}
    h2d = {e["labels"]["gpu"]: e for e in judged["gpu.h2d_bw"]}
    assert h2d["6"]["outcome"] == "warn" and "-10.0% since go-live" in h2d["6"]["message"], h2d["6"]
    assert h2d["6"]["reference"] == 55.36 and h2d["6"]["measured"] == 49.82
    assert {e["outcome"] for g, e in h2d.items() if g != "6"} == {"pass"}, h2d
    rdma = judged["rdma.bw_avg"]
    assert len(rdma) == 8 and {e["outcome"] for e in rdma} == {"warn"}, rdma
    assert {e["outcome"] for e in judged["nccl.busbw"] + judged["gpu.p2p_bw"]} == {"pass"}
    checks = {c["id"]: c for c in q["checks"]}
    # every HCA at half its go-live rate clears the lenient profile: only go-live drift sees it
    assert checks["rdma"]["status"] == "passed" and checks["drift"]["status"] == "warned"
    # GPU 3 alone at half is also far below its siblings: the bandwidth check fails it
    assert checks["gpu-bandwidth"]["status"] == "failed" and q["verdict"] == "REJECTED" and q["_rc"] == 1
    assert "drifted: -50.0% since go-live" in q["_html"]
