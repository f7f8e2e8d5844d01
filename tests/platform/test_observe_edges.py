"""The stall doctor's edges: each file format parsed from real captured text (tests/data/observe/
proc, from this machine; v2 formats from the kernel's cgroup-v2 documentation), and each edge
reading a tree in tmp_path: cgroup v1 and v2 located from /proc/PID/cgroup, v2's cpu.max path."""

from __future__ import annotations

from pathlib import Path

import pytest
from observetree import v2_tree, write

from harness.platform import cgroup, diskstats, shm
from harness.platform.procfs import (
    ProcFs,
    parse_net_dev,
    parse_pid_io,
    parse_pressure,
    parse_schedstat,
    parse_snmp,
    parse_sockstat,
    parse_stat,
    parse_task_stat,
    parse_tcp_queues,
)

REAL = Path(__file__).resolve().parents[1] / "data" / "observe" / "proc"


def real(name: str) -> str:
    return (REAL / name).read_text()


def test_proc_stat_sums_busy_time_and_counts_cpus() -> None:
    t = parse_stat(real("stat"))
    assert t.ncpu == 2 and 0 < t.busy < t.total and t.iowait >= 0
    t2 = parse_stat("cpu  10 0 5 80 5 0 0 0 0 0\ncpu0 10 0 5 80 5 0 0 0 0 0\n")
    assert (t2.busy, t2.iowait, t2.total, t2.ncpu) == (15, 5, 100, 1)
    with pytest.raises(ValueError):
        parse_stat("intr 1 2 3\n")


def test_pressure_totals_with_and_without_a_full_line() -> None:
    io = parse_pressure(real("pressure-io"))
    assert io.some_us > 0 and io.full_us is not None
    old_cpu = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n")  # kernels < 5.13
    assert (old_cpu.some_us, old_cpu.full_us) == (42, None)


def test_task_stat_survives_a_hostile_command_name() -> None:
    st = parse_task_stat(real("pid-stat"))
    assert st.comm == "bash" and st.state in "RSD" and st.starttime > 0
    evil = "4121 (a) R (x) ) D 1 4121 4121 0 -1 0 0 0 7 0 300 200 0 0 20 0 9 0 5555 0 42 18446744073709551615"
    e = parse_task_stat(evil)
    assert (e.pid, e.comm, e.state, e.cpu_ticks, e.majflt, e.starttime, e.rss_pages) == \
        (4121, "a) R (x) ", "D", 500, 7, 5555, 42)


def test_schedstat_io_net_and_tcp_files() -> None:
    run_ns, wait_ns = parse_schedstat(real("pid-schedstat"))
    assert run_ns > 0 and wait_ns >= 0
    assert parse_pid_io(real("pid-io"))[0] >= 0
    dev = parse_net_dev(real("net-dev"))
    assert dev["lo"].rx_bytes == dev["lo"].tx_bytes > 0
    snmp = parse_snmp(real("net-snmp"))
    assert snmp["OutSegs"] > 0 and "RetransSegs" in snmp
    sock = parse_sockstat(real("net-sockstat"))
    assert sock["TCP"]["mem"] >= 0 and "inuse" in sock["TCP"] and sock["UDP"]["inuse"] >= 0
    q = parse_tcp_queues(real("net-tcp"))
    assert q.sockets == 19
    q2 = parse_tcp_queues("  sl  local rem st tx_queue rx_queue\n"
                          "   0: 0100007F:1 0100007F:2 01 000DC000:00000010 0\n")
    assert (q2.send, q2.recv, q2.sockets) == (0xDC000, 16, 1)


def test_diskstats_gives_bytes_busy_time_and_majmin() -> None:
    stats = diskstats.parse(real("diskstats"))
    loop0 = stats["loop0"]
    assert loop0.dev == "7:0" and loop0.read_bytes % 512 == 0 and loop0.io_ms > 0
    assert diskstats.parse("8 0 sda 1 2\ngarbage\n") == {}


def test_cgroup_v1_files() -> None:
    s = cgroup.parse_keyed(real("v1-cpu.stat"))
    assert s["nr_throttled"] == 15 and s["nr_periods"] == 16
    assert cgroup.parse_cfs_quota(real("v1-cpu.cfs_quota_us"), "100000") == pytest.approx(0.2)
    assert cgroup.parse_cfs_quota("-1", "100000") is None
    assert cgroup.parse_limit(real("v1-memory.limit_in_bytes")) == 50 << 20
    assert cgroup.parse_limit(real("v1-memory.limit_in_bytes.unlimited")) is None
    assert cgroup.parse_keyed(real("v1-memory.oom_control"))["oom_kill"] == 54
    assert cgroup.parse_blkio_bps(real("v1-blkio.throttle.read_bps_device")) == {"7:0": 2097152}
    b = cgroup.parse_blkio_bytes(real("v1-blkio.throttle.io_service_bytes"))
    assert b and all(r >= 0 and w >= 0 for r, w in b.values())
    paths = cgroup.parse_proc_cgroup(real("pid-cgroup"))
    assert paths["memory"].startswith("/process_api/") and paths[""] == "/"


def test_cgroup_v2_files_as_the_kernel_documents_them() -> None:
    assert cgroup.parse_io_stat("8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0\n") \
        == {"8:16": (1459200, 314773504)}
    assert cgroup.parse_io_max("8:16 rbps=2097152 wbps=max riops=max wiops=120\n") == \
        {"8:16": (2097152, None)}
    assert cgroup.parse_cpu_max("max 100000\n") is None
    assert cgroup.parse_cpu_max("150000 100000\n") == 1.5
    assert cgroup.parse_limit("max\n") is None


def test_cgroup_v2_is_located_and_read_on_a_tree(tmp_path: Path) -> None:
    v2_tree(tmp_path, 77, 1000, 10, 9, 450000)
    cg = cgroup.locate(77, tmp_path)
    assert cg is not None and cg.cpu_v2 and cg.memory_v2 and cg.io_v2
    assert cg.paths == {"cpu": "/job.slice/train", "memory": "/job.slice/train", "io": "/job.slice/train"}
    r = cgroup.read(cg)
    assert (r.cpu_periods, r.cpu_throttled_periods, r.cpu_throttled_us) == (10, 9, 450000)
    assert (r.cpu_quota_cores, r.quota_file) == (0.5, "cpu.max")
    assert (r.mem_current, r.mem_limit) == (1 << 30, 2 << 30) and r.mem_events["oom_kill"] == 0
    assert r.io_limits == {"259:0": (1048576, None)} and r.io_limit_file == "io.max"
    assert r.pressure["cpu"].some_us == 450000
    assert cgroup.locate(78, tmp_path) is None  # no such process


def test_cgroup_v1_with_a_combined_cpu_mount_on_a_tree(tmp_path: Path) -> None:
    write(tmp_path, {
        "proc/5/cgroup": "4:memory:/jobs/a\n3:cpu,cpuacct:/jobs/a\n2:blkio:/jobs/a\n0::/\n",
        "sys/fs/cgroup/cpu,cpuacct/jobs/a/cpu.stat": real("v1-cpu.stat"),
        "sys/fs/cgroup/cpu,cpuacct/jobs/a/cpu.cfs_quota_us": "20000\n",
        "sys/fs/cgroup/cpu,cpuacct/jobs/a/cpu.cfs_period_us": "100000\n",
        "sys/fs/cgroup/memory/jobs/a/memory.limit_in_bytes": "52428800\n",
        "sys/fs/cgroup/memory/jobs/a/memory.usage_in_bytes": "52000000\n",
        "sys/fs/cgroup/memory/jobs/a/memory.failcnt": "3884\n",
        "sys/fs/cgroup/memory/jobs/a/memory.oom_control": real("v1-memory.oom_control"),
        "sys/fs/cgroup/blkio/jobs/a/blkio.throttle.io_service_bytes": "7:0 Read 4096\n7:0 Write 0\n",
        "sys/fs/cgroup/blkio/jobs/a/blkio.throttle.read_bps_device": "7:0 2097152\n",
    })
    cg = cgroup.locate(5, tmp_path)
    assert cg is not None and not cg.cpu_v2 and cg.paths["cpu"] == "/jobs/a"
    r = cgroup.read(cg)
    assert r.cpu_quota_cores == pytest.approx(0.2) and r.cpu_throttled_us == 896564
    assert r.mem_events == {"max": 3884, "oom_kill": 54} and r.mem_limit == 50 << 20
    assert r.io_bytes == {"7:0": (4096, 0)} and r.io_limits == {"7:0": (2097152, None)}
    assert r.io_limit_file == "blkio.throttle.read_bps_device"


def test_procfs_reads_a_tree_and_misses_quietly(tmp_path: Path) -> None:
    write(tmp_path, {"proc/stat": real("stat"), "proc/10/stat": real("pid-stat"),
                     "proc/10/task/10/children": "11 12\n", "proc/11/stat": real("pid-stat"),
                     "proc/11/task/11/children": "", "proc/12/stat": real("pid-stat")})
    fs = ProcFs(tmp_path)
    assert fs.stat() is not None and fs.pressure("io") is None and fs.io(10) is None
    assert sorted(fs.descendants([10, 999])) == [10, 11, 12]
    assert fs.net_dev() is None and fs.tcp_queues(10) is None


def test_shm_usage_of_a_real_tmpfs_and_of_nothing(tmp_path: Path) -> None:
    u = shm.usage_of(Path("/dev/shm"))
    assert u is not None and u.size > 0 and 0 <= u.used <= u.size
    assert shm.usage_of(tmp_path / "absent") is None
    assert shm.path_for(42, Path("/")) == Path("/proc/42/root/dev/shm")
    assert shm.path_for(None, tmp_path) == tmp_path / "dev" / "shm"
