"""platform/pair: a server and a client as real processes; the server is reaped on every path."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from fake_perftest import gone, write_fake

from harness.errors import ToolMissing
from harness.platform import pair

DATA = Path(__file__).parents[1] / "data" / "perftest"
SAMPLE = DATA / "ib_write_bw_dgx_spark_cx7_roce_4qp_report_gbits_rdma_cm.txt"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tmp_path: Path, exe: Path, port: int, **kw):
    server = [str(exe), "-d", "mlx5_0", "-p", str(port), "--report_gbits"]
    client = [*server, "localhost"]
    return pair.run_pair(server, client, server_out=tmp_path / "s.out", server_err=tmp_path / "s.err",
                         client_out=tmp_path / "c.out", client_err=tmp_path / "c.err", port=port, **kw)


def pid(log: Path, side: str) -> int:
    return int(Path(f"{log}.{side}.pid").read_text())


def test_listening_ports_from_proc_net_tcp_text():
    text = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
            "timeout inode\n"
            "   0: 0100007F:4853 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n"
            "   1: 0100007F:0016 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 2 1\n"
            "   2: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 0 0 0 0 0\n"
            "garbage\n")
    assert pair.listening_ports(text) == {0x4853, 0x1F90}  # 18515 and 8080; 22 is not listening


def test_client_waits_for_a_slow_server_then_both_finish(tmp_path):
    log = tmp_path / "log"
    exe = write_fake(tmp_path / "bin" / "ib_write_bw", SAMPLE, log=log, listen_delay=1.0)
    res = run(tmp_path, exe, free_port(), timeout=30)
    assert res.client is not None and res.client.rc == 0 and res.server.rc == 0
    assert not res.server.timed_out
    assert (tmp_path / "c.out").read_text() == SAMPLE.read_text()
    assert gone(pid(log, "mlx5_0.server"))


def test_a_lingering_server_is_killed_after_the_grace_period(tmp_path):
    log = tmp_path / "log"
    exe = write_fake(tmp_path / "bin" / "ib_write_bw", SAMPLE, log=log, server_linger=True)
    res = run(tmp_path, exe, free_port(), timeout=30, grace_s=0.5)
    assert res.client is not None and res.client.rc == 0
    assert res.server.timed_out and res.server.rc is not None and res.server.rc < 0
    assert gone(pid(log, "mlx5_0.server"))


def test_a_hanging_client_times_out_and_both_are_killed(tmp_path):
    log = tmp_path / "log"
    exe = write_fake(tmp_path / "bin" / "ib_write_bw", SAMPLE, log=log, client_hang=True)
    res = run(tmp_path, exe, free_port(), timeout=1.5, grace_s=0.2)
    assert res.client is not None and res.client.timed_out
    assert gone(pid(log, "client")) and gone(pid(log, "mlx5_0.server"))


def test_a_server_that_dies_at_once_skips_the_client(tmp_path):
    log = tmp_path / "log"
    exe = write_fake(tmp_path / "bin" / "ib_write_bw", SAMPLE, log=log, server_fail=True)
    res = run(tmp_path, exe, free_port(), timeout=30)
    assert res.client is None and res.server.rc == 1
    assert "Unable to find the Infiniband/RoCE device" in res.server.tail()
    assert log.read_text().count("\n") == 1  # only the server ever started


def test_missing_server_binary(tmp_path):
    with pytest.raises(ToolMissing, match="not found"):
        run(tmp_path, tmp_path / "no-such-perftest", free_port(), timeout=5)
