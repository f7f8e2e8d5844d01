"""gpu_health's identity rules: the GPUs NVML sees against the profile's hardware.gpu (pure), and
through a real `harness run` on the fake NVML edge (tests only)."""

from __future__ import annotations

import json
from pathlib import Path

from fakenvml import FakeGpu, install

from harness.checks.gpu_identity import findings, memory_metrics
from harness.model import Outcome
from harness.run import session as app

H200_BYTES = 143771 * 2**20  # nvidia-smi -q of a real H200 (tests/data/nvidia-smi): 143771 MiB
H200 = {"models": ["NVIDIA H200", "NVIDIA H200 141GB HBM3e"], "count": 8, "memory_min_bytes": 141_000_000_000}


def gpus(n: int, name: str = "NVIDIA H200", mem: int = H200_BYTES) -> list[dict[str, object]]:
    return [{"index": i, "name": name, "memory_bytes": mem} for i in range(n)]


def test_a_healthy_h200_node_passes_count_model_and_memory():
    evs = findings(gpus(8), H200)
    assert [(e.metric, e.outcome) for e in evs] == [("gpu.count", Outcome.PASS), ("gpu.model", Outcome.PASS),
                                                    ("gpu.memory", Outcome.PASS)]
    assert evs[2].message == "every GPU has at least 140 GiB (151 GB); profile: 131 GiB (141 GB)"
    assert [m.value for m in memory_metrics(gpus(2))] == [150754820096.0] * 2


def test_a_missing_gpu_a_wrong_model_and_a_small_memory_each_fail_by_name():
    node = gpus(7)
    node[3] = {"index": 3, "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 81559 * 2**20}
    fails = {(e.metric, e.labels.get("gpu")): e.message
             for e in findings(node, H200) if e.outcome is Outcome.FAIL}
    assert fails == {
        ("gpu.count", None): "the profile expects 8 GPUs (8 x NVIDIA H200), found 7",
        ("gpu.model", 3): "GPU 3 is NVIDIA H100 80GB HBM3; the profile expects NVIDIA H200 or NVIDIA H200 "
                          "141GB HBM3e",
        ("gpu.memory", 3): "GPU 3 has 79.6 GiB (85.5 GB); the profile expects at least 131 GiB (141 GB)"}


def test_nothing_is_judged_where_the_profile_states_nothing():
    assert findings(gpus(2), {"models": [], "count": 0, "memory_min_bytes": None}) == []
    assert findings(gpus(2), {}) == []


def test_harness_run_fails_the_gpu_of_another_model(tmp_path: Path, monkeypatch):
    install(monkeypatch, [FakeGpu(), FakeGpu(name="NVIDIA H100 80GB HBM3")])
    (tmp_path / "p.yaml").write_text("name: two-h200\nhardware:\n  gpu: {models: [NVIDIA H200], count: 2,\n"
                                     "        memory_min_bytes: 141000000000}\n")
    (tmp_path / "s.yaml").write_text("name: s\nchecks:\n  - {id: gpu-health, kind: gpu_health, "
                                     "params: {xid_source: none}}\n")
    code = app.run(suite=str(tmp_path / "s.yaml"), profile=str(tmp_path / "p.yaml"), output=tmp_path / "r")
    (run_dir,) = [p for p in (tmp_path / "r").iterdir() if (p / "results.json").is_file()]
    (check,) = json.loads((run_dir / "results.json").read_text())["checks"]
    assert code == 1 and check["status"] == "failed"
    bad = [(e["metric"], e["labels"], e["message"]) for e in check["evaluations"] if e["outcome"] == "fail"]
    assert bad == [("gpu.model", {"gpu": 1},
                    "GPU 1 is NVIDIA H100 80GB HBM3; the profile expects NVIDIA H200")]
    assert {m["name"] for m in check["metrics"]} >= {"gpu.memory"}
    assert "GPU 1 is NVIDIA H100 80GB HBM3" in (run_dir / "report.html").read_text()


def test_cuda_devices_skip_a_gpu_without_uuid_and_results_are_relabelled_to_nvml():
    from harness.checks.gpu_identity import cuda_visible, renumber
    from harness.model import Metric
    from harness.parsers.base import ParseResult

    gpus = [{"uuid": "GPU-a"}, {"uuid": None}, {"uuid": "GPU-c"}, {"uuid": "GPU-d"}]
    env, ordinals = cuda_visible(gpus)
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-a,GPU-c,GPU-d" and ordinals == (0, 2, 3)
    parsed = ParseResult("x", True, (), (Metric("gpu.h2d_bw", 50.0, "GB/s", {"gpu": 1}),
                                         Metric("gpu.p2p_bw", 300.0, "GB/s", {"src": "gpu1", "dst": "gpu2"})),
                         {"faults": {"2": "differs"}})
    r = renumber(parsed, ordinals)
    assert [m.labels for m in r.metrics] == [{"gpu": 2}, {"src": "gpu2", "dst": "gpu3"}]
    assert r.details["faults"] == {"3": "differs"}
    assert cuda_visible([{"index": 0}, {"index": 1}]) == ({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, (0, 1))
