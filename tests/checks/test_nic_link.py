"""The nic_ports check's link state and speed (sysfs /sys/class/net): this machine's real
interfaces, and trees built from the real H100 node's Ethernet ports (tests/support/netsysfs.py).

Counters come from a stand-in `ethtool` printing the real captured virtio_net `ethtool -S`
output for every interface, so the tree tests exercise the link reading alone. Faults that the
real values do not hold (a 400G port trained at 200G, a NIC without a speed file) are edits of
the trees, made by the tests, and say so.
"""

from __future__ import annotations

import logging
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from judging import run_judged
from netsysfs import DRIVER, h100_ethernet, write_iface
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.nic_ports import KIND, NicPortsParams
from harness.compare.judge import evaluate
from harness.compare.rules import Rule
from harness.config.models import Expectation
from harness.model import Outcome
from harness.parsers import linkstate
from harness.platform import facts, netdev

VIRTIO = Path(__file__).parents[1] / "data" / "ethtool" / "ethtool-6.1-debian12-virtio_net-eth0-S.txt"
ETHTOOL = shutil.which("ethtool")
SRC = "check param expect_speed_gbit 400"


def ctx_for(tmp_path: Path) -> CheckContext:
    return CheckContext("nic-ports", tmp_path / "run", 60, destructive=False, allow_destructive=False,
                        inventory={}, log=logging.getLogger("t"))


def run(tmp_path: Path, **kw):
    return run_judged(KIND, NicPortsParams.model_validate({"window_s": 0, **kw}), ctx_for(tmp_path))


def values(out, name: str) -> dict[str, float]:
    return {str(m.labels["iface"]): m.value for m in out.metrics if m.name == name}


def outcomes(out) -> dict[tuple[str, str], Outcome]:
    return {(e.metric, str(e.labels.get("iface"))): e.outcome for e in out.evaluations
            if e.metric.startswith("net.link")}


@pytest.fixture
def sys_root(tmp_path, monkeypatch) -> Path:
    """facts.SYS pointed at an empty tree, and a stand-in `ethtool -S` printing real output."""
    tool = tmp_path / "bin" / "ethtool"
    tool.parent.mkdir()
    tool.write_text(f'#!/bin/sh\n[ "$1" = -S ] || exit 2\ncat "{VIRTIO}"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tool.parent}:/usr/bin:/bin")
    root = tmp_path / "sys"
    monkeypatch.setattr(facts, "SYS", root)
    return root


# --- the real H100 node's Ethernet ports ------------------------------------------------------

def test_up_and_down_ports_of_a_real_node(tmp_path, sys_root):
    h100_ethernet(sys_root)
    out = run(tmp_path)
    assert out.problems == () and out.evaluations == ()  # no rule of its own: recorded only
    assert values(out, "net.link_up") == {"mlx5_1": 1.0, "mlx5_2": 0.0, "mlx5_7": 0.0, "mlx5_8": 0.0}
    # 100 Gb/s = 12.5 GB/s; a port that is down measures 0
    assert values(out, "net.link_speed") == {"mlx5_1": 12.5, "mlx5_2": 0.0, "mlx5_7": 0.0, "mlx5_8": 0.0}
    assert {m.labels["driver"] for m in out.metrics if m.name.startswith("net.link")} == {DRIVER}
    assert out.details["links"]["mlx5_1"] == {"operstate": "up", "carrier": "1", "speed": "100000",
                                              "driver": DRIVER, "device": "0000:11:00.0"}
    assert out.details["links"]["mlx5_2"]["carrier"] is None  # EINVAL when administratively down
    assert "; down: mlx5_2, mlx5_7, mlx5_8; lowest speed 100 Gb/s on mlx5_1" in out.summary


def test_expect_speed_gbit_fails_ports_down_or_slower(tmp_path, sys_root):
    h100_ethernet(sys_root)
    out = run(tmp_path, expect_speed_gbit=400)
    assert outcomes(out) == {
        ("net.link_up", "mlx5_1"): Outcome.PASS, ("net.link_speed", "mlx5_1"): Outcome.FAIL,
        **{(m, p): Outcome.FAIL for m in ("net.link_up", "net.link_speed")
           for p in ("mlx5_2", "mlx5_7", "mlx5_8")}}
    slow = next(e for e in out.evaluations if e.metric == "net.link_speed" and e.labels["iface"] == "mlx5_1")
    assert slow.message == "measured 12.5 GB/s, expected >= 50 GB/s" and slow.source == SRC
    assert slow.labels == {"iface": "mlx5_1", "driver": DRIVER}


def test_expect_speed_gbit_passes_a_port_at_its_speed(tmp_path, sys_root):
    h100_ethernet(sys_root)
    out = run(tmp_path, interfaces=["mlx5_1"], expect_speed_gbit=100)
    assert set(outcomes(out).values()) == {Outcome.PASS} and len(outcomes(out)) == 2


def test_a_400g_port_trained_at_200g_fails(tmp_path, sys_root):
    h100_ethernet(sys_root)
    speed = sys_root / "class" / "net" / "mlx5_1" / "speed"
    speed.write_text("400000\n")  # edit: the up port at 400 Gb/s (SPEED_400000) passes
    out = run(tmp_path, interfaces=["mlx5_1"], expect_speed_gbit=400)
    assert set(outcomes(out).values()) == {Outcome.PASS}
    speed.write_text("200000\n")  # edit: the same port trained at 200 Gb/s
    out = run(tmp_path, interfaces=["mlx5_1"], expect_speed_gbit=400)
    (ev,) = [e for e in out.evaluations if e.metric == "net.link_speed"]
    assert ev.outcome is Outcome.FAIL and ev.measured == 25.0 and ev.low == 50.0


def test_a_profile_expectation_judges_the_link(tmp_path, sys_root):
    h100_ethernet(sys_root)
    out = run(tmp_path)
    rule = Rule(Expectation(metric="net.link_speed", labels={"driver": DRIVER}, min=12.5, unit="GB/s"), "lab")
    evs = evaluate([rule], out.metrics)
    assert {str(e.labels["iface"]): e.outcome for e in evs} == {
        "mlx5_1": Outcome.PASS, "mlx5_2": Outcome.FAIL, "mlx5_7": Outcome.FAIL, "mlx5_8": Outcome.FAIL}


# --- NICs that cannot tell their speed --------------------------------------------------------

def test_an_up_nic_without_a_known_speed_is_not_a_failure(tmp_path, sys_root):
    # this VM's real eth0 values (virtio_net: speed -1); edit: ens9 like it but with no speed file
    write_iface(sys_root, "eth0", {"operstate": "up", "carrier": "1", "speed": "-1"}, "0000:00:03.0",
                driver="virtio_net")
    write_iface(sys_root, "ens9", {"operstate": "up", "carrier": "1"}, "0000:00:09.0", driver="virtio_net")
    out = run(tmp_path)
    assert values(out, "net.link_up") == {"eth0": 1.0, "ens9": 1.0}
    assert values(out, "net.link_speed") == {}  # unmeasured, not 0
    assert out.evaluations == () and out.summary.endswith("; all 2 up; speed unknown: ens9, eth0")
    # asked for a speed it cannot measure: an error of the check, not a failure of the NIC
    out = run(tmp_path, interfaces=["eth0"], expect_speed_gbit=10)
    assert outcomes(out) == {("net.link_up", "eth0"): Outcome.PASS, ("net.link_speed", "None"): Outcome.ERROR}


def test_an_interface_with_no_link_files_gives_no_link_metric(tmp_path, sys_root):
    write_iface(sys_root, "ens1f0np0", {}, "0000:17:00.0")  # edit: nothing readable
    out = run(tmp_path)
    assert [m for m in out.metrics if m.name.startswith("net.link")] == []
    assert out.details["links"]["ens1f0np0"]["operstate"] is None


# --- this machine's real interfaces -----------------------------------------------------------

def real_links() -> list[netdev.NetLink]:
    if ETHTOOL is None:
        pytest.skip("ethtool not installed (apt-get install ethtool)")
    return [netdev.link(p.name) for p in sorted((facts.SYS / "class/net").iterdir())]


def test_real_link_of_this_machines_nics(tmp_path):
    nics = [ln for ln in real_links() if ln.device is not None
            and subprocess.run([ETHTOOL, "-S", ln.iface], capture_output=True).returncode == 0]
    if not nics:
        pytest.skip("no network interface on a device with ethtool statistics here")
    nic = nics[0]
    out = run(tmp_path, interfaces=[nic.iface])
    up = (facts.SYS / "class/net" / nic.iface / "operstate").read_text().strip() == "up"
    assert values(out, "net.link_up") == {nic.iface: float(up)}
    assert {m.labels.get("driver") for m in out.metrics if m.name == "net.link_up"} == {nic.driver}
    speed = linkstate.speed_mbps(nic.files.get("speed"))
    want = {nic.iface: speed / 8000} if up and speed else ({} if up else {nic.iface: 0.0})
    assert values(out, "net.link_speed") == want  # virtio_net here: up, speed -1, so none


def test_a_real_interface_that_is_down_measures_0_and_fails_the_expectation(tmp_path):
    down = [ln for ln in real_links() if ln.files.get("operstate") == "down"
            and subprocess.run([ETHTOOL, "-S", ln.iface], capture_output=True).returncode == 0]
    if not down:
        pytest.skip("no interface that is down here (this VM has ifb0)")
    iface = down[0].iface
    out = run(tmp_path, interfaces=[iface], expect_speed_gbit=400)
    assert out.problems == ()
    assert values(out, "net.link_up") == {iface: 0.0} and values(out, "net.link_speed") == {iface: 0.0}
    assert outcomes(out) == {("net.link_up", iface): Outcome.FAIL, ("net.link_speed", iface): Outcome.FAIL}
    assert f"; down: {iface}" in out.summary


@pytest.mark.parametrize("value", [0, -400, 20000])
def test_expect_speed_gbit_must_be_a_speed(value):
    with pytest.raises(ValidationError, match="expect_speed_gbit"):
        NicPortsParams(expect_speed_gbit=value)
