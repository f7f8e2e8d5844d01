"""The nvidia-smi topo -m parser on every real sample in tests/data/nvidia-smi-topo."""

from __future__ import annotations

from pathlib import Path

import pytest
from samples import covers, real_samples

from harness.parsers import topo
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "nvidia-smi-topo"
SAMPLES = real_samples("nvidia-smi-topo")
A100 = "topo_-m_2x_a100_pcie_2x_mlx5_SYS_NODE_empty_affinity_tabs.txt"
V100 = "topo_-m_4x_v100_power9_NV3_4x_mlx5_numa8_tabs.txt"
RTX = "topo_-mp_2x_rtx_pro_6000_blackwell_PIX.txt"
DELLA = "topo_-m_8x_h100_NV18_6x_mlx5_della_k17g3_4_gpus_nic_at_NODE.txt"
HGX = "topo_-m_8x_hopper_hgx_NV18_12x_mlx5_PXB_each_gpu.txt"

EXPECTED: dict[str, dict] = {
    A100: {"count": 2 * (1 + 3) + 2,
           "nvlinks": {("gpu0", "gpu1"): 0, ("gpu1", "gpu0"): 0},
           "paths": {("gpu0", "gpu1"): "SYS", ("gpu0", "mlx5_0"): "NODE", ("gpu0", "mlx5_1"): "SYS",
                     ("gpu1", "mlx5_1"): "NODE"},
           "nic": {"gpu0": ("mlx5_0", 4), "gpu1": ("mlx5_1", 4)},
           "affinity": {"gpu0": {"CPU Affinity": "0-63", "NUMA Affinity": "0"},
                        "gpu1": {"CPU Affinity": "64-127", "NUMA Affinity": "1"}}},
    V100: {"count": 4 * (3 + 7) + 4,
           "nvlinks": {("gpu0", "gpu1"): 3, ("gpu2", "gpu3"): 3, ("gpu0", "gpu2"): 0, ("gpu3", "gpu1"): 0},
           "paths": {("gpu0", "gpu1"): "NV3", ("gpu2", "mlx5_3"): "NODE", ("gpu3", "mlx5_0"): "SYS"},
           "nic": {"gpu0": ("mlx5_0", 4), "gpu1": ("mlx5_0", 4), "gpu2": ("mlx5_2", 4),
                   "gpu3": ("mlx5_2", 4)},
           "affinity": {"gpu2": {"CPU Affinity": "64-127", "NUMA Affinity": "8"}}},
    DELLA: {"count": 8 * (7 + 7 + 6 + 1),
            "nvlinks": {("gpu0", "gpu7"): 18, ("gpu5", "gpu2"): 18},
            "paths": {("gpu0", "NIC1"): "PIX", ("gpu1", "NIC0"): "NODE", ("gpu6", "NIC5"): "PIX"},
            "nic": {"gpu0": ("NIC0", 1), "gpu1": ("NIC0", 4), "gpu2": ("NIC0", 4), "gpu3": ("NIC2", 1),
                    "gpu4": ("NIC3", 1), "gpu5": ("NIC0", 4), "gpu6": ("NIC5", 1), "gpu7": ("NIC0", 4)},
            "affinity": {"gpu0": {"NUMA Affinity": "0", "GPU NUMA ID": "N/A"},
                         "gpu7": {"CPU Affinity": "1", "NUMA Affinity": "1", "GPU NUMA ID": "N/A"}},
            "nic_names": {f"NIC{i}": f"mlx5_{i}" for i in range(6)}},
    HGX: {"count": 8 * (7 + 7 + 12 + 1),
          "nvlinks": {("gpu3", "gpu4"): 18},
          "paths": {("gpu0", "NIC0"): "PXB", ("gpu4", "NIC0"): "SYS", ("gpu7", "NIC11"): "PXB"},
          "nic": {"gpu0": ("NIC0", 2), "gpu1": ("NIC3", 2), "gpu2": ("NIC4", 2), "gpu3": ("NIC5", 2),
                  "gpu4": ("NIC6", 2), "gpu5": ("NIC9", 2), "gpu6": ("NIC10", 2), "gpu7": ("NIC11", 2)},
          "affinity": {"gpu0": {"CPU Affinity": "0-55,112-167", "NUMA Affinity": "0", "GPU NUMA ID": "N/A"},
                       "gpu5": {"CPU Affinity": "56-111,168-223", "NUMA Affinity": "1",
                                "GPU NUMA ID": "N/A"}},
          "nic_names": {f"NIC{i}": f"mlx5_{i}" for i in range(12)}},
    RTX: {"count": 4, "nvlinks": {("gpu0", "gpu1"): 0}, "paths": {("gpu1", "gpu0"): "PIX"}, "nic": {},
          "affinity": {"gpu1": {"CPU Affinity": "0-47", "NUMA Affinity": "0", "GPU NUMA ID": "N/A"}}},
}


test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample(path):
    exp = EXPECTED[path.name]
    result = topo.parse(path.read_text())
    assert result.kind == "nvidia-smi-topo" and result.valid and result.problems == ()
    assert len(result.metrics) == exp["count"]
    nvlinks = {(m.labels["src"], m.labels["dst"]): m.value for m in result.metrics
               if m.name == "topo.nvlinks"}
    assert {k: nvlinks[k] for k in exp["nvlinks"]} == exp["nvlinks"]
    paths = {(m.labels["src"], m.labels["dst"]): m.labels["path"] for m in result.metrics
             if m.name == "topo.path"}
    assert {k: paths[k] for k in exp["paths"]} == exp["paths"]
    nic = {m.labels["gpu"]: (m.labels["nic"], m.value) for m in result.metrics if m.name == "topo.nic_rank"}
    assert nic == exp["nic"]
    for gpu, aff in exp["affinity"].items():
        assert result.details["affinity"][gpu] == aff
    assert result.details["nic_names"] == exp.get("nic_names", {})


def test_a_profile_can_require_nv_links_between_every_pair():
    # "NV18 between all pairs" is `topo.nvlinks min: 18, reduce: each`; on this V100 box (NV3 pairs)
    # a `min: 3` fails the 8 cross-pair links and names each.
    result = topo.parse((DATA / V100).read_text())
    short = [(m.labels["src"], m.labels["dst"]) for m in result.metrics
             if m.name == "topo.nvlinks" and m.value < 3]
    assert len(short) == 8 and ("gpu0", "gpu2") in short


def test_missing_rows_are_invalid():
    text = (DATA / V100).read_text()
    cut = text[: text.index("GPU2\tSYS")]
    result = topo.parse(cut)
    assert result.problems == ("no matrix row for GPU2, GPU3, mlx5_0, mlx5_1, mlx5_2, mlx5_3 "
                               "(output truncated)",)


@pytest.mark.parametrize("text", ["", "No devices were found\n", "Legend:\n  X    = Self\n"])
def test_not_topo(text):
    result = topo.parse(text)
    assert not result.valid and result.metrics == ()


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_never_raises_on_any_prefix(path):
    text = path.read_text()
    for end in range(len(text) + 1):
        result = topo.parse(text[:end])
        assert result.valid or result.problems


def test_registered():
    assert parsers()["nvidia-smi-topo"] is topo.parse
