"""Trees under tmp_path that the stall doctor's edges read as /proc and /sys/fs/cgroup."""

from __future__ import annotations

from pathlib import Path


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


V2_JOB = "sys/fs/cgroup/job.slice/train"


def v2_tree(root: Path, pid: int, usage: int, periods: int, throttled: int, throttled_us: int) -> None:
    write(root, {
        f"proc/{pid}/cgroup": "0::/job.slice/train\n",
        "sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
        f"{V2_JOB}/cpu.stat": f"usage_usec {usage}\nuser_usec {usage}\nsystem_usec 0\nnr_periods {periods}\n"
                              f"nr_throttled {throttled}\nthrottled_usec {throttled_us}\n",
        f"{V2_JOB}/cpu.max": "50000 100000\n",
        f"{V2_JOB}/memory.current": "1073741824\n",
        f"{V2_JOB}/memory.max": "2147483648\n",
        f"{V2_JOB}/memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
        f"{V2_JOB}/io.stat": "259:0 rbytes=1000 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
        f"{V2_JOB}/io.max": "259:0 rbps=1048576 wbps=max riops=max wiops=max\n",
        f"{V2_JOB}/cpu.pressure": f"some avg10=0 avg60=0 avg300=0 total={throttled_us}\n"
                                  "full avg10=0 avg60=0 avg300=0 total=0\n",
    })
