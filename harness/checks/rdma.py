"""Check kind `rdma`: RDMA bandwidth or latency per HCA with perftest (ib_write_bw, ...).

Loopback (default): for each HCA a perftest server and a client on this node, the client
connecting to localhost (through the HCA, or the switch when the client uses another HCA);
each HCA gets its own TCP port (port + index) so pairs never collide. With `peer`, only the
client runs, against a server the operator started on that host. GPUDirect: `gpus[i]`
adds --use_cuda=<gpu> for `devices[i]` (list the pairs explicitly; add `needs: [gpu]`).
Without `devices`, every HCA in /sys/class/infiniband is tested; with none there the
check is skipped. The sibling rule flags an HCA whose bandwidth is far below the others'.
Each tested HCA's port error counters (sysfs) are read before and after: `ib.error_delta`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, field_validator, model_validator

from harness import catalog, siblings
from harness.checks import ib_ports, needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, Need, Params, PlannedCommand
from harness.config.numbers import WholeSeconds
from harness.errors import ToolError, ToolTimeout
from harness.model import Metric, ToolRun
from harness.numfmt import fmt_num, fmt_value, plural
from harness.parsers import perftest, portcounters
from harness.parsers.base import last_line as _last
from harness.platform import infiniband, pair
from harness.units import GBPS, US, check_size, parse_size

Test = Literal["ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_write_lat", "ib_read_lat", "ib_send_lat"]
DEVICE_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"
ALL_DEVICES = "<every HCA in /sys/class/infiniband>"


class RdmaParams(Params):
    """Which perftest, on which HCAs, with which message size and queue pairs."""

    test: Test = "ib_write_bw"
    devices: Optional[list[str]] = Field(None, min_length=1,
                                         description="HCAs (server side); default every HCA in sysfs")
    client_device: Optional[str] = Field(None, pattern=DEVICE_PATTERN,
                                         description="loopback client's HCA; default the same HCA")
    peer: Optional[str] = Field(None, pattern=r"^[A-Za-z0-9_.:-]{1,253}$",
                                description="host running the perftest server; default loopback")
    size: Union[int, str] = Field(65536, description="message size, e.g. 65536 or 1M")
    all_sizes: bool = Field(False, description="every size from 2 B to 8 MiB (-a)")
    qps: int = Field(1, ge=1, le=256, description="queue pairs (bandwidth tests only)")
    iterations: Optional[int] = Field(None, ge=5, le=100_000_000, description="-n")
    duration_s: Optional[WholeSeconds] = Field(None, ge=1, le=3600, description="-D, instead of iterations")
    gpus: Optional[list[Annotated[int, Field(ge=0, le=255)]]] = Field(
        None, description="GPUDirect: GPU index per device (--use_cuda)")
    gid_index: Optional[int] = Field(None, ge=0, le=255, description="RoCE GID index (-x)")
    rdma_cm: bool = Field(False, description="connect with RDMA CM (-R)")
    port: int = Field(18515, ge=1024, le=65000, description="first TCP port; HCA i uses port + i")
    bin_dir: Optional[str] = Field(None, description="directory of the perftest binaries; default PATH")
    ready_s: float = Field(5.0, gt=0, le=120, description="longest wait for the server to listen")
    sibling_tolerance: Optional[float] = Field(
        0.10, gt=0, lt=1, description="fail an HCA this fraction below the median of the others")

    @field_validator("devices")
    @classmethod
    def _device_names(cls, v: Optional[list[str]]) -> Optional[list[str]]:
        for d in v or []:
            if not re.match(DEVICE_PATTERN, d):
                raise ValueError(f"not an RDMA device name: {d!r}")
        if v is not None and len(set(v)) != len(v):
            raise ValueError("duplicate device")
        return v

    @field_validator("size")
    @classmethod
    def _valid_size(cls, v: Union[int, str]) -> Union[int, str]:
        return check_size(v)

    @model_validator(mode="after")
    def _consistent(self) -> RdmaParams:
        if self.iterations is not None and self.duration_s is not None:
            raise ValueError("give iterations or duration_s, not both")
        if self.gpus is not None and (self.devices is None or len(self.gpus) != len(self.devices)):
            raise ValueError("gpus pairs each GPU with a device: list devices too, one GPU per device")
        if self.peer is not None and self.client_device is not None:
            raise ValueError("client_device is for loopback; with a peer the client uses each device")
        return self

    @property
    def is_bw(self) -> bool:
        return self.test.endswith("_bw")


def _common(p: RdmaParams, device: str, index: int) -> list[str]:
    binary = str(Path(p.bin_dir) / p.test) if p.bin_dir else p.test
    argv = [binary, "-d", device, "-p", str(p.port + index), "-F"]
    argv += ["-a"] if p.all_sizes else ["-s", str(parse_size(p.size))]
    if p.is_bw:
        argv += ["-q", str(p.qps), "--report_gbits"]
    if p.iterations is not None:
        argv += ["-n", str(p.iterations)]
    if p.duration_s is not None:
        argv += ["-D", str(p.duration_s)]
    if p.gid_index is not None:
        argv += ["-x", str(p.gid_index)]
    if p.rdma_cm:
        argv.append("-R")
    if p.gpus is not None:
        argv.append(f"--use_cuda={p.gpus[index]}")
    return argv


def build_pair(p: RdmaParams, device: str, index: int) -> tuple[Optional[list[str]], list[str]]:
    """(server argv or None with a peer, client argv) for one HCA."""
    if p.peer is not None:
        return None, [*_common(p, device, index), p.peer]
    server = _common(p, device, index)
    client = _common(p, p.client_device or device, index)
    return server, [*client, "localhost"]


def plan(params: RdmaParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    """The server and client command lines per HCA (the HCAs sysfs lists when none are given)."""
    names = params.devices or infiniband.devices() or [ALL_DEVICES]
    out = []
    for i, dev in enumerate(names):
        server, client = build_pair(params, dev, i)
        if server is not None:
            out.append(PlannedCommand(tuple(server), f"server on {dev}, in the background"))
        out.append(PlannedCommand(tuple(client), "client" + (f" against {params.peer}" if params.peer
                                                            else " over loopback")))
    return out


def _paths(ctx: CheckContext, stem: str) -> tuple[Path, Path]:
    n = len(ctx.tool_runs) + 1
    base = ctx.raw_dir / f"{n:02d}-{re.sub(r'[^A-Za-z0-9._-]+', '_', stem)[:60]}"
    return base.with_name(base.name + ".stdout"), base.with_name(base.name + ".stderr")


def _record(ctx: CheckContext, res: Any) -> None:
    ctx.tool_runs.append(ToolRun(res.argv, res.rc, res.duration_s,
                                 str(res.stdout_path.relative_to(ctx.run_dir)),
                                 str(res.stderr_path.relative_to(ctx.run_dir)), res.timed_out))




def run_one(params: RdmaParams, ctx: CheckContext, device: str, index: int) -> tuple[list[Metric], list[str]]:
    """One server/client pair (or one client with a peer): metrics and validity problems."""
    server_argv, client_argv = build_pair(params, device, index)
    ctx.raw_dir.mkdir(parents=True, exist_ok=True)
    server = None
    if server_argv is None:
        client = ctx.run_tool(client_argv, name=f"{params.test}-{device}-client", check_rc=False)
    else:
        s_out, s_err = _paths(ctx, f"{params.test}-{device}-server")
        c_out = s_out.with_name(s_out.name.replace("-server.stdout", "-client.stdout"))
        c_err = s_err.with_name(s_err.name.replace("-server.stderr", "-client.stderr"))
        res = pair.run_pair(server_argv, client_argv, server_out=s_out, server_err=s_err,
                            client_out=c_out, client_err=c_err, timeout=ctx.timeout_s,
                            port=None if params.rdma_cm else params.port + index, ready_s=params.ready_s)
        _record(ctx, res.server)
        server = res.server
        if res.client is None:
            raise ToolError(f"{params.test} server on {device} exited (rc {server.rc}) before the client "
                            f"started: {_last(server.tail(600)) or 'no output'}",
                            argv=server.argv, rc=server.rc, output_tail=server.tail())
        client = res.client
        _record(ctx, client)
    if client.timed_out:
        raise ToolTimeout(f"{' '.join(client.argv)}: timed out after {ctx.timeout_s:g} s; "
                          "client and server killed", argv=client.argv, rc=client.rc,
                          output_tail=client.tail())
    if client.interrupted:
        raise ToolError(f"{params.test}: interrupted; its processes were killed", argv=client.argv)
    parsed = perftest.parse(client.stdout() + "\n" + client.stderr(), test=params.test)
    problems = [f"{device}: {p}" for p in parsed.problems]
    if not parsed.metrics:
        why = "; ".join(parsed.problems) or f"exit {client.rc}"
        if server is not None and server.rc not in (0, None) and _last(server.tail(600)):
            why += f"; server: {_last(server.tail(600))}"
        raise ToolError(f"{params.test} on {device}: {why}", argv=client.argv, rc=client.rc,
                        output_tail=client.tail())
    if client.rc != 0:
        problems.append(f"{device}: client exited with status {client.rc} after printing results")
    metrics = [Metric(m.name, m.value, m.unit, {**m.labels, "device": device}) for m in parsed.metrics]
    return metrics, problems


def run(params: RdmaParams, ctx: CheckContext) -> CheckOutput:
    """Every HCA in turn; metrics labelled device, test, size (and qps for bandwidth)."""
    devices = params.devices or infiniband.require_devices(ctx.hardware)
    if not devices:  # expected, and absent from the PCI bus: the hardware's verdict, as ib_ports's
        return CheckOutput(details={"devices": []}, summary="no RDMA adapter on the PCI bus",
                           findings=(ib_ports.absent_hcas(ctx.hardware),))
    metrics: list[Metric] = []
    problems: list[str] = []
    watched = [d for d in devices if d in set(infiniband.devices())]
    before = infiniband.port_counters(watched)
    for i, dev in enumerate(devices):
        ctx.progress(f"{params.test} on {dev} ({i + 1}/{len(devices)})")
        m, p = run_one(params, ctx, dev, i)
        metrics += m
        problems += p
    counters, saturated = _counter_deltas(before, infiniband.port_counters(watched))
    metrics += counters
    details = {"devices": devices, "mode": f"peer {params.peer}" if params.peer else "loopback",
               "saturated_counters": saturated,
               "env": {k: v for k, v in os.environ.items() if k.startswith(("MLX5_", "RDMAV_"))}}
    return CheckOutput(tuple(metrics), tuple(problems), details, _summary(metrics))


def own_rules(params: RdmaParams) -> list[siblings.SiblingRule]:
    """Bandwidth tests: the sibling rule on rdma.bw_avg across HCAs (judged by compare.judge, listed
    by --dry-run)."""
    if params.sibling_tolerance is None or not params.is_bw:
        return []
    return [siblings.SiblingRule("rdma.bw_avg", ("device",), params.sibling_tolerance)]


Counters = Mapping[tuple[str, int], Mapping[str, int]]


def _counter_deltas(before: Counters, after: Counters) -> tuple[list[Metric], dict[str, Any]]:
    """ib.error_delta per device, port and error counter; saturated counters by device/port."""
    metrics: list[Metric] = []
    stuck: dict[str, Any] = {}
    for (dev, port), now in after.items():
        if (dev, port) in before:
            grown = portcounters.deltas(before[(dev, port)], now)
            metrics += portcounters.error_metrics(grown, {"device": dev, "port": port}, name="ib.error_delta")
        if sat := portcounters.saturated(now):
            stuck[f"{dev}/{port}"] = sat
    return metrics, stuck


def _summary(metrics: Sequence[Metric]) -> str:
    bw = [m for m in metrics if m.name == "rdma.bw_avg"]
    if bw:
        worst = min(bw, key=lambda m: m.value)
        return (f"{plural(len({m.labels.get('device') for m in bw}), 'HCA')}; lowest "
                f"{fmt_value(worst.value, GBPS)} ({fmt_num(worst.value * 8)} Gb/s) on "
                f"{worst.labels.get('device')}")
    lat = [m for m in metrics if m.name == "rdma.lat_avg"]
    if lat:
        worst = max(lat, key=lambda m: m.value)
        return f"highest average latency {fmt_value(worst.value, US)} on {worst.labels.get('device')}"
    return "no measurement"


KIND = CheckKind(
    name="rdma",
    description="RDMA bandwidth/latency per HCA with perftest (loopback or against a peer)",
    params=RdmaParams,
    metrics=catalog.subset(["rdma.bw_avg", "rdma.bw_peak", "ib.error_delta",
                            *(f"rdma.lat_{s}" for s in perftest.LAT_STATS.values())]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        own_rules=own_rules,
        loads_node=True,
        requires=(Need("ib_write_bw", needs.PERFTEST_HINT),),
    ),
)
