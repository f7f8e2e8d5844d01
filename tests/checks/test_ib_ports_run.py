"""Port health end to end: suite, the shipped h100-sxm-8x profile, runner, results.json, HTML
report and JUnit, naming the port that falls short; and the shipped interconnect suite's port
checks for real on this machine (no RDMA device here; its NIC read with the real ethtool)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ibsysfs import h100_tree

from harness.platform import pci
from harness.run import session as app

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = {"host": {"hostname": "gpu-node-1"},
             "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3"} for i in range(8)]}


def run(tmp_path: Path, suite: str, profile: str, only: tuple[str, ...] = ()) -> tuple[int, Path]:
    out = tmp_path / "reports"
    code = app.run(suite=suite, profile=profile, output=out, only=only, inventory_probe=lambda: INVENTORY)
    (run_dir,) = [p for p in out.iterdir() if (p / "results.json").is_file()]
    return code, run_dir


def test_a_port_trained_at_200_is_named_in_results_report_and_junit(tmp_path):
    root = h100_tree(tmp_path / "infiniband")
    # edit of the real tree: mlx5_5 trained at HDR 200 instead of NDR 400
    (root / "mlx5_5" / "ports" / "1" / "rate").write_text("200 Gb/sec (4X HDR)\n")
    suite = tmp_path / "ports.yaml"
    suite.write_text(f"""\
name: ports
checks:
  - id: ib-ports-start
    kind: ib_ports
    params: {{sysfs_root: "{root}", window_s: 0}}
  - id: ib-ports
    kind: ib_ports
    params: {{sysfs_root: "{root}", since: ib-ports-start}}
""")
    code, run_dir = run(tmp_path, str(suite), str(ROOT / "profiles" / "h100-sxm-8x.yaml"))
    assert code == 1
    doc = json.loads((run_dir / "results.json").read_text())
    start, end = doc["checks"]
    assert (start["status"], end["status"]) == ("failed", "failed")
    failed = [e for e in end["evaluations"] if e["outcome"] == "fail"]
    assert [(e["metric"], e["labels"], e["measured"], e["low"]) for e in failed] == [
        ("ib.rate", {"device": "mlx5_5", "link_layer": "InfiniBand", "port": 1}, 25.0, 50.0)]
    assert {e["outcome"] for e in end["evaluations"]} == {"pass", "fail"}
    assert any(e["metric"] == "ib.hca_count" and e["measured"] == 12 for e in end["evaluations"])
    assert "lowest InfiniBand rate 200 Gb/s on mlx5_5/1" in end["message"]
    html = (run_dir / "report.html").read_text()
    assert '<span class="chip">device=mlx5_5</span>' in html
    junit = (run_dir / "junit.xml").read_text()
    assert "ib.rate{device=mlx5_5,link_layer=InfiniBand,port=1}" in junit


def test_the_shipped_interconnect_suite_port_checks_on_this_machine(tmp_path):
    only = ("ib-ports-start", "nic-ports-start", "ib-ports", "nic-ports")
    code, run_dir = run(tmp_path, "interconnect", "generic", only)
    checks = {c["id"]: c for c in json.loads((run_dir / "results.json").read_text())["checks"]}
    if not Path("/sys/class/infiniband").is_dir() or not any(Path("/sys/class/infiniband").iterdir()):
        for cid in ("ib-ports-start", "ib-ports"):
            assert checks[cid]["status"] == "skipped"
            assert checks[cid]["message"].startswith("no RDMA device: /sys/class/infiniband")
    if shutil.which("ethtool") is None:
        assert checks["nic-ports-start"]["status"] == "errored"
        return
    nic = checks["nic-ports"]
    if nic["status"] == "passed":  # this machine's NIC driver has statistics (virtio_net has)
        assert nic["evaluations"] and {e["outcome"] for e in nic["evaluations"]} == {"pass"}
        names = {m["name"] for m in nic["metrics"]}
        assert {"net.port_errors", "net.error_delta", "net.link_up"} <= names  # link_speed: when known
        assert names <= {"net.port_errors", "net.error_delta", "net.link_up", "net.link_speed"}
        assert code == 0
    else:
        assert nic["status"] == "errored" and "ethtool -S" in nic["message"]


def test_profile_hca_count_fails_a_node_without_hcas_on_its_pci_bus(tmp_path, monkeypatch):
    """Absent from the PCI bus is the hardware's fault (issue #25 item 5: it used to be ERRORED)."""
    if Path("/sys/class/infiniband").is_dir() and any(Path("/sys/class/infiniband").iterdir()):
        return  # a machine with RDMA devices: nothing to prove here
    bus = tmp_path / "pci"
    bus.mkdir()
    monkeypatch.setattr(pci, "SYSFS", bus)  # a PCI bus without any RDMA adapter
    code, run_dir = run(tmp_path, "interconnect", "h100-sxm-8x", ("ib-ports-start",))
    (check,) = json.loads((run_dir / "results.json").read_text())["checks"]
    assert code == 1 and check["status"] == "failed"
    assert check["message"] == ("the profile expects 8 RDMA adapters, found 0: none on the PCI bus "
                                "(absent hardware, not a driver)")
    (bad,) = [e for e in check["evaluations"] if e["outcome"] == "fail"]
    assert (bad["metric"], bad["measured"], bad["low"]) == ("ib.hca_count", 0, 8)
