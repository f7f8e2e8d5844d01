"""`harness observe` on GPU nodes, through the command line in-process with the NVML fake
(tests/support/fakenvml.py) replaying per-tick readings from tests/data/observe/gpu-*.json:
compute-bound, throttled, memory-full paging, and input-bound (GPUs waiting on a real fio held
at its cgroup's I/O limit)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import fakenvml
import pytest
import stallrepro as repro
from click.testing import CliRunner

from harness.cli.main import cli

DATA = Path(__file__).resolve().parents[1] / "data" / "observe"
GIB = 1 << 30


def replay(values: list[float], scale: float = 1.0) -> Any:
    """Reading n (counted by the fake) gets values[n]; past the end, the last value."""
    return lambda n: values[min(n, len(values) - 1)] * scale


def gpus(case: str, pid: int | None = None) -> list[fakenvml.FakeGpu]:
    doc = json.loads((DATA / f"{case}.json").read_text())
    return [fakenvml.FakeGpu(util=replay(g["util"]), sm_clock=replay(g["sm_clock"]),
                             reasons=lambda n, r=g["reasons"]: int(r[min(n, len(r) - 1)]),
                             temp=replay(g["temp"]), mem_used=replay(g["mem_used_gib"], GIB),
                             pcie_rx_kbps=replay(g["pcie_rx_gbps"], 1e6),
                             pcie_tx_kbps=replay(g["pcie_tx_gbps"], 1e6),
                             processes=[(pid, int(g["mem_used_gib"][-1] * GIB))] if pid else [])
            for g in doc["gpus"]]


def observe(monkeypatch: pytest.MonkeyPatch, fake: list[fakenvml.FakeGpu], *args: str) -> dict[str, Any]:
    fakenvml.install(monkeypatch, fake)
    r = CliRunner().invoke(cli, ["observe", "--json", "--interval", "0.25", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_busy_gpus_are_compute_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = observe(monkeypatch, gpus("gpu-compute"), "--", "sleep", "1.5")
    assert doc["primary"] == "gpu"
    assert re.match(r"compute-bound: 2 GPUs busy 9\d% of the time", doc["verdict"]), doc["verdict"]
    assert 0.96 <= doc["gpu_busy"] <= 1.0 and doc["window"]["sources"]["gpu"] == "ok"


def test_a_throttling_gpu_is_named_with_clock_reason_and_temperature(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = observe(monkeypatch, gpus("gpu-throttled"), "--", "sleep", "2.5")
    assert doc["primary"] == "throttling", doc["verdict"]
    f = doc["findings"][0]
    assert f["devices"] == ["gpu1"] and f["share"] >= 0.6
    assert f["evidence"].startswith("gpu1 at 1,410 of 1,980 MHz for ")
    assert "(hw_slowdown, hw_thermal), 91 C" in f["evidence"]
    assert doc["verdict"].startswith("throttled: gpu1 at 1,410 of 1,980 MHz")


def test_a_full_gpu_paging_over_pcie_is_gpu_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    p = subprocess.Popen(["sleep", "1.5"])
    try:
        doc = observe(monkeypatch, gpus("gpu-paging", pid=p.pid), "--pid", str(p.pid), "--duration", "5")
    finally:
        p.wait()
    assert doc["primary"] == "gpu_memory", doc["verdict"]
    f = doc["findings"][0]
    assert f["devices"] == ["gpu0"] and "memory full (140 GiB of 140 GiB)" in f["evidence"]
    assert "paging over PCIe at 23 GB/s" in f["evidence"]
    assert f["processes"][0]["pid"] == p.pid and f["processes"][0]["what"] == "GPU memory 140 GiB"


def test_an_idle_node_with_waiting_gpus_and_no_host_cause_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = observe(monkeypatch, gpus("gpu-input"), "--", "sleep", "1.5")
    assert doc["primary"] == "none" and re.search(r"GPUs busy [34]\d% of the time", doc["verdict"])


@pytest.mark.slow
def test_gpus_waiting_on_storage_are_input_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    repro.need("fio", "losetup")
    with repro.loop_device() as (dev, majmin), \
            repro.cgroup("blkio", blkio__throttle__read_bps_device=f"{majmin} 2097152") as cg:
        doc = observe(monkeypatch, gpus("gpu-input"), "--duration", "3", "--",
                      *repro.enter(cg, ["fio", "--name=loader", f"--filename={dev}", "--rw=randread",
                                        "--bs=64k", "--direct=1", "--ioengine=psync", "--time_based",
                                        "--runtime=10", "--output=/dev/null"]))
    assert doc["primary"] == "storage", doc["verdict"]
    assert re.match(rf"input-bound: GPUs busy [34]\d% of the time while storage held them back: "
                    rf"{Path(dev).name} held at its cgroup I/O limit", doc["verdict"]), doc["verdict"]
    assert "fio (pid " in doc["verdict"]
