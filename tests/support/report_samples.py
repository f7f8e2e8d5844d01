"""Sample RunRecords for the report tests: every Status, every Outcome, a realistic 8-GPU node.

Test modules import it from tests/support (on the path through pytest's `pythonpath`).
"""

from __future__ import annotations

from pathlib import Path

from harness.model import CheckResult, Evaluation, Metric, Outcome, RunRecord, Status, ToolRun

HOSTILE = ('<script>alert(1)</script>', '"><img src=x onerror=alert(2)>', "{{ 7*7 }}")
EVIL = " ".join(HOSTILE)


def _ev(metric: str, outcome: Outcome, measured: float | None, unit: str, *, ref: float | None = None,
        low: float | None = None, high: float | None = None, labels: dict | None = None,
        severity: str = "fail", reduce: str = "each", message: str = "", xfail: str | None = None,
        source: str = "profile h100-sxm5") -> Evaluation:
    return Evaluation(metric=metric, labels=labels or {}, outcome=outcome, severity=severity,
                      measured=measured, unit=unit, reference=ref, low=low, high=high, reduce=reduce,
                      message=message, xfail=xfail, source=source)


def inventory(host: str = "gpu-node-017") -> dict:
    gpus = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "serial": f"165232{i:07d}",
             "uuid": f"GPU-3f0c{i:04x}-9a1b-4c2d-8e7f-0123456789ab", "driver": "550.90.07",
             "vbios": "96.00.99.00.01", "pci_bus_id": f"00000000:{0x18 + 0x10 * i:02X}:00.0"}
            for i in range(8)]
    return {
        "host": {"hostname": host, "os": "Ubuntu 22.04.4 LTS", "kernel": "5.15.0-113-generic",
                 "arch": "x86_64"},
        "system": {"vendor": "Supermicro", "product": "SYS-821GE-TNHR", "serial": "S61234567890",
                   "bios_version": "2.1"},
        "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480+", "sockets": 2, "cores": 112,
                "threads": 224, "numa_nodes": 2},
        "memory": {"total_bytes": 2 * 1024**4},
        "block_devices": [
            {"name": "nvme0n1", "model": "SAMSUNG MZQL23T8HCLS-00A07", "serial": "S64HNE0T123456",
             "size_bytes": 3_840_755_982_336, "transport": "nvme", "rotational": False},
            {"name": "nvme1n1", "model": "SAMSUNG MZQL23T8HCLS-00A07", "serial": "S64HNE0T123457",
             "size_bytes": 3_840_755_982_336, "transport": "nvme", "rotational": False},
        ],
        "nics": [
            {"name": "ibp24s0", "driver": "mlx5_core", "speed_mbps": 400000, "state": "up",
             "mac": "00:00:10:29:fe:80:00:00"},
            {"name": "eno1", "driver": "ice", "speed_mbps": 25000, "state": "up",
             "mac": "3c:ec:ef:12:34:56"},
            {"name": "eno2", "driver": "ice", "speed_mbps": None, "state": "down", "mac": None},
        ],
        "gpus": gpus,
        "software": {"nvidia_driver": "550.90.07", "cuda_driver": "12.4", "nccl": "2.21.5",
                     "persistence_mode": True},
    }


def record(host: str = "gpu-node-017", evil: str = "", interrupted: bool = False) -> RunRecord:
    """A run with every check Status and every evaluation Outcome; `evil` goes into every text."""
    busbw = Metric("nccl.busbw", 355.2, "GB/s", {"op": "all_reduce", "size": 8589934592})
    fio_runs = (ToolRun(("fio", "--output-format=json", "--name=seqread" + evil), 0, 62.4,
                        "raw/fio-seq/stdout.txt", "raw/fio-seq/stderr.txt"),)
    checks = (
        CheckResult("nccl-allreduce", "nccl", Status.PASSED, "all_reduce 8 GPUs" + evil,
                    "2024-05-01T10:00:05+00:00", 41.2, metrics=(
                        busbw, Metric("nccl.avg_busbw", 241.3, "GB/s"),
                        Metric("nccl.time", 48213.4, "us", {"size": 8589934592})),
                    evaluations=(
                        _ev("nccl.busbw", Outcome.PASS, 355.2, "GB/s", ref=360.0, low=324.0, high=None,
                            labels={"op": "all_reduce", "size": 8589934592}),
                        _ev("nccl.avg_busbw", Outcome.XPASS, 241.3, "GB/s", low=200.0,
                            xfail="NCCL 2.21 small-message regression" + evil)),
                    tool_runs=(ToolRun(("all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8"),
                                       0, 41.0, "raw/nccl/stdout.txt", "raw/nccl/stderr.txt"),)),
        CheckResult("gpu-burn", "gpu_burn", Status.WARNED, "GPU 3 ran hot", "2024-05-01T10:00:47+00:00",
                    905.0, metrics=(*(Metric("gpu.temp_max", 71.0 + i, "C", {"gpu": i}) for i in range(8)),
                                    Metric("gpu.tflops", 612.75, "TFLOPS", {"gpu": 3})),
                    evaluations=(
                        _ev("gpu.temp_max", Outcome.WARN, 78.0, "C", high=75.0, severity="warn",
                            reduce="max", message="hottest GPU above 75 C"),
                        _ev("gpu.tflops", Outcome.XFAIL, 612.75, "TFLOPS", ref=700.0, low=665.0,
                            high=735.0, labels={"gpu": 3}, xfail="GPU 3 on RMA list, ticket 4711"),)),
        CheckResult("fio-seqread", "fio", Status.FAILED, "nvme0n1 read below spec" + evil,
                    "2024-05-01T10:15:53+00:00", 62.4, metrics=(
                        Metric("fio.bw", 1.234, "GB/s", {"device": "nvme0n1" + evil, "rw": "read"}),
                        Metric("fio.iops", 1234567.0, "IOPS", {"device": "nvme0n1", "rw": "read"}),
                        Metric("fio.clat_p99", 0.000412, "us", {"device": "nvme0n1"})),
                    evaluations=(
                        _ev("fio.bw", Outcome.FAIL, 1.234, "GB/s", ref=6.8, low=6.12, high=None,
                            labels={"device": "nvme0n1" + evil, "rw": "read"},
                            message="below lower bound" + evil),
                        _ev("fio.clat_p999", Outcome.ERROR, None, "us", high=2000.0,
                            labels={"device": "nvme0n1"}, message="metric missing"),
                        _ev("host.memory", Outcome.PASS, 2 * 1024**4, "B", low=2 * 1000**4)),
                    tool_runs=fio_runs),
        CheckResult("ib-write-bw", "rdma", Status.ERRORED, "ib_write_bw exited 1" + evil,
                    "2024-05-01T10:16:56+00:00", 3.1,
                    problems=("no RDMA device mlx5_0 found" + evil, "server side never connected"),
                    tool_runs=(ToolRun(("ib_write_bw", "-d", "mlx5_0", "--report_gbits"), 1, 3.0,
                                       "raw/ib/stdout.txt", "raw/ib/missing-stderr.txt"),
                               ToolRun(("ib_write_bw", "-d", "mlx5_0"), None, 30.0, "raw/ib/t.out",
                                       "../../etc/passwd", timed_out=True))),
        CheckResult("mem-bw", "command", Status.RECORDED, "stream triad" + evil,
                    "2024-05-01T10:16:59+00:00", 2.0, (Metric("mem.bw", 412.5, "GB/s", {"numa": 0}),)),
        CheckResult("dcgm-diag", "dcgm", Status.SKIPPED, "dcgmi not installed" + evil,
                    expected_by="profile h100-sxm5 expects it: dcgm.result >= 1 count" + evil),
        CheckResult("stress-cpu", "stress", Status.NOT_RUN, "run interrupted before this check"),
        CheckResult("inventory", "inventory", Status.PASSED, "", "2024-05-01T10:00:00+00:00", 1.0,
                    details={"note": "collected" + evil, "gpus": 8}),
    )
    return RunRecord(
        run_id="20240501T100000Z-gpu-node-017", host=host + evil,
        suite={"name": "h100-acceptance", "path": "suites/h100.yaml", "description": "HGX H100 go-live"},
        profile={"name": "h100-sxm5", "path": "profiles/h100-sxm5.yaml",
                 "reason": "8 × NVIDIA H100 80GB HBM3 matched gpu.name" + evil},
        started="2024-05-01T10:00:00+00:00", finished="2024-05-01T10:17:30+00:00", duration_s=1050.2,
        inventory=inventory(host + evil), checks=checks, harness_version="0.1.0",
        argv=("harness", "run", "suites/h100.yaml"), interrupted=interrupted,
    )


def write_raw(run_dir: Path, evil: str = "", big: int = 0) -> None:
    """Write the raw output files the sample record refers to (stderr of ib is left missing)."""
    files = {
        "raw/nccl/stdout.txt": "#  size  count  type  redop  time  algbw  busbw\n 8589934592 ... 355.2\n",
        "raw/nccl/stderr.txt": "",
        "raw/fio-seq/stdout.txt": '{"fio version": "fio-3.33", "jobs": []}\n' + evil + "\n",
        "raw/fio-seq/stderr.txt": "\x1b[31mwarning\x1b[0m: odd \x00 byte\n",
        "raw/ib/stdout.txt": "Couldn't get device mlx5_0" + evil + "\n",
        "raw/ib/t.out": "waiting for client...\n",
    }
    for rel, text in files.items():
        p = run_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    if big:
        line = "iteration {:08d} ok 0123456789abcdef0123456789abcdef\n"
        (run_dir / "raw/nccl/stdout.txt").write_text("".join(line.format(i) for i in range(big)))
