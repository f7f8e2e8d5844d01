"""The nic_ports check: the real ethtool on this machine's NIC and on lo, a missing ethtool, and
counters that grow, served by a stand-in `ethtool` that prints real captured `ethtool -S` output
(edited by the test where a counter must grow, as the test says)."""

from __future__ import annotations

import logging
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from judging import run_judged
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.nic_ports import KIND, NicPortsParams
from harness.compare.judge import evaluate
from harness.compare.rules import Rule
from harness.config.models import Expectation
from harness.errors import HarnessError, SkipCheck, ToolMissing
from harness.model import Outcome
from harness.platform import facts

DATA = Path(__file__).parents[1] / "data" / "ethtool"
VIRTIO = DATA / "ethtool-6.1-debian12-virtio_net-eth0-S.txt"
CX4 = DATA / "ethq-issue8-connectx4lx-fw14.23-kernel4.15-ethtool-S-unindented.txt"
ETHTOOL = shutil.which("ethtool")


def ctx_for(tmp_path: Path, check_id: str = "nic-ports") -> CheckContext:
    return CheckContext(check_id, tmp_path / "run", 60, destructive=False, allow_destructive=False,
                        inventory={}, log=logging.getLogger("t"))


def params(**kw) -> NicPortsParams:
    return NicPortsParams.model_validate({"window_s": 0, **kw})


def real_nic() -> str:
    """This machine's first interface on a device whose driver has statistics, else skip."""
    if ETHTOOL is None:
        pytest.skip("ethtool not installed (apt-get install ethtool)")
    for nic in facts.physical_nics():
        if subprocess.run([ETHTOOL, "-S", nic.name], capture_output=True).returncode == 0:
            return nic.name
    pytest.skip("no network interface on a device with ethtool statistics here")


# --- the real ethtool -----------------------------------------------------------------------

def test_real_ethtool_on_this_machines_nic(tmp_path):
    nic = real_nic()
    ctx = ctx_for(tmp_path)
    out = run_judged(KIND, params(interfaces=[nic]), ctx)
    assert out.problems == ()
    errors = {m.labels["counter"] for m in out.metrics if m.name == "net.port_errors"}
    grown = {m.labels["counter"] for m in out.metrics if m.name == "net.error_delta"}
    assert errors and errors == grown and {m.labels["iface"] for m in out.metrics} == {nic}
    assert [r.argv for r in ctx.tool_runs] == [("ethtool", "-S", nic)] * 2
    assert "NIC statistics" in (ctx.run_dir / ctx.tool_runs[0].stdout_file).read_text()
    assert out.summary.startswith("1 interface(s); ")


def test_real_ethtool_by_default_reads_every_interface_on_a_device(tmp_path):
    nic = real_nic()
    out = run_judged(KIND, params(), ctx_for(tmp_path))
    assert nic in out.details["interfaces"] and "lo" not in out.details["interfaces"]


def test_real_ethtool_on_lo_makes_the_run_invalid_in_its_own_words(tmp_path):
    if ETHTOOL is None:
        pytest.skip("ethtool not installed (apt-get install ethtool)")
    out = run_judged(KIND, params(interfaces=["lo"]), ctx_for(tmp_path))
    (problem,) = out.problems
    assert problem.startswith("lo: ethtool -S lo: exit ") and problem.endswith(": no stats available")
    # no counters; the link is still read from sysfs: lo's operstate is "unknown", its carrier 1
    assert [(m.name, m.value) for m in out.metrics] == [("net.link_up", 1.0)]


def test_ethtool_missing_is_an_error_naming_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ToolMissing, match="ethtool not found; install it with: apt-get install ethtool"):
        run_judged(KIND, params(interfaces=["lo"]), ctx_for(tmp_path))


def test_an_interface_that_is_not_there(tmp_path):
    with pytest.raises(HarnessError, match="nosuch0: no such network interface in /sys/class/net"):
        run_judged(KIND, params(interfaces=["nosuch0"]), ctx_for(tmp_path))


# --- growth, through a stand-in ethtool -------------------------------------------------------

@pytest.fixture
def standin(tmp_path, monkeypatch) -> Path:
    """`ethtool` on PATH printing the file `served`; /sys/class/net with one NIC, ens1f0np0."""
    served = tmp_path / "served.txt"
    tool = tmp_path / "bin" / "ethtool"
    tool.parent.mkdir()
    tool.write_text(f'#!/bin/sh\n[ "$1" = -S ] || exit 2\ncat "{served}"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tool.parent}:/usr/bin:/bin")
    (tmp_path / "sys" / "class" / "net" / "ens1f0np0" / "device").mkdir(parents=True)
    (tmp_path / "sys" / "class" / "net" / "lo").mkdir()
    monkeypatch.setattr(facts, "SYS", tmp_path / "sys")
    return served


def test_crc_errors_grown_since_the_start_fail_and_name_the_nic(tmp_path, standin):
    standin.write_text(CX4.read_text())
    first = run_judged(KIND, params(), ctx_for(tmp_path, "nic-ports-start"))
    assert first.details["interfaces"] == ["ens1f0np0"] and first.problems == ()
    # edit of the real ConnectX-4 Lx counters: 3 CRC errors and a link drop since the first reading
    standin.write_text(CX4.read_text().replace("rx_crc_errors_phy: 0", "rx_crc_errors_phy: 3")
                       .replace("link_down_events_phy: 0", "link_down_events_phy: 1"))
    out = run_judged(KIND, NicPortsParams(since="nic-ports-start", max_error_delta=0), ctx_for(tmp_path))
    grown = {m.labels["counter"]: m.value for m in out.metrics if m.name == "net.error_delta" and m.value}
    assert grown == {"rx_crc_errors_phy": 3.0, "link_down_events_phy": 1.0}
    warned = sorted((e.labels["iface"], e.labels["counter"]) for e in out.evaluations
                    if e.outcome is Outcome.WARN)
    assert warned == [("ens1f0np0", "link_down_events_phy"), ("ens1f0np0", "rx_crc_errors_phy")]
    rule = Rule(Expectation(metric="net.error_delta", labels={"counter": "rx_crc_errors_phy"}, max=0,
                            unit="count"), "lab profile")
    (ev,) = evaluate([rule], out.metrics)
    assert ev.outcome is Outcome.FAIL and ev.labels == {"counter": "rx_crc_errors_phy", "iface": "ens1f0np0"}
    assert out.summary.startswith("1 interface(s); errors since check nic-ports-start (")
    assert "rx_crc_errors_phy +3 on ens1f0np0" in out.summary
    absolute = {m.labels["counter"]: m.value for m in out.metrics if m.name == "net.port_errors"}
    assert absolute["tx_pci_signal_integrity"] == 34  # the real value, not grown: no delta


def test_no_growth_passes_the_own_rule(tmp_path, standin):
    standin.write_text(VIRTIO.read_text())
    out = run_judged(KIND, params(max_error_delta=0), ctx_for(tmp_path))
    assert {e.outcome for e in out.evaluations} == {Outcome.PASS} and len(out.evaluations) == 3


def test_no_interface_on_a_device_skips(tmp_path, monkeypatch):
    (tmp_path / "sys" / "class" / "net" / "lo").mkdir(parents=True)
    monkeypatch.setattr(facts, "SYS", tmp_path / "sys")
    with pytest.raises(SkipCheck, match="no network interface on a device"):
        run_judged(KIND, params(), ctx_for(tmp_path))


# --- params and plan ----------------------------------------------------------------------

@pytest.mark.parametrize("kw, words", [
    ({"window_s": 1, "since": "a"}, "give window_s or since, not both"),
    ({"interfaces": ["eth0 -s"]}, "not an interface name or pattern"),
    ({"max_error_delta": -1}, "greater than or equal to 0"),
])
def test_bad_params_are_refused(kw, words):
    with pytest.raises(ValidationError, match=words):
        NicPortsParams.model_validate(kw)


def test_plan():
    link = ("cat", "/sys/class/net/<iface>/{operstate,carrier,speed}")
    argvs = [c.argv for c in KIND.plan(NicPortsParams(interfaces=["nosuch0"]), {})]
    assert argvs == [("ethtool", "-S", "nosuch0"), ("sleep", "10"), ("ethtool", "-S", "nosuch0"), link]
    argvs = [c.argv for c in KIND.plan(NicPortsParams(interfaces=["nosuch0"], since="start"), {})]
    assert argvs == [("cat", "<run>/raw/start/after.json"), ("ethtool", "-S", "nosuch0"), link]
