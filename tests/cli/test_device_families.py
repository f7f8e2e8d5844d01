"""Issue #25 item 5: one rule for every device family the profile counts. 0 of 8 HCAs used to be
ERRORED (never drained) while 7 of 8 GPUs was REJECTED. Now: absent from the PCI bus is REJECTED
(hardware); on the bus without its driver is ERRORED naming the driver; and `fleet report
--drain-unfit` drains errored and untested nodes too, each reason saying which. Driven through the
CLI on 8 fake H100s (fake NVML; the PCI bus of a real HGX H100 capture, plus ConnectX-7 lines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from clihelp import ROOT, harness, results, run_dirs, write
from pcisysfs import CX7, bind, gpu_addresses, lines, write_tree

from harness.fleet import layout
from harness.fleet.layout import Manifest, NodeJob, SeenJob
from harness.fleet.slurmtext import JobInfo

LAUNCH = Path(__file__).parents[1] / "support" / "nodelaunch.py"
H100 = {"name": "NVIDIA H100 80GB HBM3"}
# the H100 profile (8 GPUs, 8 HCAs) but for its host memory floor (1 TiB): this machine is a small VM
PROFILE = "name: h100-vm\nextends: h100-sxm-8x\nhardware: {memory_min_bytes: 1048576}\n"


def suite(tmp_path: Path) -> Path:
    ib = tmp_path / "infiniband"  # /sys/class/infiniband as a node without RDMA devices has it
    ib.mkdir(exist_ok=True)
    return write(tmp_path / "ib.yaml", f"""\
name: hcas
checks:
  - id: inventory
    kind: inventory
  - id: ib-ports-start
    kind: ib_ports
    params: {{sysfs_root: "{ib}", window_s: 0}}
""")


def node(tmp_path: Path, bus: list[str], out: Path, driver: str | None = None
         ) -> tuple[subprocess.CompletedProcess[str], dict]:
    root = write_tree(tmp_path / f"pci-{out.name}", bus)
    if driver:
        for line in lines(CX7):
            bind(root, line.split()[0], driver)
    spec = write(tmp_path / "scenario.json", json.dumps(
        {"gpus": [H100] * 8, "bus_ids": [a[4:] for a in gpu_addresses()], "pci_root": str(root)}))
    profile = write(tmp_path / "h100-vm.yaml", PROFILE)
    r = subprocess.run([sys.executable, str(LAUNCH), str(spec), "run", str(suite(tmp_path)), "--profile",
                        str(profile), "--output", str(out), "--history", "off", "--quiet"],
                       cwd=ROOT, text=True, capture_output=True, timeout=180, env={**os.environ})
    (run_dir,) = run_dirs(out)
    return r, results(run_dir)


def ib(rec: dict) -> dict:
    return next(c for c in rec["checks"] if c["id"] == "ib-ports-start")


def test_hcas_absent_from_the_pci_bus_are_rejected_as_hardware(tmp_path: Path):
    r, rec = node(tmp_path, lines(), tmp_path / "absent")
    assert r.returncode == 1, r.stdout + r.stderr
    assert rec["verdict"] == "REJECTED" and ib(rec)["status"] == "failed"
    assert "FAILED ib-ports-start: ib.hca_count 0, expected >= 8 |" in r.stdout, r.stdout
    assert ib(rec)["message"].endswith("none on the PCI bus (absent hardware, not a driver)")


def test_hcas_on_the_bus_without_a_driver_are_errored_naming_the_driver(tmp_path: Path):
    r, rec = node(tmp_path, [*lines(), *lines(CX7)], tmp_path / "unbound")
    assert r.returncode == 3, r.stdout + r.stderr
    msg = ib(rec)["message"]
    assert ib(rec)["status"] == "errored" and rec["verdict"] == "ERRORED"
    assert "but the PCI bus has 8 (0000:1a:00.0, " in msg
    assert msg.endswith("8 with no driver bound: load mlx5_core and mlx5_ib (or the vendor's RDMA driver)")
    r, rec = node(tmp_path, [*lines(), *lines(CX7)], tmp_path / "core-only", driver="mlx5_core")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "bound to mlx5_core but not in " in ib(rec)["message"]


def test_fleet_report_drains_errored_and_untested_nodes_with_their_own_reasons(tmp_path: Path):
    fleet = tmp_path / "fleet"
    # n1: its HCAs' driver is not loaded (ERRORED); n2: only an expected check left out (UNTESTED)
    r, _ = node(tmp_path, [*lines(), *lines(CX7)], layout.node_dir(fleet, "n1"))
    assert r.returncode == 3
    env = {"HARNESS_LOCK_FILE": str(tmp_path / "run.lock"), "HARNESS_HISTORY": "off"}
    profile = write(tmp_path / "p.yaml", "name: p\nhardware: {memory_min_bytes: 1048576}\n")
    two = write(tmp_path / "two.yaml", "name: two\nchecks:\n  - id: inventory\n    kind: inventory\n"
                "  - id: hello\n    kind: command\n    params: {argv: [\"true\"]}\n")
    r = harness("run", str(two), "--only", "hello", "--profile", str(profile), "--output",
                str(layout.node_dir(fleet, "n2")), env=env)
    assert r.returncode == 4, r.stdout + r.stderr
    layout.save_manifest(fleet, Manifest(str(two), "two", str(profile), ("n1", "n2"), "2026-12-01T22:00:00Z",
                                         {"n1": NodeJob("n1", "1"), "n2": NodeJob("n2", "2")}))
    ended = enumerate((("n1", 3), ("n2", 4)), 1)  # as Slurm left them: harness's exit status
    layout.save_jobs(fleet, {n: SeenJob(JobInfo(str(i), "FAILED", "NonZeroExitCode", n, "h", rc, 0),
                                        "2026-12-01T22:01:00Z") for i, (n, rc) in ended})
    plain = harness("fleet", "report", str(fleet), "--drain-failed")
    assert "drained" not in plain.stdout and "DRAIN FAILED" not in plain.stdout  # neither failed
    rep = harness("fleet", "report", str(fleet), "--drain-unfit")
    assert rep.returncode == 3, rep.stdout + rep.stderr
    actions = {a["node"]: a for a in json.loads((fleet / "drain.json").read_text())}
    assert set(actions) == {"n1", "n2"} and {a["action"] for a in actions.values()} == {"drain"}
    assert actions["n1"]["reason"].startswith("harness: ERRORED ib-ports-start ")
    assert actions["n2"]["reason"].startswith("harness: UNTESTED no check judged anything (1 recorded); "
                                              "inventory left out by --only")
    assert all(len(a["reason"]) <= 120 for a in actions.values())


def test_gpus_on_the_bus_without_nvml_name_the_driver_they_are_bound_to(tmp_path: Path):
    """The same rule for GPUs: on the bus, NVML not loadable, is ERRORED naming the driver."""
    root = write_tree(tmp_path / "pci", lines())
    for addr in gpu_addresses():
        bind(root, addr, "nouveau")
    spec = write(tmp_path / "scenario.json", json.dumps({"nvml_fails": "driver", "pci_root": str(root)}))
    gpu_suite = write(tmp_path / "g.yaml", "name: g\nchecks:\n  - id: gpu-health\n    kind: gpu_health\n"
                      "    params: {xid_source: none}\n")
    r = subprocess.run([sys.executable, str(LAUNCH), str(spec), "run", str(gpu_suite), "--profile",
                        "h100-sxm-8x", "--output", str(tmp_path / "o"), "--history", "off"],
                       cwd=ROOT, text=True, capture_output=True, timeout=180, env={**os.environ})
    assert r.returncode == 3, r.stdout + r.stderr
    (check,) = results(run_dirs(tmp_path / "o")[0])["checks"]
    assert check["status"] == "errored"
    assert check["message"].startswith("8 NVIDIA GPUs on the PCI bus but NVML not loadable")
    assert check["message"].endswith("; bound to nouveau, not nvidia: load nvidia"), check["message"]
