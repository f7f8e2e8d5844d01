"""The gpu_health kind through the real NVML edge over a fake pynvml (tests only), with a
stand-in `dmesg` printing real kernel-log XID lines (tests/data/xid)."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from fakenvml import FakeGpu, install
from judging import run_judged

from harness.checks.base import CheckContext
from harness.checks.gpu_health import KIND, GpuHealthParams
from harness.model import Outcome

XID = Path(__file__).parents[1] / "data" / "xid"


def ctx(tmp_path: Path, pcis: list[str]) -> CheckContext:
    inv = {"gpus": [{"index": i, "pci_bus_id": p} for i, p in enumerate(pcis)]}
    return CheckContext("health", tmp_path, 60, False, False, inv, logging.getLogger("t"))


def fake_dmesg(tmp_path: Path, monkeypatch, sample: str | None, rc: int = 0) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    denied = 'echo "dmesg: read kernel buffer failed: Operation not permitted" >&2\n'
    body = f'cat "{XID / sample}"\n' if sample else denied
    exe = bindir / "dmesg"
    exe.write_text(f"#!/bin/sh\n{body}exit {rc}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


def fails(out) -> dict[tuple[str, int], str]:
    return {(e.metric, e.labels.get("gpu", e.labels.get("pci"))): e.message for e in out.evaluations
            if e.outcome is Outcome.FAIL}


def test_healthy_node_passes_every_rule(tmp_path: Path, monkeypatch):
    install(monkeypatch, [FakeGpu() for _ in range(8)])
    out = run_judged(KIND, GpuHealthParams(xid_source="none"), ctx(tmp_path, []))
    assert out.problems == () and fails(out) == {}
    passed = {e.metric for e in out.evaluations if e.outcome is Outcome.PASS}
    assert passed == {"gpu.persistence_mode", "gpu.ecc_mode", "gpu.ecc_uncorrected", "gpu.retired_pages",
                      "gpu.retired_pending", "gpu.remap_failure", "gpu.remap_pending", "gpu.nvlink_down",
                      "gpu.pcie_width"}
    assert out.summary == "8 GPUs: healthy"
    m = {(x.name, x.labels["gpu"], x.labels.get("which")): x.value for x in out.metrics}
    assert m[("gpu.pcie_width", 7, "max")] == 16 and m[("gpu.nvlink_down", 0, None)] == 0


def test_each_fault_is_named_on_its_gpu(tmp_path: Path, monkeypatch):
    gpus = [FakeGpu() for _ in range(8)]
    gpus[1].lost_after = -1  # fell off the bus before we looked
    gpus[2].ecc = {(1, 0): 2}  # uncorrected, volatile
    gpus[3].pcie = (4, 5, 8, 16)
    gpus[4].persistence = False
    gpus[5].remap = (0, 1, 1, 0)
    gpus[6].retired = (20, 0)
    gpus[7].nvlinks_down = 2
    install(monkeypatch, gpus)
    out = run_judged(KIND, GpuHealthParams(xid_source="none"), ctx(tmp_path, []))
    assert fails(out) == {
        ("gpu.lost", 1): "GPU 1 does not answer NVML: GPU is lost: GPU is lost",
        ("gpu.ecc_uncorrected", 2): "GPU 2: 2 uncorrectable ECC errors (volatile)",
        ("gpu.pcie_width", 3): "GPU 3: PCIe link trained down: x8 of x16 (Gen4 of Gen5 at idle)",
        ("gpu.persistence_mode", 4): "GPU 4: persistence mode is off (nvidia-smi -pm 1)",
        ("gpu.remap_pending", 5): "GPU 5: a row remap is pending: reset the GPU",
        ("gpu.nvlink_down", 7): "GPU 7: 16 of 18 NVLink links up, 18 expected (as many as its siblings)",
    }
    (warn,) = [e for e in out.evaluations if e.outcome is Outcome.WARN]
    assert warn.labels == {"gpu": 6}
    assert warn.message == "GPU 6: 20 retired pages (warn from 15, fail from 60)"
    assert out.summary == ("8 GPUs: failed gpu.lost (GPU 1); gpu.persistence_mode (GPU 4); "
                           "gpu.ecc_uncorrected (GPU 2); +3 more, warned gpu.retired_pages (GPU 6)")
    assert out.details["pcie_gen_at_idle"] == ("GPU 3 Gen4 of Gen5 (normal at idle; judged under load by "
                                               "the burn)")


def test_critical_xid_from_the_kernel_log_fails_its_gpu(tmp_path: Path, monkeypatch):
    install(monkeypatch, [FakeGpu(), FakeGpu()])
    fake_dmesg(tmp_path, monkeypatch, "gpud_readme_dmesg_xid79_fallen_off_bus_with_nvswitch_sxid.txt")
    out = run_judged(KIND, GpuHealthParams(), ctx(tmp_path, ["00000000:18:00.0", "00000000:91:00.0"]))
    assert fails(out) == {("gpu.xid_critical", 1): "GPU 1: 1 critical XID event(s) in the kernel log "
                                                    "(codes 48, 63, 64, 74, 79, 92, 94, 95, 119, 120)",
                          ("gpu.driver_fault", 1): "GPU 1 (0000:91:00, no UUID) fell off the bus: 1 "
                                                   "kernel-log message(s) without an XID number"}
    xids = {(m.name, m.labels.get("gpu"), m.labels.get("xid")): m.value for m in out.metrics
            if m.name.startswith("gpu.xid")}
    assert xids == {("gpu.xid", 1, 79): 1.0, ("gpu.xid_critical", 0, None): 0.0,
                    ("gpu.xid_critical", 1, None): 1.0}
    first = out.details["xid_events"][0]
    assert first["message"] == "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


def test_unnumbered_driver_faults_fail_the_gpu_they_name_even_unseen(tmp_path: Path, monkeypatch):
    install(monkeypatch, [FakeGpu(), FakeGpu()])
    fake_dmesg(tmp_path, monkeypatch,
               "nvsentinel_issue155_dmesg_fallen_off_bus_unnumbered_probe_failed.txt")
    out = run_judged(KIND, GpuHealthParams(), ctx(tmp_path, ["00000000:18:00.0", "00000000:28:00.0"]))
    assert fails(out) == {
        ("gpu.driver_fault", "0000:b3:00"): "the GPU at PCI 0000:b3:00 (not visible to NVML) fell off the "
                                            "bus: 1 kernel-log message(s) without an XID number",
        ("gpu.driver_fault", "unknown"): "a GPU the driver could not name failed the driver's probe: 1 "
                                         "kernel-log message(s) without an XID number"}
    # the same GPU visible to NVML: named by index and UUID
    inv = CheckContext("health", tmp_path, 60, False, False,
                       {"gpus": [{"index": 0, "pci_bus_id": "00000000:B3:00.0", "uuid": "GPU-b3"}]},
                       logging.getLogger("t"))
    out = run_judged(KIND, GpuHealthParams(), inv)
    assert fails(out)[("gpu.driver_fault", 0)].startswith("GPU 0 (0000:b3:00, GPU-b3) fell off the bus")


def test_repeated_init_failures_fail_their_gpu_once_with_the_count(tmp_path: Path, monkeypatch):
    install(monkeypatch, [FakeGpu()])
    fake_dmesg(tmp_path, monkeypatch, "gpu_operator_issue1146_syslog_rminitadapter_repeated.txt")
    out = run_judged(KIND, GpuHealthParams(), ctx(tmp_path, ["00000000:0A:00.0"]))
    assert fails(out) == {("gpu.driver_fault", 0): "GPU 0 (0000:0a:00, no UUID) failed to initialise "
                          "(RmInitAdapter failed): 6 kernel-log message(s) without an XID number"}


def test_non_critical_xids_are_recorded_and_policy_is_a_param(tmp_path: Path, monkeypatch):
    install(monkeypatch, [FakeGpu()])
    fake_dmesg(tmp_path, monkeypatch, "gpud_readme_dmesg_ctime_xid13_xid109_peermem.txt")
    out = run_judged(KIND, GpuHealthParams(), ctx(tmp_path, ["00000000:CB:00.0"]))
    assert fails(out) == {}  # 13 and 109 are not in the default critical set
    assert {(m.labels["xid"], m.value) for m in out.metrics if m.name == "gpu.xid"} == {(13, 3.0), (109, 1.0)}
    out = run_judged(KIND, GpuHealthParams(xid_critical=[13]), ctx(tmp_path, ["00000000:CB:00.0"]))
    assert list(fails(out)) == [("gpu.xid_critical", 0)]


def test_xid_on_an_unknown_pci_address_keeps_the_address(tmp_path: Path, monkeypatch):
    install(monkeypatch, [FakeGpu()])
    fake_dmesg(tmp_path, monkeypatch, "gpud_dmesg_ctime_xe9680_xid119_gsp_timeout.log")
    out = run_judged(KIND, GpuHealthParams(), ctx(tmp_path, ["00000000:18:00.0"]))
    (m,) = [m for m in out.metrics if m.name == "gpu.xid"]
    assert m.labels == {"pci": "0000:9b:00", "xid": 119} and m.value == 5


def test_an_unreadable_kernel_log_errors_only_the_xid_rule_and_nvml_verdicts_stand(tmp_path: Path,
                                                                                    monkeypatch):
    gpus = [FakeGpu(), FakeGpu()]
    gpus[1].ecc = {(1, 0): 3}  # uncorrected, volatile: a hardware fault NVML measured
    install(monkeypatch, gpus)
    fake_dmesg(tmp_path, monkeypatch, None, rc=1)  # non-root, or a container: dmesg is refused
    out = run_judged(KIND, GpuHealthParams(), ctx(tmp_path, []))
    assert out.problems == ()  # the check is judged, not thrown away
    (err,) = [e for e in out.evaluations if e.outcome is Outcome.ERROR]
    assert err.metric == "gpu.xid_critical"
    assert err.message.startswith("could not read the kernel log for XIDs (dmesg: exit 1: dmesg: read kernel "
                                  "buffer") and err.message.endswith("run as root, or set xid_source: none")
    assert fails(out) == {("gpu.ecc_uncorrected", 1): "GPU 1: 3 uncorrectable ECC errors (volatile)"}
    from harness.compare.judge import status_of
    from harness.model import Status
    assert status_of(out.evaluations) is Status.FAILED


def test_xid_154_fails_the_gpu_whose_recovery_the_driver_asks_for(tmp_path: Path, monkeypatch):
    install(monkeypatch, [FakeGpu(), FakeGpu()])
    fake_dmesg(tmp_path, monkeypatch, "mig_attributed_xid94_and_xid154_recovery_action.txt")
    out = run_judged(KIND, GpuHealthParams(), ctx(tmp_path, ["00000000:01:00.0", "00000018:01:00.0"]))
    f = fails(out)
    assert f[("gpu.recovery_action", 0)] == ("GPU 0: the driver asks for Node Reboot Required (Xid 154, "
                                             "action 0x2)")
    assert f[("gpu.recovery_action", 1)] == "GPU 1: the driver asks for Drain and Reset (Xid 154, action 0x4)"
    # the MIG-attributed Xid 94 counts for the physical GPU 0 (critical by default)
    assert f[("gpu.xid_critical", 0)].startswith("GPU 0: 3 critical XID event(s)")


def test_plan_lists_the_log_command():
    cmds = KIND.plan(GpuHealthParams(xid_source="journal", xid_window_h=6), {})
    assert cmds[0].argv == ("journalctl", "-k", "--no-pager", "-o", "short-iso", "--since=-6h")
    assert [c.argv for c in KIND.plan(GpuHealthParams(xid_source="none"), {})] == [("NVML",)]


def test_the_profile_sets_the_site_xid_policy_unless_the_suite_does(tmp_path: Path):
    from clihelp import harness, write

    from harness.checks.registry import kinds
    from harness.config import load_profile, load_suite
    from harness.run.plan import build

    profile = write(tmp_path / "site.yaml", "name: site\nextends: h100-sxm-8x\n"
                    "hardware: {gpu: {xid_critical: [13, 79]}}\n")
    suite = write(tmp_path / "s.yaml", "name: s\nchecks:\n  - {id: plain, kind: gpu_health}\n"
                  "  - {id: own, kind: gpu_health, params: {xid_critical: [48]}}\n")
    plain, own = build(load_suite(suite, kinds()), load_profile(profile))
    assert plain.check.params.xid_critical == [13, 79] and own.check.params.xid_critical == [48]
    assert load_profile(profile).profile.hardware.gpu.count == 8  # the rest of the parent's gpu block stays
    r = harness("run", str(suite), "--profile", str(profile), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "verdict: XIDs 13, 79 in the kernel log fail their GPU" in r.stdout
    assert "verdict: XIDs 48 in the kernel log fail their GPU" in r.stdout
    assert "verdict: NVML must see 8 GPUs [profile hardware.gpu.count]" in r.stdout
    assert ("verdict: every GPU has at least 74.5 GiB (80 GB) [profile hardware.gpu.memory_min_bytes]"
            in r.stdout)
    bad = write(tmp_path / "bad.yaml", "name: bad\nhardware: {gpu: {xid_critical: [13, 0]}}\n")
    r = harness("validate", str(bad))
    assert r.returncode == 2 and f"{bad}:2:" in r.stderr and "greater than or equal to 1" in r.stderr


def hw_ctx(tmp_path: Path, n: int, gpu_hw: dict) -> CheckContext:
    return CheckContext("health", tmp_path, 60, False, False, {"gpus": []}, logging.getLogger("t"),
                        hardware={"gpu": gpu_hw})


def test_a_pcie_nvl_card_without_bridges_is_not_failed_for_its_disabled_links(tmp_path: Path, monkeypatch):
    # H100 NVL / H200 NVL without bridges: NVML reports every link disabled (NVIDIA/NVSentinel#1481)
    install(monkeypatch, [FakeGpu(name="NVIDIA H200 NVL", nvlinks=18, nvlinks_down=18) for _ in range(4)])
    out = run_judged(KIND, GpuHealthParams(xid_source="none"), ctx(tmp_path, []))
    assert fails(out) == {}
    (row,) = [e for e in out.evaluations if e.metric == "gpu.nvlink_down"]
    assert row.outcome is Outcome.PASS and row.message.startswith("no NVLink link up on any of 4 GPUs")
    # the profile that expects bridges (2-way NVL: 6 links, say) fails each card by name
    out = run_judged(KIND, GpuHealthParams(xid_source="none"), hw_ctx(tmp_path, 4, {"nvlinks": 6}))
    assert fails(out)[("gpu.nvlink_down", 2)] == ("GPU 2: 0 of 18 NVLink links up, 6 expected (the profile's "
                                                  "hardware.gpu.nvlinks)")


def test_an_sxm_gpu_short_of_the_profiles_links_fails_even_when_all_are_short(tmp_path: Path, monkeypatch):
    install(monkeypatch, [FakeGpu(nvlinks_down=18) for _ in range(8)])  # every GPU's links down
    out = run_judged(KIND, GpuHealthParams(xid_source="none"), hw_ctx(tmp_path, 8, {"nvlinks": 18}))
    assert len([k for k in fails(out) if k[0] == "gpu.nvlink_down"]) == 8


def test_the_nvlink_fabric_is_judged_on_status_and_health_once_registered(tmp_path: Path, monkeypatch):
    completed, in_progress = 3, 2
    gpus = [FakeGpu(fabric=(completed, 0, 0x0122)) for _ in range(8)]  # healthy: FALSE fields, config NONE
    gpus[1].fabric = (completed, 0, 0x0121)  # degraded bandwidth TRUE
    gpus[2].fabric = (completed, 0, 0x0522)  # incorrect configuration: insufficient NVLinks
    gpus[3].fabric = (completed, 999, 0)  # registration failed
    gpus[4].fabric = (in_progress, 999, 0)  # not complete: status not meaningful yet
    gpus[5].fabric = (completed, 0, 0x0126)  # route recovery in progress
    install(monkeypatch, gpus)
    out = run_judged(KIND, GpuHealthParams(xid_source="none"), ctx(tmp_path, []))
    got = {k: v for k, v in fails(out).items() if k[0] == "gpu.fabric_healthy"}
    assert got == {("gpu.fabric_healthy", 1): "GPU 1: NVLink fabric bandwidth degraded",
                   ("gpu.fabric_healthy", 2): "GPU 2: NVLink fabric misconfigured: insufficient NVLinks",
                   ("gpu.fabric_healthy", 3): "GPU 3: NVLink fabric registration failed (NVML status 999)"}
    warns = {e.labels["gpu"]: e.message for e in out.evaluations
             if e.metric == "gpu.fabric_healthy" and e.outcome is Outcome.WARN}
    assert warns == {4: "GPU 4: NVLink fabric registration in progress: status and health not known yet",
                     5: "GPU 5: NVLink fabric route recovery in progress"}
    m = {x.labels["gpu"]: x.value for x in out.metrics if x.name == "gpu.fabric_healthy"}
    assert m[0] == 1.0 and m[1] == 0.0 and m[5] == 1.0
