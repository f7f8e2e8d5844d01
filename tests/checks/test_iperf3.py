"""The iperf3 check kind with the real iperf3 on loopback, through the runner and the CLI.

Every test that starts an iperf3 server proves it is gone afterwards (no process listening on
its port, none left with its command line).
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from clihelp import harness, run_dirs
from faulthelp import procs_with
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.iperf3 import KIND, Iperf3Params, free_port
from harness.errors import ToolError, ToolTimeout
from harness.platform.pair import is_listening

pytestmark = pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed "
                                "(scripts/setup.sh --test installs it)")


def iperf3_processes(port: int) -> list[int]:
    """Pids of iperf3 processes whose command line names `port`."""
    return procs_with(str(port), "iperf3")


def ctx_for(tmp_path: Path, timeout: float = 60) -> CheckContext:
    return CheckContext("net", tmp_path / "run", timeout, destructive=False, allow_destructive=False,
                        inventory={}, log=logging.getLogger("t"))


@pytest.fixture
def server():
    """A real one-shot `iperf3 -s -1` on a free loopback port, killed at teardown if still there."""
    port = free_port()
    proc = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if is_listening(port):
                break
            proc.poll()
            assert proc.returncode is None, "iperf3 server died"
            time.sleep(0.02)
        yield port
    finally:
        proc.kill()
        proc.wait()


def test_loopback_self_test_measures_and_cleans_up(tmp_path):
    ctx = ctx_for(tmp_path)
    out = KIND.run(Iperf3Params(loopback=True, duration=1, streams=2), ctx)
    assert out.problems == ()
    bw = {m.labels["side"]: m for m in out.metrics if m.name == "net.tcp_bw"}
    assert set(bw) == {"sender", "receiver"} and bw["receiver"].value > 0
    assert bw["receiver"].labels == {"side": "receiver", "direction": "forward", "peer": "loopback"}
    assert [m.name for m in out.metrics].count("net.tcp_retransmits") == 1
    server, client = ctx.tool_runs
    assert server.argv[1:4] == ("-s", "-1", "-B") and client.argv[1:3] == ("-c", "127.0.0.1")
    assert client.argv[client.argv.index("-P") + 1] == "2" and client.rc == 0
    port = int(server.argv[-1])
    assert not is_listening(port) and iperf3_processes(port) == []
    assert (ctx.run_dir / client.stdout_file).read_text().lstrip().startswith("{")
    assert out.details["streams"] == 2 and out.details["peer"] == "loopback"
    assert out.summary.startswith("iperf3 loopback, 2 stream(s), 1 s: receiver ")


def test_against_a_host_in_reverse(tmp_path, server):
    ctx = ctx_for(tmp_path)
    out = KIND.run(Iperf3Params(host="127.0.0.1", port=server, duration=1, reverse=True), ctx)
    assert out.problems == ()
    assert {(m.name, m.labels.get("side"), m.labels["direction"], m.labels["peer"]) for m in out.metrics} == {
        ("net.tcp_bw", "sender", "reverse", "127.0.0.1"), ("net.tcp_bw", "receiver", "reverse", "127.0.0.1"),
        ("net.tcp_retransmits", None, "reverse", "127.0.0.1")}
    (run,) = ctx.tool_runs
    assert run.argv[-1] == "-R"


def test_no_server_is_an_error_naming_iperf3s_reason(tmp_path):
    port = free_port()
    with pytest.raises(ToolError, match=r"iperf3 to 127\.0\.0\.1: iperf3: unable to connect to server"):
        KIND.run(Iperf3Params(host="127.0.0.1", port=port, duration=1), ctx_for(tmp_path))


def test_timeout_kills_client_and_loopback_server(tmp_path):
    ctx = ctx_for(tmp_path, timeout=1.5)
    with pytest.raises(ToolTimeout, match=r"timed out after 1\.5 s; client and server killed"):
        KIND.run(Iperf3Params(loopback=True, duration=30), ctx)
    server = ctx.tool_runs[0]
    port = int(server.argv[-1])
    assert iperf3_processes(port) == [] and not is_listening(port)


@pytest.mark.parametrize("kw, words", [
    ({}, "give either host"),
    ({"host": "10.0.0.2", "loopback": True}, "give either host"),
    ({"host": "-s; rm -rf /"}, "should match pattern"),
    ({"loopback": True, "streams": 0}, "greater than or equal to 1"),
])
def test_bad_params_are_refused(kw, words):
    with pytest.raises(ValidationError, match=words):
        Iperf3Params.model_validate(kw)


def test_plan():
    cmds = [c.argv for c in KIND.plan(Iperf3Params(host="iperf.lab", duration=5, streams=4, omit=2), {})]
    assert cmds == [("iperf3", "-c", "iperf.lab", "-p", "5201", "-J", "-t", "5", "-P", "4", "-O", "2")]
    server, client = KIND.plan(Iperf3Params(loopback=True), {})
    assert server.argv[:3] == ("iperf3", "-s", "-1") and server.argv[-1] == "<free port>"
    assert client.argv[:3] == ("iperf3", "-c", "127.0.0.1")


SUITE = """\
name: net
checks:
  - id: tcp-loopback
    kind: iperf3
    params: {{loopback: true, duration: 1, streams: 2}}
    expect:
      - {{metric: net.tcp_bw, labels: {{side: receiver}}, min: {floor}, unit: GB/s}}
"""


@pytest.mark.parametrize("floor, verdict", [(0.001, "ACCEPTED"), (1e6, "REJECTED")])
def test_cli_run_of_a_loopback_suite(tmp_path, floor, verdict):
    suite = tmp_path / "net.yaml"
    suite.write_text(SUITE.format(floor=floor))
    out = tmp_path / "out"
    r = harness("run", str(suite), "--profile", "generic", "--output", str(out))
    assert r.stdout.startswith(verdict), r.stdout + r.stderr
    (run_dir,) = run_dirs(out)
    (check,) = json.loads((run_dir / "results.json").read_text())["checks"]
    (ev,) = check["evaluations"]
    assert ev["metric"] == "net.tcp_bw" and ev["labels"]["side"] == "receiver" and ev["measured"] > 0
    if verdict == "ACCEPTED":
        assert r.returncode == 0 and check["status"] == "passed"
    else:
        assert r.returncode == 1 and check["status"] == "failed"
        assert "FAILED tcp-loopback: " in r.stdout and "expected >= 1,000,000 GB/s" in r.stdout
    port = int(check["tool_runs"][0]["argv"][-1])
    assert iperf3_processes(port) == []
