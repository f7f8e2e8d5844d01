"""The --quiet line and the progress summary say what failed in the operator's words (issue #28):
a flag reads on/off ('gpu.persistence_mode{gpu=3} 0, expected <= 0' read backwards), a count reads
'7 of 8', and gpu-health names the rule that failed ('7 GPUs: 1 failed' when no GPU had failed)."""

from __future__ import annotations

from pathlib import Path

from gpunode import H100, SUITE, check, node
from pcisysfs import gpu_addresses, lines, write_tree


def _bus() -> list[str]:
    return [a[4:] for a in gpu_addresses()]


def test_persistence_off_reads_off_expected_on(tmp_path: Path) -> None:
    gpus = [{"name": H100, "persistence": i != 3} for i in range(8)]
    root = write_tree(tmp_path / "devices", lines())
    r, rec = node(tmp_path, "--quiet", "--history", "off",
                  scenario={"gpus": gpus, "bus_ids": _bus(), "pci_root": str(root)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED gpu-health: gpu.persistence_mode{gpu=3} off, expected on |" in r.stdout, r.stdout
    assert rec is not None
    health = check(rec, "gpu-health")
    assert health["message"] == "8 GPUs: failed gpu.persistence_mode (GPU 3)"
    (ev,) = [e for e in health["evaluations"] if e["outcome"] == "fail"]
    assert (ev["low"], ev["high"], ev["measured"]) == (1.0, None, 0.0)  # the band the rule means


def test_a_missing_gpu_reads_seven_of_eight_and_names_the_count_rule(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "devices", lines())
    r, rec = node(tmp_path, "--quiet", "--history", "off",
                  scenario={"gpus": [{"name": H100}] * 7, "bus_ids": _bus()[:7], "pci_root": str(root)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED gpu-health: gpu.count 7 of 8" in r.stdout, r.stdout
    assert "expected [8, 8]" not in r.stdout
    assert rec is not None
    assert check(rec, "gpu-health")["message"] == "7 GPUs: failed gpu.count"


def test_a_trained_down_link_reads_against_its_own_width(tmp_path: Path) -> None:
    gpus = [{"name": H100, **({"pcie": (5, 5, 8, 16)} if i == 6 else {})} for i in range(8)]
    root = write_tree(tmp_path / "devices", lines())
    r, _ = node(tmp_path, "--quiet", "--history", "off",
                scenario={"gpus": gpus, "bus_ids": _bus(), "pci_root": str(root)}, suite=SUITE)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "gpu.pcie_width{gpu=6} 8, expected >= 16" in r.stdout, r.stdout
