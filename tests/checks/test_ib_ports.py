"""The ib_ports check on real directory trees laid out like /sys/class/infiniband.

The trees are built from real values (tests/support/ibsysfs.py): the port states and rates of a real
`ibstat` of an H100 node (8 ConnectX-7 NDR 400 ports Active, 4 Ethernet ports) in the kernel's
sysfs formats, and error counters from a real perfquery and a real sysfs dump. The faults (a port
Down, one trained at 200, symbol errors growing, a port vanishing) are edits of those trees, made
by the tests, and say so.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from ibsysfs import IB_NDR, counter, dump_counters, h100_tree, write_port, zero_counters
from judging import run_judged
from pcisysfs import CX7, bind, lines, write_tree
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.ib_ports import KIND, IbPortsParams
from harness.compare.judge import evaluate
from harness.compare.rules import Rule
from harness.config.loader import load_profile
from harness.errors import HarnessError, SkipCheck
from harness.model import Outcome
from harness.parsers import ibports
from harness.platform import pci, proc

ROOT = Path(__file__).resolve().parents[2]


def ctx_for(tmp_path: Path, check_id: str = "ib-ports", hardware: dict | None = None) -> CheckContext:
    return CheckContext(check_id, tmp_path / "run", 60, destructive=False, allow_destructive=False,
                        inventory={}, log=logging.getLogger("t"), hardware=hardware or {})


def run(tmp_path: Path, root: Path, check_id: str = "ib-ports", **kw):
    params = IbPortsParams.model_validate({"sysfs_root": str(root), "window_s": 0, **kw})
    return run_judged(KIND, params, ctx_for(tmp_path, check_id))


def profile_rules(name: str = "h100-sxm-8x") -> list[Rule]:
    prof = load_profile(ROOT / "profiles" / f"{name}.yaml").profile
    return [Rule(e, prof.name) for e in prof.expectations if e.metric in KIND.metrics]


def judged(out) -> list:
    return list(evaluate(profile_rules(), out.metrics)) + list(out.evaluations)


def failures(out) -> list[tuple[str, str, float]]:
    return sorted((e.metric, str(e.labels.get("device")), e.measured) for e in judged(out)
                  if e.outcome is Outcome.FAIL)


def values(out, name: str) -> dict[tuple[str, int], float]:
    return {(m.labels["device"], m.labels["port"]): m.value for m in out.metrics if m.name == name}


# --- the sysfs formats ----------------------------------------------------------------------

@pytest.mark.parametrize("text, state", [("4: ACTIVE\n", "ACTIVE"), ("1: DOWN", "DOWN"),
                                         ("5: LinkUp", "LinkUp"), ("ACTIVE", "ACTIVE")])
def test_sysfs_value(text, state):
    assert ibports.sysfs_value(text) == state


def test_sysfs_port_metrics():
    files = {"state": "4: ACTIVE", "rate": "400 Gb/sec (4X NDR)", "link_layer": "InfiniBand"}
    got = {m.name: m.value for m in ibports.sysfs_port("mlx5_0", "1", files)}
    assert got == {"ib.port_active": 1.0, "ib.rate": 50.0}
    down = ibports.sysfs_port("mlx5_2", "1", {"state": "1: DOWN", "rate": "2.5 Gb/sec (1X SDR)"})
    assert [(m.name, m.value, m.labels["link_layer"]) for m in down] == [
        ("ib.port_active", 0.0, "unknown"), ("ib.rate", 0.3125, "unknown")]
    assert ibports.sysfs_port("mlx5_0", "1", {"rate": "400 Gb/sec (4X NDR)"}) == []  # no state: nothing


# --- healthy ports pass ---------------------------------------------------------------------

def test_healthy_ndr_ports_pass_the_profile_and_the_own_rule(tmp_path):
    root = h100_tree(tmp_path / "infiniband")
    out = run(tmp_path, root, link_layer="InfiniBand", expect_rate_gbit=400)
    assert out.problems == ()
    assert values(out, "ib.port_active") == {(d, 1): 1.0 for d in IB_NDR}
    assert values(out, "ib.rate") == {(d, 1): 50.0 for d in IB_NDR}
    deltas = [m for m in out.metrics if m.name == "ib.error_delta"]
    assert len(deltas) == 8 * 13 and {m.value for m in deltas} == {0.0}
    assert next(m.value for m in out.metrics if m.name == "ib.hca_count") == 12  # every device counts
    evs = judged(out)
    assert evs and {e.outcome for e in evs} == {Outcome.PASS}
    assert len(out.evaluations) == 16  # the own rule: Active and >= 400 Gb/s, each of 8 ports
    assert out.summary == ("8 port(s): 8 Active; lowest InfiniBand rate 400 Gb/s on mlx5_0/1; "
                           "no error counter grew over 0 s")
    assert out.details["devices"]["mlx5_0"]["fw_ver"] == "28.39.1002"


def test_whole_node_ethernet_ports_are_reported_but_not_judged_as_infiniband(tmp_path):
    out = run(tmp_path, h100_tree(tmp_path / "infiniband"))
    active = {(m.labels["device"], m.labels["link_layer"]): m.value for m in out.metrics
              if m.name == "ib.port_active"}
    assert len(active) == 12
    assert [k for k, v in active.items() if not v] == [("mlx5_2", "Ethernet"), ("mlx5_7", "Ethernet"),
                                                       ("mlx5_8", "Ethernet")]
    assert failures(out) == []  # the profile's rules select link_layer InfiniBand
    assert "not Active: mlx5_2/1, mlx5_7/1, mlx5_8/1" in out.summary


# --- faults fail and name the port ------------------------------------------------------------

def test_a_port_down_fails_and_is_named(tmp_path):
    root = h100_tree(tmp_path / "infiniband")
    # edit: mlx5_4 goes Down/Disabled (the state pair of the real ibstat_cx6 sample); the kernel
    # then reports the slowest rate (real value of the H100 sample's down ports: 40)
    write_port(root, "mlx5_4", 1, "Down", "Disabled", "40", "InfiniBand", zero_counters())
    out = run(tmp_path, root, link_layer="InfiniBand", expect_rate_gbit=400)
    assert failures(out) == [("ib.port_active", "mlx5_4", 0.0), ("ib.port_active", "mlx5_4", 0.0),
                             ("ib.rate", "mlx5_4", 5.0), ("ib.rate", "mlx5_4", 5.0)]
    assert "not Active: mlx5_4/1" in out.summary
    assert "lowest InfiniBand rate 400 Gb/s on mlx5_0/1" in out.summary  # among the Active ports


def test_a_port_trained_at_200_fails_and_is_named(tmp_path):
    root = h100_tree(tmp_path / "infiniband")
    # edit: mlx5_5 trained at HDR 200 (the rate of the real ibstat_cx7_ib_200g_active sample)
    (root / "mlx5_5" / "ports" / "1" / "rate").write_text("200 Gb/sec (4X HDR)\n")
    out = run(tmp_path, root)
    (ev,) = [e for e in judged(out) if e.outcome is Outcome.FAIL]
    assert (ev.metric, ev.measured, ev.low) == ("ib.rate", 25.0, 50.0)
    assert ev.labels == {"device": "mlx5_5", "link_layer": "InfiniBand", "port": 1}
    assert ("lowest Ethernet rate 100 Gb/s on mlx5_1/1; lowest InfiniBand rate 200 Gb/s on mlx5_5/1"
            in out.summary)


def test_symbol_errors_growing_in_the_window_fail_and_are_named(tmp_path):
    root = h100_tree(tmp_path / "infiniband")

    def cable_goes_bad(pid: int, argv: tuple[str, ...], started: bool) -> None:
        if started and argv[0] == "sleep":  # edit during the soak window: 4 symbol errors on mlx5_6
            counter(root, "mlx5_6", "symbol_error", 4)

    proc.watch(cable_goes_bad)
    try:
        out = run(tmp_path, root, window_s=0.2)
    finally:
        proc.unwatch(cable_goes_bad)
    assert failures(out) == [("ib.error_delta", "mlx5_6", 4.0)]
    (ev,) = [e for e in judged(out) if e.outcome is Outcome.FAIL]
    assert ev.labels == {"counter": "symbol_error", "device": "mlx5_6", "link_layer": "InfiniBand", "port": 1}
    assert "errors over 0.2 s: symbol_error +4 on mlx5_6/1" in out.summary
    raw = sorted(p.name for p in (tmp_path / "run" / "raw" / "ib-ports").iterdir())
    assert raw == ["01-soak-window.stderr", "01-soak-window.stdout", "after.json", "before.json"]


def test_deltas_since_an_earlier_check_span_the_run(tmp_path):
    root = h100_tree(tmp_path / "infiniband")
    first = run(tmp_path, root, check_id="ib-ports-start")
    assert failures(first) == []
    counter(root, "mlx5_9", "link_downed", 1)  # edit: the link of mlx5_9 dropped once since
    counter(root, "mlx5_9", "symbol_error", 7)
    params = IbPortsParams.model_validate({"sysfs_root": str(root), "since": "ib-ports-start"})
    out = run_judged(KIND, params, ctx_for(tmp_path, "ib-ports"))
    assert failures(out) == [("ib.error_delta", "mlx5_9", 1.0), ("ib.error_delta", "mlx5_9", 7.0)]
    assert out.details["window"].startswith("since check ib-ports-start (")
    assert KIND.plan(params, {})[0].argv == ("cat", "<run>/raw/ib-ports-start/after.json")


def test_since_without_an_earlier_reading_is_an_error(tmp_path):
    root = h100_tree(tmp_path / "infiniband")
    with pytest.raises(HarnessError, match="since: 'nope' left no counter reading in this run"):
        run(tmp_path, root, window_s=None, since="nope")


def test_a_port_that_vanishes_in_the_window_is_not_active(tmp_path):
    root = h100_tree(tmp_path / "infiniband")

    def hca_falls_off(pid: int, argv: tuple[str, ...], started: bool) -> None:
        if started and argv[0] == "sleep":  # edit: mlx5_10 leaves sysfs (HCA fell off the bus)
            shutil.rmtree(root / "mlx5_10")

    proc.watch(hca_falls_off)
    try:
        out = run(tmp_path, root, window_s=0.1)
    finally:
        proc.unwatch(hca_falls_off)
    assert failures(out) == [("ib.port_active", "mlx5_10", 0.0)]
    assert out.details["gone"] == ["mlx5_10/1"] and "gone during the check: mlx5_10/1" in out.summary


def test_saturated_legacy_counters_have_no_delta(tmp_path):
    root = tmp_path / "infiniband"
    write_port(root, "mlx5_1", 1, "Active", "LinkUp", "400", "InfiniBand", dump_counters())
    out = run(tmp_path, root)
    assert out.details["saturated"] == {"mlx5_1/1": ["excessive_buffer_overrun_errors", "link_downed",
                                                     "port_xmit_discards", "port_xmit_wait"]}
    grown = {m.labels["counter"] for m in out.metrics if m.name == "ib.error_delta"}
    assert len(grown) == 9 and "link_downed" not in grown and "symbol_error" in grown
    absolute = {m.labels["counter"]: m.value for m in out.metrics if m.name == "ib.port_errors"}
    assert absolute["link_downed"] == 255 and absolute["port_rcv_switch_relay_errors"] == 2
    assert "saturated (no delta): mlx5_1/1 excessive_buffer_overrun_errors,link_downed" in out.summary


def test_a_counter_that_saturates_in_the_window_still_counts(tmp_path):
    root = tmp_path / "infiniband"
    counters = {**zero_counters(), "symbol_error": 65530}  # edit of the real zeros: near the 16-bit top
    write_port(root, "mlx5_0", 1, "Active", "LinkUp", "400", "InfiniBand", counters)
    run(tmp_path, root, check_id="start")
    counter(root, "mlx5_0", "symbol_error", 65535)
    params = IbPortsParams.model_validate({"sysfs_root": str(root), "since": "start"})
    out = run_judged(KIND, params, ctx_for(tmp_path))
    grown = {m.labels["counter"]: m.value for m in out.metrics if m.name == "ib.error_delta"}
    assert grown["symbol_error"] == 5 and out.details["saturated"] == {"mlx5_0/1": ["symbol_error"]}
    assert failures(out) == [("ib.error_delta", "mlx5_0", 5.0)]


def test_hw_counter_errors_are_read_too(tmp_path):
    root = tmp_path / "infiniband"
    port = write_port(root, "mlx5_0", 1, "Active", "LinkUp", "400", "Ethernet", zero_counters())
    hw = port / "hw_counters"
    hw.mkdir()
    # mlx5 hw_counters names; synthetic values
    for name, value in {"local_ack_timeout_err": 3, "out_of_buffer": 0, "rx_write_requests": 9}.items():
        (hw / name).write_text(f"{value}\n")
    out = run(tmp_path, root)
    absolute = {m.labels["counter"]: m.value for m in out.metrics if m.name == "ib.port_errors"}
    assert absolute["local_ack_timeout_err"] == 3 and absolute["out_of_buffer"] == 0
    assert "rx_write_requests" not in absolute


# --- selection, absence, params -------------------------------------------------------------

def test_device_patterns_and_a_missing_device(tmp_path):
    root = h100_tree(tmp_path / "infiniband")
    out = run(tmp_path, root, devices=["mlx5_1*", "mlx5_0/1"], exclude=["mlx5_10"])
    assert sorted(values(out, "ib.port_active")) == [("mlx5_0", 1), ("mlx5_1", 1), ("mlx5_11", 1)]
    out = run(tmp_path, root, devices=["mlx5_0", "mlx5_12"])
    assert out.problems == ("mlx5_12: no such RDMA device or port in " + str(root) + " (found: mlx5_0, "
                            "mlx5_1, mlx5_10, mlx5_11, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7, "
                            "mlx5_8, mlx5_9)",)
    with pytest.raises(HarnessError, match="no port left to check"):
        run(tmp_path, root, devices=["mlx5_2"], link_layer="InfiniBand")


@pytest.mark.parametrize("make", [False, True])
def test_no_rdma_device_skips_or_fails_when_the_profile_expects_hcas(tmp_path, make, monkeypatch):
    root = tmp_path / "infiniband"
    if make:
        root.mkdir()
    params = IbPortsParams.model_validate({"sysfs_root": str(root)})
    with pytest.raises(SkipCheck, match=f"no RDMA device: {root} is empty or missing"):
        run_judged(KIND, params, ctx_for(tmp_path))
    bus = tmp_path / "pci"  # and none on the PCI bus: absent hardware (issue #25 item 5)
    bus.mkdir()
    monkeypatch.setattr(pci, "SYSFS", bus)
    done = run_judged(KIND, params, ctx_for(tmp_path, hardware={"hca_count": 8}))
    assert [(m.name, m.value) for m in done.metrics] == [("ib.hca_count", 0.0)]
    assert done.summary.endswith("none on the PCI bus (absent hardware, not a driver)")


def test_this_machine_has_no_rdma_device_and_skips():
    if Path("/sys/class/infiniband").is_dir() and any(Path("/sys/class/infiniband").iterdir()):
        pytest.skip("this machine has RDMA devices")
    with pytest.raises(SkipCheck, match="no RDMA device: /sys/class/infiniband"):
        run_judged(KIND, IbPortsParams(), ctx_for(Path("/tmp/unused")))


@pytest.mark.skipif(shutil.which("ibstat") is None, reason="ibstat not installed (infiniband-diags)")
def test_real_ibstat_facts_go_to_details(tmp_path):
    out = run(tmp_path, h100_tree(tmp_path / "infiniband"), ibstat=True)
    # the real ibstat reads this machine, which has no CA: it prints nothing, and says so in details
    assert out.details["ibstat"] == {}
    assert out.details["ibstat_problems"] == ["not ibstat output (no CA found)"]
    assert out.problems == ()


@pytest.mark.parametrize("kw, words", [
    ({"window_s": 5, "since": "start"}, "give window_s or since, not both"),
    ({"devices": ["mlx5_0; reboot"]}, "not a device or device/port pattern"),
    ({"devices": []}, "at least 1 item"),
    ({"since": "../x"}, "String should match pattern"),
    ({"expect_rate_gbit": 0}, "greater than 0"),
    ({"link_layer": "IB"}, "Input should be"),
])
def test_bad_params_are_refused(kw, words):
    with pytest.raises(ValidationError, match=words):
        IbPortsParams.model_validate(kw)


def test_plan():
    p = IbPortsParams.model_validate({"window_s": 30, "ibstat": True})
    argvs = [c.argv for c in KIND.plan(p, {})]
    assert argvs[1:] == [("sleep", "30"), argvs[0], ("ibstat",)]
    assert argvs[0][1].startswith("/sys/class/infiniband/<device>/ports/<n>/")
    assert KIND.hooks.estimate_s is not None and KIND.hooks.estimate_s(IbPortsParams()) == 10.0


def test_six_of_eight_hcas_with_two_unbound_on_the_bus_errors_naming_the_driver(tmp_path, monkeypatch):
    """Issue #25 item 5: of 8 HCAs the profile expects, 6 in sysfs and 2 on the PCI bus without a
    driver is the environment's (ERRORED); 6 and no more on the bus is the hardware's (REJECTED)."""
    root = tmp_path / "infiniband"
    for i in range(6):
        write_port(root, f"mlx5_{i}", 1, "Active", "LinkUp", "400", "InfiniBand", zero_counters())
    bus = write_tree(tmp_path / "pci", lines(CX7))
    addrs = [ln.split()[0] for ln in lines(CX7)]
    for a in addrs[:6]:
        bind(bus, a, "mlx5_core")
    monkeypatch.setattr(pci, "SYSFS", bus)
    params = IbPortsParams.model_validate({"sysfs_root": str(root), "window_s": 0})
    with pytest.raises(HarnessError, match=r"profile expects 8 RDMA adapters, found 6 in .*infiniband, but "
                       r"the PCI bus has 8 \(.*\): 2 with no driver bound: load mlx5_core and mlx5_ib"):
        run_judged(KIND, params, ctx_for(tmp_path, hardware={"hca_count": 8}))
    for a in addrs[6:]:  # those two gone from the bus: absent hardware, judged by the count rule
        shutil.rmtree(bus / a)
    done = run_judged(KIND, params, ctx_for(tmp_path, hardware={"hca_count": 8}))
    assert ("ib.hca_count", 6.0) in [(m.name, m.value) for m in done.metrics]
