"""The topology check kind on real `nvidia-smi topo -m` captures (tests/data/nvidia-smi-topo).

nvidia-smi itself is absent here: a script stands in for it at the process level and prints a
captured matrix. The "one pair at NV12 / SYS" cases edit a real matrix in the test and say so.
"""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import pytest
from clihelp import harness, run_dirs
from judging import run_judged
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.topology import KIND, TopologyParams, expected_shape
from harness.config.loader import load_profile
from harness.errors import HarnessError, SkipCheck, ToolError
from harness.model import Outcome

DATA = Path(__file__).parents[1] / "data" / "nvidia-smi-topo"
HGX = DATA / "topo_-m_8x_hopper_hgx_NV18_12x_mlx5_PXB_each_gpu.txt"
DELLA = DATA / "topo_-m_8x_h100_NV18_6x_mlx5_della_k17g3_4_gpus_nic_at_NODE.txt"
V100 = DATA / "topo_-m_4x_v100_power9_NV3_4x_mlx5_numa8_tabs.txt"
GPUS = {"gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3"} for i in range(8)]}


def h100_hardware() -> dict:
    return load_profile("h100-sxm-8x").profile.hardware.model_dump()


def ctx_for(tmp_path: Path, hardware: dict | None = None, inventory: dict | None = None) -> CheckContext:
    return CheckContext("topo", tmp_path / "run", 30, destructive=False, allow_destructive=False,
                        inventory=GPUS if inventory is None else inventory, log=logging.getLogger("t"),
                        hardware=hardware or {})


def fake_nvidia_smi(tmp_path: Path, sample: Path) -> Path:
    """Prints the captured matrix when called as `nvidia-smi topo -m`, else fails."""
    path = tmp_path / "nvidia-smi"
    path.write_text(f'#!/bin/sh\n[ "$1 $2" = "topo -m" ] || exit 3\ncat "{sample}"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def edited(tmp_path: Path, a: int, b: int, cell: str) -> Path:
    """SYNTHETIC: the real HGX matrix with the GPU a <-> GPU b cells replaced by `cell`."""
    rows = HGX.read_text().split("\n")
    for i, j in ((a, b), (b, a)):
        r = next(k for k, row in enumerate(rows) if row.startswith(f"GPU{i}\t"))
        cells = rows[r].split("\t")
        assert cells[1 + j] == "NV18"
        cells[1 + j] = cell
        rows[r] = "\t".join(cells)
    out = tmp_path / f"EDITED_gpu{a}_gpu{b}_{cell}.txt"
    out.write_text("\n".join(rows))
    return out


def fails(out) -> list[tuple[str, dict, str]]:
    return [(e.metric, dict(e.labels), e.message) for e in out.evaluations if e.outcome is Outcome.FAIL]


def test_healthy_hgx_matrix_passes_the_h100_profile_shape(tmp_path):
    exe = fake_nvidia_smi(tmp_path, HGX)
    ctx = ctx_for(tmp_path, h100_hardware())
    out = run_judged(KIND, TopologyParams(binary=str(exe)), ctx)
    assert out.problems == ()
    assert [(e.metric, e.outcome, e.message, e.source) for e in out.evaluations] == [
        ("topo.nvlinks", Outcome.PASS, "all 28 GPU pairs: >= 18 NVLinks (lowest NV18)",
         "profile hardware.topology"),
        ("topo.nic_rank", Outcome.PASS, "each of the 8 GPUs has a NIC at PIX or PXB (farthest PXB)",
         "profile hardware.topology")]
    assert out.summary == "8 GPUs, 12 NICs; GPU pairs NV18 x28; farthest nearest-NIC PXB"
    assert ctx.tool_runs[0].argv == (str(exe), "topo", "-m") and ctx.tool_runs[0].rc == 0
    numa = {m.labels["gpu"]: m.value for m in out.metrics if m.name == "topo.numa_node"}
    assert numa == {f"gpu{i}": (0.0 if i < 4 else 1.0) for i in range(8)}
    assert out.details["expected"] == {"gpu_pairs": {"nvlinks": 18}, "gpu_nic": {"max_path": "PXB"}}


def test_one_pair_at_nv12_fails_and_names_the_pair(tmp_path):
    ctx = ctx_for(tmp_path, h100_hardware())
    out = run_judged(KIND, TopologyParams(file=str(edited(tmp_path, 2, 5, "NV12"))), ctx)
    assert fails(out) == [("topo.nvlinks", {"src": "gpu2", "dst": "gpu5"},
                           "gpu2-gpu5: NV12 (12 NVLinks), expected NV18 or more")]
    (ev,) = [e for e in out.evaluations if e.outcome is Outcome.FAIL]
    assert (ev.measured, ev.low, ev.reference) == (12.0, 18, 18)
    assert [e.outcome for e in out.evaluations if e.metric == "topo.nic_rank"] == [Outcome.PASS]
    assert ctx.tool_runs == []  # a file is judged without running nvidia-smi


def test_a_pair_at_sys_fails_the_nvlink_count_and_the_path_rule(tmp_path):
    sample = edited(tmp_path, 0, 7, "SYS")
    params = TopologyParams(file=str(sample), gpu_pairs={"nvlinks": 18, "path": ["NV#"]})
    out = run_judged(KIND, params, ctx_for(tmp_path))
    assert fails(out) == [
        ("topo.nvlinks", {"src": "gpu0", "dst": "gpu7"}, "gpu0-gpu7: SYS (0 NVLinks), expected NV18 or more"),
        ("topo.path", {"src": "gpu0", "dst": "gpu7", "path": "SYS"}, "gpu0-gpu7: SYS, expected NV#")]
    assert {e.source for e in out.evaluations} == {"check params"}


def test_real_h100_node_whose_gpus_lack_a_close_nic_fails_naming_each_gpu(tmp_path):
    out = run_judged(KIND, TopologyParams(file=str(DELLA)), ctx_for(tmp_path, h100_hardware()))
    assert out.problems == ()
    assert [e.outcome for e in out.evaluations if e.metric == "topo.nvlinks"] == [Outcome.PASS]
    assert fails(out) == [
        ("topo.nic_rank", {"gpu": f"gpu{g}", "nic": "NIC0"},
         f"gpu{g}: nearest NIC NIC0 (mlx5_0) is at NODE, expected PIX or PXB") for g in (1, 2, 5, 7)]
    assert {e.measured for e in out.evaluations if e.outcome is Outcome.FAIL} == {4.0}


def test_v100_pairs_without_nvlink_fail_the_a100_shape(tmp_path):
    # a real 4 x V100 node: NV3 pairs (0-1, 2-3); the other four pairs are SYS
    params = TopologyParams(file=str(V100), gpu_pairs={"nvlinks": 12})
    out = run_judged(KIND, params, ctx_for(tmp_path))
    named = [(lab["src"], lab["dst"]) for _, lab, _ in fails(out)]
    assert named == [("gpu0", "gpu1"), ("gpu0", "gpu2"), ("gpu0", "gpu3"), ("gpu1", "gpu2"), ("gpu1", "gpu3"),
                     ("gpu2", "gpu3")]
    assert out.summary == "4 GPUs, 4 NICs; GPU pairs NV3 x2, SYS x4; farthest nearest-NIC NODE"


def test_numa_expectation(tmp_path):
    good = {f"gpu{i}": (0 if i < 4 else 1) for i in range(8)}
    out = run_judged(KIND, TopologyParams(file=str(HGX), gpu_numa=good), ctx_for(tmp_path))
    assert [(e.outcome, e.message) for e in out.evaluations] == [
        (Outcome.PASS, "all 8 GPUs on their expected NUMA nodes")]
    bad = {**good, "gpu3": 1, "gpu9": 0}
    out = run_judged(KIND, TopologyParams(file=str(HGX), gpu_numa=bad), ctx_for(tmp_path))
    assert [m for _, _, m in fails(out)] == ["gpu3: NUMA node 0, expected NUMA node 1",
                                             "gpu9: not in the matrix, expected NUMA node 0"]


def test_params_override_the_profile_field_by_field():
    shape, sources = expected_shape(TopologyParams(gpu_pairs={"path": ["NV12"]}), h100_hardware())
    assert shape.gpu_pairs is not None
    assert shape.gpu_pairs.path == ["NV12"] and shape.gpu_pairs.nvlinks is None
    assert shape.gpu_nic is not None and shape.gpu_nic.max_path == "PXB"
    assert sources == {"gpu_pairs": "check params", "gpu_nic": "profile hardware.topology"}


def test_no_shape_stated_still_reports_the_matrix(tmp_path):
    out = run_judged(KIND, TopologyParams(file=str(HGX)), ctx_for(tmp_path))
    assert out.evaluations == ()
    assert out.summary.endswith("no expected shape stated (params or profile hardware.topology)")
    assert len([m for m in out.metrics if m.name == "topo.nvlinks"]) == 56


@pytest.mark.parametrize("kw, words", [
    ({"gpu_pairs": {"path": ["NV18", "QPI"]}}, "should match pattern"),
    ({"gpu_nic": {"max_path": "NV18"}}, "Input should be 'PIX', 'PXB', 'PHB', 'NODE' or 'SYS'"),
    ({"gpu_pairs": {"nvlinks": 0}}, "greater than or equal to 1"),
    ({"gpu_nics": {}}, "Extra inputs are not permitted"),
])
def test_bad_shapes_are_refused(kw, words):
    with pytest.raises(ValidationError, match=words):
        TopologyParams.model_validate(kw)


def test_without_gpus_skipped_or_error_when_the_profile_expects_them(tmp_path):
    none = {"gpus": [], "nvml": {"reason": "libnvidia-ml.so.1 not found"}}
    with pytest.raises(SkipCheck, match=r"no NVIDIA GPU: libnvidia-ml\.so\.1 not found"):
        run_judged(KIND, TopologyParams(), ctx_for(tmp_path, inventory=none))
    with pytest.raises(HarnessError, match=r"expects 8 x NVIDIA H100 80GB HBM3, found 0 \(libnvidia"):
        run_judged(KIND, TopologyParams(), ctx_for(tmp_path, h100_hardware(), inventory=none))


def test_bad_input_is_an_error_naming_it(tmp_path):
    with pytest.raises(HarnessError, match=r"topology file .*missing.txt: cannot read"):
        run_judged(KIND, TopologyParams(file=str(tmp_path / "missing.txt")), ctx_for(tmp_path))
    junk = tmp_path / "junk.txt"
    junk.write_text("No devices were found\n")
    with pytest.raises(ToolError, match=r"junk.txt: not nvidia-smi topo -m output"):
        run_judged(KIND, TopologyParams(file=str(junk)), ctx_for(tmp_path))
    exe = fake_nvidia_smi(tmp_path, HGX)
    exe.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate' >&2\nexit 9\n")
    with pytest.raises(ToolError, match="exit 9: NVIDIA-SMI has failed"):
        run_judged(KIND, TopologyParams(binary=str(exe)), ctx_for(tmp_path))


def test_truncated_matrix_is_an_invalid_run(tmp_path):
    text = HGX.read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(text[: text.index("\nNIC6\t") + 1])
    out = run_judged(KIND, TopologyParams(file=str(cut)), ctx_for(tmp_path, h100_hardware()))
    assert out.problems == ("no matrix row for NIC6, NIC7, NIC8, NIC9, NIC10, NIC11 (output truncated)",)


def test_cli_run_accepts_the_healthy_matrix_and_rejects_the_edited_one(tmp_path):
    for sample, verdict in ((HGX, "ACCEPTED"), (edited(tmp_path, 3, 4, "NV12"), "REJECTED")):
        suite = tmp_path / "topo.yaml"
        suite.write_text(f"name: topo\nchecks:\n  - id: topology\n    kind: topology\n"
                         f"    params: {{file: \"{sample}\"}}\n")
        out = tmp_path / f"out-{verdict}"
        r = harness("run", str(suite), "--profile", "h100-sxm-8x", "--output", str(out))
        assert r.stdout.startswith(verdict), r.stdout + r.stderr
        (run_dir,) = run_dirs(out)
        check = json.loads((run_dir / "results.json").read_text())["checks"][0]
        if verdict == "REJECTED":
            assert r.returncode == 1
            assert "gpu3-gpu4: NV12 (12 NVLinks), expected NV18 or more" in r.stdout + r.stderr
            assert [e["labels"] for e in check["evaluations"] if e["outcome"] == "fail"] == [
                {"src": "gpu3", "dst": "gpu4"}]
        else:
            assert r.returncode == 0 and check["status"] == "passed"
