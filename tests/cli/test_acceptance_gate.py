"""`acceptance` is the full go-live gate of an 8-GPU node and `reacceptance` its shorter variant;
the H100 profiles' floors pass a healthy node and catch a broken one (host memory, bf16 burn, fio
in the node's NVMe temp directory), through `harness run`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from clihelp import harness, results, run_dirs, write

from harness.run import session as app

GATES = {"config_audit", "inventory", "ib_ports", "gpu_health", "topology", "gpu_burn", "gpu_bandwidth",
         "nccl", "rdma", "power_headroom", "nvme_health", "fio"}


def dry_run(suite: str) -> str:
    r = harness("run", suite, "--dry-run", "--profile", "h100-sxm-8x")
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("suite", ["acceptance", "reacceptance"])
def test_acceptance_gates_what_superbench_and_azure_gate(suite: str):
    out = dry_run(suite)
    kinds = set(re.findall(r"^\d+\. \S+\s+\[(\w+)\]", out, re.M))
    assert kinds == GATES, out
    assert "host_to_device_memcpy_ce" in out and "device_to_host_memcpy_ce" in out  # H2D/D2H
    assert "expect nccl.busbw{op=all_reduce,placement=out-of-place,size=17179869184}" in out
    assert "expect rdma.bw_avg{test=ib_write_bw}" in out
    assert "expect host.memory{} each: >= 1 TiB" in out


def test_reacceptance_is_shorter():
    full, short = dry_run("acceptance"), dry_run("reacceptance")
    assert "dcgmi diag -r 2" in short and "dcgmi diag -r 3" in full  # DCGM level 2 instead of 3
    assert "--timeout 120s" in short and "--timeout 300s" in full  # 2 minutes of full-system load


FLOORS = """\
name: floors
checks:
  - id: fio-quick
    kind: command
    params:
      argv: [echo, "seqread 0.2 seqwrite 0.1 randread 900 randwrite 500"]
      metrics:
        - {name: fio.bw, unit: GB/s, regex: 'seqread (?P<value>[0-9.]+)', labels: {job: seqread_1m, rw: read}}
        - {name: fio.bw, unit: GB/s, regex: 'seqwrite (?P<value>[0-9.]+)',
           labels: {job: seqwrite_1m, rw: write}}
        - {name: fio.iops, unit: IOPS, regex: 'randread (?P<value>[0-9.]+)',
           labels: {job: randread_4k, rw: read}}
        - {name: fio.iops, unit: IOPS, regex: 'randwrite (?P<value>[0-9.]+)',
           labels: {job: randwrite_4k, rw: write}}
  - id: gpu-burn
    kind: command
    params:
      argv: [echo, "600"]
      metrics:
        - {name: gpu_burn.tflops, unit: TFLOPS, regex: '(?P<value>[0-9.]+)', labels: {dtype: bf16}}
"""


def outcomes(doc: dict[str, Any], check: str, metric: str) -> list[tuple[str, float | None]]:
    c = next(c for c in doc["checks"] if c["id"] == check)
    return sorted((e["outcome"], e["low"]) for e in c["evaluations"] if e["metric"] == metric)


def test_a_broken_h100_node_fails_the_floors(tmp_path: Path):
    """A temp directory on a disk far below NVMe speed and a bf16 burn at 600 TFLOPS (a capped or
    throttled H100) fail; before, 0.2 GB/s cleared the generic 0.1 GB/s and 600 TFLOPS only warned."""
    out = tmp_path / "out"
    r = harness("run", str(write(tmp_path / "floors.yaml", FLOORS)), "--profile", "h100-sxm-8x",
                "--output", str(out), "--history", "off")
    assert r.returncode == 1, r.stdout + r.stderr
    doc = results(run_dirs(out)[0])
    assert doc["verdict"] == "REJECTED"
    assert outcomes(doc, "fio-quick", "fio.bw") == [("fail", 0.5), ("fail", 1.5)]
    assert outcomes(doc, "fio-quick", "fio.iops") == [("fail", 20000), ("fail", 50000)]
    assert outcomes(doc, "gpu-burn", "gpu_burn.tflops") == [("fail", 636), ("warn", 715)]


INVENTORY_ONLY = "name: inv\nchecks:\n  - {id: inventory, kind: inventory}\n"


def inventory(mem: int) -> dict[str, Any]:
    return {"host": {"hostname": "h100-node"}, "memory": {"total_bytes": mem},
            "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3"} for i in range(8)]}


@pytest.mark.parametrize("mem,outcome", [(1_960_000_000_000, "pass"),  # ND H100 v5's 1,915,071 MiB
                                         (549_755_813_888, "fail")])  # 512 GiB: DIMMs lost
def test_host_memory_floor_of_an_h100_node(tmp_path: Path, mem: int, outcome: str):
    out = tmp_path / "out"
    app.run(suite=str(write(tmp_path / "inv.yaml", INVENTORY_ONLY)), profile="h100-sxm-8x", output=out,
            inventory_probe=lambda: inventory(mem), history="off")
    doc = json.loads((run_dirs(out)[0] / "results.json").read_text())
    assert outcomes(doc, "inventory", "host.memory") == [(outcome, 1099511627776)]


BURN = """\
name: burn
checks:
  - id: gpu-burn
    kind: command
    params:
      argv: [echo, "{tflops}"]
      metrics:
        - {{name: gpu_burn.tflops, unit: TFLOPS, regex: '(?P<value>[0-9.]+)', labels: {{dtype: bf16}}}}
"""


@pytest.mark.parametrize("tflops,code,outcome", [(760, 0, [("pass", 632), ("pass", 711)]),  # healthy
                                                 (680, 0, [("pass", 632), ("warn", 711)]),  # slow: warns
                                                 (600, 1, [("fail", 632), ("warn", 711)])])  # capped
def test_an_h200_burn_fails_below_80_percent_of_its_measured_bf16(tmp_path: Path, tflops: int, code: int,
                                                                   outcome: list):
    """Before, 600 TFLOPS failed only the 711 floor, with no warn band between; now as the H100's."""
    out = tmp_path / "out"
    r = harness("run", str(write(tmp_path / "burn.yaml", BURN.format(tflops=tflops))), "--profile",
                "h200-sxm-8x", "--output", str(out), "--history", "off")
    assert r.returncode == code, r.stdout + r.stderr
    assert outcomes(results(run_dirs(out)[0]), "gpu-burn", "gpu_burn.tflops") == outcome


@pytest.mark.parametrize("profile,gpu,mem,outcome", [
    ("b200-sxm-8x", "NVIDIA B200", 2_010_000_000_000, "pass"),  # DGX B200's 2 TB as MemTotal reads it
    ("b200-sxm-8x", "NVIDIA B200", 549_755_813_888, "fail"),  # 512 GiB: DIMMs lost
    ("b300-sxm-8x", "NVIDIA B300 SXM6 AC", 2_010_000_000_000, "pass"),
    ("b300-sxm-8x", "NVIDIA B300 SXM6 AC", 8_589_934_592, "fail"),  # 8 GiB passed the generic 2 GiB
    ("gb200-nvl-4x", "NVIDIA GB200", 884_000_000_000, "pass"),  # two Graces' LPDDR5X less firmware
    ("gb200-nvl-4x", "NVIDIA GB200", 442_000_000_000, "fail"),  # one Grace's memory missing
])
def test_host_memory_floor_of_a_blackwell_node(tmp_path: Path, profile: str, gpu: str, mem: int,
                                               outcome: str):
    out = tmp_path / "out"
    inv = {**inventory(mem), "gpus": [{"index": i, "name": gpu} for i in range(8)]}
    app.run(suite=str(write(tmp_path / "inv.yaml", INVENTORY_ONLY)), profile=profile, output=out,
            inventory_probe=lambda: inv, history="off")
    doc = json.loads((run_dirs(out)[0] / "results.json").read_text())
    floor = 480_000_000_000 if profile.startswith("gb200") else 1099511627776
    assert outcomes(doc, "inventory", "host.memory") == [(outcome, floor)]
