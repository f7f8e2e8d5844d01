"""The nvme_health kind: skip without NVMe, error when the profile expects drives, the real
nvme-cli and smartctl failing on a missing controller, and the link metrics from sysfs.

The development machines have no NVMe, so a healthy end-to-end read cannot run here; the
parsers it uses are tested on real captured output (tests/parsers/test_nvme_smart.py, test_smartctl.py).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError
from storagehelp import make_sysfs

from harness.checks.base import CheckContext
from harness.checks.nvme_health import KIND, NvmeHealthParams, link_metrics
from harness.compare.judge import evaluate
from harness.compare.rules import Rule
from harness.config import load_profile
from harness.errors import HarnessError, SkipCheck
from harness.model import Outcome
from harness.platform import nvme, pci
from harness.units import COUNT

NO_NVME = not (Path("/sys/class/nvme").exists() and any(Path("/sys/class/nvme").iterdir()))


def ctx(tmp_path: Path, **kw) -> CheckContext:
    return CheckContext("nvme", tmp_path, 60, False, False, {}, logging.getLogger("t"), **kw)


def need(tool: str) -> None:
    if shutil.which(tool) is None:
        package = "nvme-cli" if tool == "nvme" else "smartmontools"
        pytest.skip(f"{tool} not installed (apt-get install {package})")


@pytest.mark.skipif(not NO_NVME, reason="this machine has NVMe controllers")
def test_no_nvme_is_skipped_with_the_reason(tmp_path):
    with pytest.raises(SkipCheck, match=r"^no NVMe devices$"):
        KIND.run(NvmeHealthParams(), ctx(tmp_path))


@pytest.mark.skipif(not NO_NVME, reason="this machine has NVMe controllers")
def test_expected_nvme_absent_from_the_bus_fails_and_on_the_bus_unbound_errors(tmp_path, monkeypatch):
    """One rule for every counted family (issue #25 item 5): absent from the PCI bus is 0 measured
    (the profile's nvme.count rule fails: hardware); on the bus without a driver is an error."""
    bus = tmp_path / "pci"
    bus.mkdir()
    monkeypatch.setattr(pci, "SYSFS", bus)
    out = KIND.run(NvmeHealthParams(), ctx(tmp_path, hardware={"nvme_count": 8}))
    assert [(m.name, m.value) for m in out.metrics] == [("nvme.count", 0.0)]
    assert "none on the PCI bus" in out.summary
    fn = bus / "0000:01:00.0"  # a Samsung PM9A3 (144d:a80a), Non-Volatile memory controller, NVMe
    fn.mkdir()
    for name, text in (("vendor", "0x144d"), ("device", "0xa80a"), ("class", "0x010802")):
        (fn / name).write_text(text + "\n")
    with pytest.raises(HarnessError, match=r"profile expects 8 NVMe controllers, found 0 in /sys/class/nvme, "
                       r"but the PCI bus has 1 \(0000:01:00.0\): 1 with no driver bound: load nvme") as e:
        KIND.run(NvmeHealthParams(), ctx(tmp_path, hardware={"nvme_count": 8}))
    assert not isinstance(e.value, SkipCheck)


def test_real_nvme_cli_on_a_missing_controller_is_an_invalid_run(tmp_path):
    need("nvme")
    if not NO_NVME:
        pytest.skip("this machine has NVMe controllers")
    c = ctx(tmp_path)
    out = KIND.run(NvmeHealthParams(controllers=["/dev/nvme0"]), c)
    assert out.problems == ("nvme0: nvme smart-log /dev/nvme0 -o json: exit 1: "
                            "/dev/nvme0: No such file or directory",)
    assert [(m.name, m.value) for m in out.metrics] == [("nvme.count", 1)]
    (run,) = c.tool_runs
    assert run.argv == ("nvme", "smart-log", "/dev/nvme0", "-o", "json") and run.rc == 1
    assert "No such file or directory" in (tmp_path / run.stderr_file).read_text()


def test_real_smartctl_on_a_missing_controller_is_an_invalid_run(tmp_path):
    need("smartctl")
    if not NO_NVME:
        pytest.skip("this machine has NVMe controllers")
    out = KIND.run(NvmeHealthParams(controllers=["nvme0"], tool="smartctl"), ctx(tmp_path))
    assert out.problems[0] == "nvme0: smartctl exit status 2: device open failed or not supported"
    assert "/dev/nvme0" in out.problems[1]  # smartctl's own message, e.g. "... failed: No such device"


def test_plan_lists_one_read_only_command_per_controller(monkeypatch, tmp_path):
    root = make_sysfs(tmp_path)
    monkeypatch.setattr(nvme, "SYS", root)
    cmds = KIND.plan(NvmeHealthParams(tool="smartctl"), {})
    assert [c.argv for c in cmds] == [("smartctl", "-a", "-j", f"/dev/{n}")
                                      for n in ("nvme0", "nvme1", "nvme10")]
    assert cmds[0].note == "SAMSUNG MZQL23T8HCLS-00A07 (read-only)"


def test_run_reports_identity_and_links_even_when_the_log_read_fails(monkeypatch, tmp_path):
    need("nvme")
    root = make_sysfs(tmp_path / "sys")
    monkeypatch.setattr(nvme, "SYS", root)
    out = KIND.run(NvmeHealthParams(), ctx(tmp_path / "run"))
    got = {(m.name, m.labels.get("device"), m.labels.get("which")): m.value for m in out.metrics}
    assert got[("nvme.count", None, None)] == 3
    assert got[("nvme.pcie_gen", "nvme1", "current")] == 3 and got[("nvme.pcie_gen", "nvme1", "max")] == 4
    assert got[("nvme.pcie_width", "nvme1", "current")] == 2
    assert got[("nvme.link_downgraded", "nvme1", None)] == 1
    assert got[("nvme.link_downgraded", "nvme0", None)] == 0
    assert ("nvme.link_downgraded", "nvme10", None) not in got  # NVMe/TCP: no PCIe link
    assert got[("nvme.namespaces", "nvme10", None)] == 2
    serials = {m.labels.get("serial") for m in out.metrics if m.labels.get("device") == "nvme0"}
    assert serials == {"S64HNE0R000001"}
    if NO_NVME:  # the sysfs tree is made up; the real nvme-cli finds no such device
        assert len(out.problems) == 3 and all("No such file or directory" in p for p in out.problems)
    assert [c["name"] for c in out.details["controllers"]] == ["nvme0", "nvme1", "nvme10"]
    assert "nvme1: SAMSUNG MZQL23T8HCLS-00A07, Gen3 x2 (below max)" in out.summary


def test_link_metrics_and_the_profile_rule_for_a_downtrained_link():
    ctrl = nvme.NvmeController("nvme3", "M", "S1", "F", "pcie", "0000:01:00.0", ("nvme3n1",),
                               nvme.PcieLink(16.0, 2, 32.0, 4))
    ms = link_metrics(ctrl, {"device": "nvme3", "serial": "S1"})
    assert {(m.name, m.labels.get("which"), m.value, m.unit) for m in ms} == {
        ("nvme.pcie_gen", "current", 4, COUNT), ("nvme.pcie_gen", "max", 5, COUNT),
        ("nvme.pcie_width", "current", 2, COUNT), ("nvme.pcie_width", "max", 4, COUNT),
        ("nvme.link_downgraded", None, 1, COUNT)}
    from harness.config.models import Expectation
    (ev,) = evaluate([Rule(Expectation(metric="nvme.link_downgraded", max=0, unit="count"), "t")], ms)
    assert ev.outcome is Outcome.FAIL and ev.labels["serial"] == "S1"


def test_generic_profile_judges_real_health_logs():
    from harness.parsers import smartctl
    data = Path(__file__).parents[1] / "data" / "smartctl"
    prof = load_profile("generic").profile
    rules = [Rule(e, "generic") for e in prof.expectations if e.metric.startswith("nvme.")]
    assert {r.expectation.metric for r in rules} == {
        "nvme.critical_warning", "nvme.media_errors", "nvme.percentage_used", "nvme.spare_margin"}
    healthy = smartctl.parse((data / "nasty-skhynix-bc901-compact-smartctl74.json").read_text())
    assert {e.outcome for e in evaluate(rules, healthy.metrics)} == {Outcome.PASS}
    worn = [m if m.name != "nvme.percentage_used" else type(m)(m.name, 85.0, m.unit, m.labels)
            for m in healthy.metrics]
    outcomes = sorted(e.outcome.value for e in evaluate(rules, worn))
    assert outcomes.count("warn") == 1 and "fail" not in outcomes


def test_params():
    assert NvmeHealthParams().tool == "nvme"
    with pytest.raises(ValidationError, match="not an NVMe controller"):
        NvmeHealthParams(controllers=["/dev/sda"])
    with pytest.raises(ValidationError):
        NvmeHealthParams(tool="hdparm")
    assert "disk.smart_passed" in KIND.metric_specs(NvmeHealthParams(tool="smartctl"))
    assert "disk.smart_passed" not in KIND.metric_specs(NvmeHealthParams())


DRIVE_SUITE = """\
name: drives
checks:
  - {id: nvme-health, kind: nvme_health}
  - {id: md-raid, kind: mdraid}
  - id: nvme-all-read
    kind: fio
    params: {targets: all-nvme, jobs: [{name: r, rw: read, runtime: 1}]}
"""


@pytest.mark.skipif(not NO_NVME or Path("/proc/mdstat").exists(), reason="machine has NVMe or md")
def test_harness_run_skips_drive_checks_here_and_errors_when_the_profile_expects_nvme(tmp_path):
    from clihelp import harness, results, run_dirs, write

    suite = write(tmp_path / "drives.yaml", DRIVE_SUITE)
    plain = write(tmp_path / "plain.yaml", "name: plain\n")
    r = harness("run", str(suite), "--profile", str(plain), "--output", str(tmp_path / "a"))
    assert r.returncode == 4, r.stdout + r.stderr  # all skipped: nothing judged, so never ACCEPTED
    assert r.stdout.startswith("UNTESTED: ") and "no check judged anything (3 skipped)" in r.stdout
    got = {c["id"]: (c["status"], c["message"]) for c in results(run_dirs(tmp_path / "a")[0])["checks"]}
    assert got == {"nvme-health": ("skipped", "no NVMe devices"),
                   "md-raid": ("skipped", "no md driver: /proc/mdstat is missing"),
                   "nvme-all-read": ("skipped", "no NVMe devices")}
    sku = write(tmp_path / "sku.yaml", "name: sku\nhardware: {nvme_count: 4}\n")
    r = harness("run", str(suite), "--profile", str(sku), "--output", str(tmp_path / "b"))
    assert r.returncode == 1, r.stdout + r.stderr  # none on this machine's PCI bus: absent hardware
    got = {c["id"]: (c["status"], c["message"]) for c in results(run_dirs(tmp_path / "b")[0])["checks"]}
    assert got["nvme-health"] == ("failed", "the profile expects 4 NVMe controllers, found 0: none on the "
                                  "PCI bus (absent hardware, not a driver)")
    assert got["nvme-all-read"] == ("errored",
                                    "profile expects 4 NVMe devices, found none in /sys/class/block")
    assert got["md-raid"][0] == "skipped"
