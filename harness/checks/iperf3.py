"""Check kind `iperf3`: TCP bandwidth of the front-end network with an iperf3 client.

Against `host` (an `iperf3 -s` on another node), or with `loopback: true` against an
`iperf3 -s -1` this check starts on 127.0.0.1 on a free port: a self-test of the tool and the
host's TCP stack, not of any wire. The loopback server is killed on every exit path
(platform/pair.py). JSON output (-J) is parsed by parsers/iperf3: `net.tcp_bw` (GB/s) for
the sender and the receiver, `net.tcp_retransmits`, labelled `peer` (the host or `loopback`).
A run that did not finish (iperf3 error, no end summary) is invalid; no server is an error.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from pydantic import Field, model_validator

from harness import catalog
from harness.checks import needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, Params, PlannedCommand
from harness.config.numbers import WholeSeconds
from harness.errors import ToolError, ToolTimeout
from harness.model import Metric, ToolRun
from harness.numfmt import fmt_num, fmt_value, plural
from harness.parsers import iperf3 as parser
from harness.platform import pair, proc
from harness.units import GBPS

LOOPBACK = "127.0.0.1"
SLACK_S = 30.0  # connect, omitted seconds, the end-of-test exchange


class Iperf3Params(Params):
    """Which server, how many streams, for how long, in which direction."""

    host: Optional[str] = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:%-]{0,252}$",
                                description="iperf3 server (iperf3 -s) to test against")
    port: int = Field(5201, ge=1, le=65535, description="server port (with host)")
    loopback: bool = Field(False, description="start a local `iperf3 -s -1` on a free port and test "
                           "against it: a self-test, no network involved")
    duration: WholeSeconds = Field(10, ge=1, le=3600, description="seconds of transfer (-t)")
    streams: int = Field(1, ge=1, le=128, description="parallel streams (-P)")
    reverse: bool = Field(False, description="-R: the server sends, the client receives")
    omit: WholeSeconds = Field(0, ge=0, le=600, description="-O: seconds of TCP slow start left out")
    binary: str = Field("iperf3", description="path or name of iperf3")

    @model_validator(mode="after")
    def _one_target(self) -> Iperf3Params:
        if (self.host is None) == (not self.loopback):
            raise ValueError("give either host (a server running iperf3 -s) or loopback: true")
        return self


def client_argv(params: Iperf3Params, host: str, port: int | str) -> list[str]:
    argv = [params.binary, "-c", host, "-p", str(port), "-J", "-t", str(params.duration),
            "-P", str(params.streams)]
    if params.omit:
        argv += ["-O", str(params.omit)]
    return argv + (["-R"] if params.reverse else [])


def server_argv(params: Iperf3Params, port: int | str) -> list[str]:
    return [params.binary, "-s", "-1", "-B", LOOPBACK, "-p", str(port)]


def free_port() -> int:
    """A TCP port on the loopback address nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def estimate_s(params: Iperf3Params) -> float:
    return params.duration + params.omit + 1.0


def plan(params: Iperf3Params, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    if params.loopback:
        port = "<free port>"
        return [PlannedCommand(tuple(server_argv(params, port)), "server on 127.0.0.1, one test"),
                PlannedCommand(tuple(client_argv(params, LOOPBACK, port)), "client, loopback self-test")]
    return [PlannedCommand(tuple(client_argv(params, str(params.host), params.port)))]


def _budget(params: Iperf3Params, ctx: CheckContext) -> float:
    own = params.duration + params.omit + SLACK_S
    return min(own, ctx.timeout_s) if ctx.timeout_s else own


def _loopback(params: Iperf3Params, ctx: CheckContext) -> proc.ProcResult:
    """Server and client as a pair; both are reaped whatever happens."""
    port = free_port()
    n = len(ctx.tool_runs) + 1
    base = ctx.raw_dir / f"{n:02d}-iperf3"
    paths = {k: base.with_name(f"{base.name}-{k}") for k in
             ("server.stdout", "server.stderr", "client.stdout", "client.stderr")}
    res = pair.run_pair(server_argv(params, port), client_argv(params, LOOPBACK, port),
                        server_out=paths["server.stdout"], server_err=paths["server.stderr"],
                        client_out=paths["client.stdout"], client_err=paths["client.stderr"],
                        timeout=_budget(params, ctx), port=port, grace_s=2.0)
    for r in (res.server, res.client):
        if r is not None:
            rel = ctx.run_dir
            ctx.tool_runs.append(ToolRun(r.argv, r.rc, r.duration_s, str(r.stdout_path.relative_to(rel)),
                                         str(r.stderr_path.relative_to(rel)), r.timed_out))
    if res.client is None:
        why = res.server.tail(300).strip() or "no output"
        raise ToolError(f"iperf3 loopback server exited (rc {res.server.rc}) before the client started: "
                        f"{why}",
                        argv=res.server.argv, rc=res.server.rc, output_tail=res.server.tail())
    if res.client.timed_out:
        raise ToolTimeout(f"{' '.join(res.client.argv)}: timed out after {_budget(params, ctx):g} s; "
                          "client and server killed", argv=res.client.argv, rc=res.client.rc,
                          output_tail=res.client.tail())
    return res.client


def run(params: Iperf3Params, ctx: CheckContext) -> CheckOutput:
    """One iperf3 client run; metrics labelled peer, side and direction."""
    peer = "loopback" if params.loopback else str(params.host)
    ctx.progress(f"iperf3 to {peer}: {estimate_s(params):.0f} s")
    if params.loopback:
        res = _loopback(params, ctx)
    else:
        res = ctx.run_tool(client_argv(params, peer, params.port), name=f"iperf3-{peer}",
                           timeout_s=_budget(params, ctx), check_rc=False)
    if res.interrupted:
        raise ToolError("iperf3: interrupted; its processes were killed", argv=res.argv)
    parsed = parser.parse(res.stdout() + "\n" + res.stderr())
    if not parsed.metrics:
        why = "; ".join(parsed.problems) or f"exit {res.rc}"
        raise ToolError(f"iperf3 to {peer}: {why}", argv=res.argv, rc=res.rc, output_tail=res.tail())
    problems = list(parsed.problems)
    if res.rc != 0:
        problems.append(f"iperf3 exited with status {res.rc} after printing results")
    metrics = tuple(Metric(m.name, m.value, m.unit, {**m.labels, "peer": peer}) for m in parsed.metrics)
    details = {"peer": peer, **parsed.details}
    return CheckOutput(metrics, tuple(problems), details, _summary(metrics, params, peer))


def _summary(metrics: Sequence[Metric], params: Iperf3Params, peer: str) -> str:
    got = {str(m.labels.get("side")): m.value for m in metrics if m.name == "net.tcp_bw"}
    retrans = next((m.value for m in metrics if m.name == "net.tcp_retransmits"), None)
    text = (f"iperf3 {peer}, {params.streams} stream(s), {params.duration} s"
            f"{' reverse' if params.reverse else ''}: receiver {fmt_value(got.get('receiver', 0.0), GBPS)} "
            f"({fmt_num(got.get('receiver', 0.0) * 8)} Gb/s)")
    return text + (f", {plural(round(retrans), 'retransmit')}" if retrans is not None else "")


KIND = CheckKind(
    name="iperf3",
    description="TCP bandwidth and retransmits with iperf3 (against a server, or a loopback self-test)",
    params=Iperf3Params,
    metrics=catalog.subset(["net.tcp_bw", "net.tcp_retransmits"]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        needs=frozenset(),
        estimate_s=estimate_s,
        loads_node=True,
        requires=(needs.tool("iperf3"),),
    ),
)
