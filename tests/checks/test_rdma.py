"""The rdma check kind: params, command lines, the real perftest without devices, and
server/client pairs through real processes (a stand-in prints real captured perftest output)."""

from __future__ import annotations

import logging
import shutil
import socket
from pathlib import Path

import pytest
from fake_perftest import gone, write_fake
from judging import run_judged
from pcisysfs import CX7, lines, write_tree
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.rdma import KIND, RdmaParams, build_pair
from harness.errors import HarnessError, SkipCheck, ToolError, ToolTimeout
from harness.model import Outcome
from harness.platform import infiniband, pci

DATA = Path(__file__).parents[1] / "data" / "perftest"
GBITS = DATA / "ib_write_bw_dgx_spark_cx7_roce_4qp_report_gbits_rdma_cm.txt"
REAL_PERFTEST = shutil.which("ib_write_bw")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ctx_for(tmp_path: Path, timeout_s: float = 30) -> CheckContext:
    return CheckContext("rdma", tmp_path / "run", timeout_s, destructive=False, allow_destructive=False,
                        inventory={}, log=logging.getLogger("t"))


def params(**kw) -> RdmaParams:
    return RdmaParams.model_validate(kw)


# --- params and command lines -------------------------------------------------------------

def test_loopback_pair_per_device_with_its_own_port():
    p = params(devices=["mlx5_0", "mlx5_1"])
    cmds = [c.argv for c in KIND.plan(p, {})]
    base = ("-F", "-s", "65536", "-q", "1", "--report_gbits")
    assert cmds == [("ib_write_bw", "-d", "mlx5_0", "-p", "18515", *base),
                    ("ib_write_bw", "-d", "mlx5_0", "-p", "18515", *base, "localhost"),
                    ("ib_write_bw", "-d", "mlx5_1", "-p", "18516", *base),
                    ("ib_write_bw", "-d", "mlx5_1", "-p", "18516", *base, "localhost")]


def test_gpudirect_roce_and_latency_options():
    p = params(test="ib_write_lat", devices=["mlx5_0", "mlx5_3"], gpus=[0, 1], gid_index=3, rdma_cm=True,
               iterations=5000, size="2", client_device="mlx5_1", bin_dir="/opt/perftest")
    server, client = build_pair(p, "mlx5_3", 1)
    assert server == ["/opt/perftest/ib_write_lat", "-d", "mlx5_3", "-p", "18516", "-F", "-s", "2",
                      "-n", "5000", "-x", "3", "-R", "--use_cuda=1"]
    assert client[:3] == ["/opt/perftest/ib_write_lat", "-d", "mlx5_1"] and client[-1] == "localhost"


def test_peer_runs_the_client_only():
    p = params(devices=["mlx5_0"], peer="node17", all_sizes=True, duration_s=10)
    (cmd,) = KIND.plan(p, {})
    assert cmd.argv == ("ib_write_bw", "-d", "mlx5_0", "-p", "18515", "-F", "-a", "-q", "1", "--report_gbits",
                        "-D", "10", "node17")
    assert cmd.note == "client against node17"


def test_plan_without_devices_uses_sysfs(tmp_path, monkeypatch):
    monkeypatch.setattr(infiniband, "SYSFS", tmp_path / "none")
    assert KIND.plan(params(), {})[0].argv[2] == "<every HCA in /sys/class/infiniband>"
    for d in ("mlx5_1", "mlx5_0"):
        (tmp_path / "ib" / d).mkdir(parents=True)
    monkeypatch.setattr(infiniband, "SYSFS", tmp_path / "ib")
    assert [c.argv[2] for c in KIND.plan(params(), {})] == ["mlx5_0", "mlx5_0", "mlx5_1", "mlx5_1"]


@pytest.mark.parametrize("kw, words", [
    ({"gpus": [0]}, "gpus pairs each GPU with a device"),
    ({"devices": ["mlx5_0"], "gpus": [-1]}, "greater than or equal to 0"),
    ({"devices": ["mlx5_0", "mlx5_1"], "gpus": [0]}, "gpus pairs each GPU with a device"),
    ({"iterations": 100, "duration_s": 5}, "not both"),
    ({"peer": "n1", "client_device": "mlx5_1"}, "client_device is for loopback"),
    ({"devices": ["mlx5_0; reboot"]}, "not an RDMA device name"),
    ({"devices": ["mlx5_0", "mlx5_0"]}, "duplicate device"),
    ({"devices": []}, "at least 1 item"),
    ({"size": "64Q"}, "not a size"),
    ({"test": "ib_atomic_bw"}, "Input should be"),
    ({"sibling_tolerance": 1.5}, "less than 1"),
])
def test_bad_params_are_refused(kw, words):
    with pytest.raises(ValidationError, match=words):
        RdmaParams.model_validate(kw)


# --- device discovery ---------------------------------------------------------------------

@pytest.mark.parametrize("make", [False, True])
def test_no_rdma_device_skips(tmp_path, monkeypatch, make):
    root = tmp_path / "infiniband"
    if make:
        root.mkdir()
    monkeypatch.setattr(infiniband, "SYSFS", root)
    with pytest.raises(SkipCheck, match=f"no RDMA device: {root} is empty or missing"):
        run_judged(KIND, params(), ctx_for(tmp_path))


def test_expected_hcas_absent_from_the_bus_fail_and_unbound_ones_error_naming_the_driver(tmp_path,
                                                                                       monkeypatch):
    """One rule for every counted family (issue #25 item 5; no RDMA device used to be ERRORED)."""
    root = tmp_path / "infiniband"
    monkeypatch.setattr(infiniband, "SYSFS", root)
    bus = tmp_path / "pci"
    bus.mkdir()
    monkeypatch.setattr(pci, "SYSFS", bus)
    ctx = ctx_for(tmp_path)
    ctx.hardware = {"hca_count": 8}
    done = run_judged(KIND, params(), ctx)
    (bad,) = [e for e in done.evaluations if e.outcome is Outcome.FAIL]
    assert (bad.metric, bad.measured, bad.low) == ("ib.hca_count", 0.0, 8.0)
    assert "none on the PCI bus (absent hardware, not a driver)" in bad.message
    write_tree(bus, lines(CX7))  # 7 ConnectX-7 HCAs and a ConnectX-6 Dx, no driver bound
    with pytest.raises(HarnessError, match=r"profile expects 8 RDMA adapters, found 0 in .*, but the PCI "
                       r"bus has 8 \(0000:1a:00.0, .* and 4 more\): 8 with no driver bound: load "
                       r"mlx5_core and mlx5_ib") as e:
        run_judged(KIND, params(), ctx)
    assert not isinstance(e.value, SkipCheck)


# --- the real perftest, on this machine without RDMA devices ----------------------------

@pytest.mark.skipif(REAL_PERFTEST is None, reason="perftest not installed (apt-get install perftest)")
def test_real_perftest_without_devices_is_an_error_naming_the_cause(tmp_path):
    ctx = ctx_for(tmp_path)
    with pytest.raises(ToolError, match=r"ib_write_bw server on mlx5_0 exited \(rc 1\) before the client "
                       "started: Unable to find the Infiniband/RoCE device"):
        run_judged(KIND, params(devices=["mlx5_0"], port=free_port(), ready_s=3), ctx)
    (server,) = ctx.tool_runs
    assert server.argv[0] == "ib_write_bw" and server.rc == 1
    assert "Did not detect devices" in (ctx.run_dir / server.stderr_file).read_text()


@pytest.mark.skipif(REAL_PERFTEST is None, reason="perftest not installed (apt-get install perftest)")
def test_real_perftest_client_against_a_peer_without_devices(tmp_path):
    with pytest.raises(ToolError, match=r"ib_write_bw on mlx5_0: perftest failed: Did not detect devices"):
        run_judged(KIND, params(devices=["mlx5_0"], peer="127.0.0.1", port=free_port()), ctx_for(tmp_path))


# --- pairs through real processes with a stand-in binary ---------------------------------

def test_every_sysfs_device_is_measured_and_compared(tmp_path, monkeypatch):
    root = tmp_path / "infiniband"
    for d in ("mlx5_0", "mlx5_1", "mlx5_2"):
        (root / d).mkdir(parents=True)
    monkeypatch.setattr(infiniband, "SYSFS", root)
    log = tmp_path / "perftest.log"
    write_fake(tmp_path / "bin" / "ib_write_bw", GBITS, log=log)
    ctx = ctx_for(tmp_path)
    # ready_s: the stand-in servers are Python scripts, slow to listen on a loaded machine (the
    # wait ends as soon as each listens)
    out = run_judged(KIND, params(bin_dir=str(tmp_path / "bin"), port=free_port(), ready_s=60), ctx)
    assert out.problems == ()
    bw = {m.labels["device"]: m.value for m in out.metrics if m.name == "rdma.bw_avg"}
    assert bw == pytest.approx({"mlx5_0": 111.71 / 8, "mlx5_1": 111.71 / 8, "mlx5_2": 111.71 / 8})
    assert all(m.labels["qps"] == 4 and m.labels["test"] == "ib_write_bw" for m in out.metrics)
    (ev,) = out.evaluations
    assert ev.outcome is Outcome.PASS and ev.metric == "rdma.bw_avg"
    assert "slowest of 3 (by device)" in ev.message
    assert out.summary == "3 HCAs; lowest 14.0 GB/s (112 Gb/s) on mlx5_0"
    assert len(ctx.tool_runs) == 6
    names = [Path(t.stdout_file).name for t in ctx.tool_runs]
    assert names[:2] == ["01-ib_write_bw-mlx5_0-server.stdout", "01-ib_write_bw-mlx5_0-client.stdout"]
    ports = {line.split()[line.split().index("-p") + 1] for line in log.read_text().splitlines()}
    assert len(ports) == 3  # one port per HCA
    for t in ctx.tool_runs:
        assert (ctx.run_dir / t.stdout_file).exists() and t.rc == 0
    for d in ("mlx5_0", "mlx5_1", "mlx5_2"):
        assert gone(int(Path(f"{log}.{d}.server.pid").read_text()))


def test_port_error_counters_are_read_before_and_after(tmp_path, monkeypatch):
    # A counters tree laid out like sysfs, with the real saturated values of
    # tests/data/ibcounters (link_downed 255, ...); the stand-in client "counts" 3 symbol errors.
    root = tmp_path / "infiniband"
    counters = root / "mlx5_0" / "ports" / "1" / "counters"
    counters.mkdir(parents=True)
    for name, value in {"symbol_error": 0, "link_downed": 255, "port_rcv_errors": 0,
                        "port_xmit_wait": 4294967295, "port_xmit_data": 205143497464492}.items():
        (counters / name).write_text(f"{value}\n")
    monkeypatch.setattr(infiniband, "SYSFS", root)
    write_fake(tmp_path / "bin" / "ib_write_bw", GBITS, log=tmp_path / "log",
               bump={str(counters / "symbol_error"): "3\n"})
    out = run_judged(KIND, params(bin_dir=str(tmp_path / "bin"), port=free_port()), ctx_for(tmp_path))
    deltas = {m.labels["counter"]: m.value for m in out.metrics if m.name == "ib.error_delta"}
    assert deltas == {"symbol_error": 3, "link_downed": 0, "port_rcv_errors": 0, "port_xmit_wait": 0}
    assert all(m.labels["device"] == "mlx5_0" and m.labels["port"] == 1
               for m in out.metrics if m.name == "ib.error_delta")
    assert out.details["saturated_counters"] == {"mlx5_0/1": ["link_downed", "port_xmit_wait"]}


def test_a_completion_error_from_the_client_is_a_tool_error(tmp_path):
    sample = DATA / "ib_write_bw_completion_error_syndrom_0x51_gpudirect.txt"
    write_fake(tmp_path / "bin" / "ib_write_bw", sample, log=tmp_path / "log", client_rc=1)
    with pytest.raises(ToolError, match="ib_write_bw on mlx5_0: perftest failed: Completion with error at "
                       r"client \(and 2 more error lines\)"):
        run_judged(KIND, params(devices=["mlx5_0"], bin_dir=str(tmp_path / "bin"), port=free_port()),
                 ctx_for(tmp_path))


def test_results_with_a_nonzero_client_exit_are_invalid(tmp_path):
    write_fake(tmp_path / "bin" / "ib_write_bw", GBITS, log=tmp_path / "log", client_rc=2)
    out = run_judged(KIND, params(devices=["mlx5_0"], bin_dir=str(tmp_path / "bin"), port=free_port()),
                   ctx_for(tmp_path))
    assert len(out.metrics) == 2
    assert out.problems == ("mlx5_0: client exited with status 2 after printing results",)


def test_a_hanging_client_times_out_and_nothing_is_left_running(tmp_path):
    log = tmp_path / "log"
    write_fake(tmp_path / "bin" / "ib_write_bw", GBITS, log=log, client_hang=True)
    with pytest.raises(ToolTimeout, match=r"timed out after 1\.5 s; client and server killed"):
        run_judged(KIND, params(devices=["mlx5_0"], bin_dir=str(tmp_path / "bin"), port=free_port()),
                 ctx_for(tmp_path, timeout_s=1.5))
    assert gone(int(Path(f"{log}.client.pid").read_text()))
    assert gone(int(Path(f"{log}.mlx5_0.server.pid").read_text()))
