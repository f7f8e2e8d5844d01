"""Real reproductions of the bottlenecks `harness observe` names, for tests (root needed).

Each context manager builds what the cause needs (a cgroup with a limit, a loop device, a veth
pair between two network namespaces) under a name unique to this process, yields the argv
prefix that puts a workload into it, and removes everything on the way out. Addresses are
only inside the namespaces made here (10.213.x.x/30 on a private veth pair).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

V1 = Path("/sys/fs/cgroup")
TAG = f"harness-observe-{os.getpid()}"


def need(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (cgroups, loop devices, network namespaces)")
    for t in tools:
        if shutil.which(t) is None:
            pytest.skip(f"{t} not installed")


def _v1(controller: str) -> Path:
    d = V1 / controller
    if not (d / "cgroup.procs").exists():
        pytest.skip(f"no cgroup v1 {controller} controller mounted at {d} (this kernel/container)")
    return d


def enter(cg: Path, argv: list[str]) -> list[str]:
    """argv run inside cgroup directory `cg` (a shell writes its pid, then execs the workload)."""
    return ["sh", "-c", f'echo $$ > "{cg}/cgroup.procs" && exec "$@"', "enter", *argv]


@contextlib.contextmanager
def cgroup(controller: str, **files: str) -> Iterator[Path]:
    """A fresh v1 cgroup of `controller` with `files` written (name with dots as __)."""
    d = _v1(controller) / TAG
    d.mkdir(exist_ok=True)
    try:
        for name, value in files.items():
            (d / name.replace("__", ".")).write_text(value)
        yield d
    finally:
        for _ in range(50):  # members may take a moment to exit after the group is killed
            try:
                procs = (d / "cgroup.procs").read_text().split()
                for p in procs:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(p), 9)
                d.rmdir()
                break
            except OSError:
                time.sleep(0.1)


@contextlib.contextmanager
def loop_device(size_mib: int = 64) -> Iterator[tuple[str, str]]:
    """A loop device over a sparse file: (/dev/loopN, "major:minor")."""
    img = Path(f"/tmp/{TAG}.img")
    with open(img, "wb") as f:
        f.truncate(size_mib << 20)
    dev = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True,
                         check=True).stdout.strip()
    try:
        st = os.stat(dev)
        yield dev, f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)
        img.unlink(missing_ok=True)


@contextlib.contextmanager
def netns_pair(rate: str = "20mbit") -> Iterator[tuple[str, str, str]]:
    """Namespaces A and B joined by a veth pair, A's side shaped by tc tbf to `rate`:
    (namespace A, namespace B, B's address)."""
    n = os.getpid() % 10000
    a, b, va, vb = f"obsa{n}", f"obsb{n}", f"obsva{n}", f"obsvb{n}"

    def ip(*args: str) -> None:
        r = subprocess.run(["ip", *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")

    try:
        ip("netns", "add", a)
    except RuntimeError as e:
        pytest.skip(f"cannot make network namespaces here: {e}")
    try:
        ip("netns", "add", b)
        ip("link", "add", va, "type", "veth", "peer", "name", vb)
        ip("link", "set", va, "netns", a)
        ip("link", "set", vb, "netns", b)
        ip("-n", a, "addr", "add", "10.213.0.1/30", "dev", va)
        ip("-n", b, "addr", "add", "10.213.0.2/30", "dev", vb)
        for ns, dev in ((a, va), (b, vb), (a, "lo"), (b, "lo")):
            ip("-n", ns, "link", "set", dev, "up")
        subprocess.run(["tc", "-n", a, "qdisc", "add", "dev", va, "root", "tbf", "rate", rate,
                        "burst", "32kbit", "latency", "50ms"], check=True)
        yield a, b, "10.213.0.2"
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


@contextlib.contextmanager
def iperf3_server(ns: str, seconds: int = 30) -> Iterator[None]:
    """iperf3 -s (one test) inside namespace `ns`, bounded in time."""
    p = subprocess.Popen(["ip", "netns", "exec", ns, "timeout", str(seconds), "iperf3", "-s", "-1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # listening before the client starts (a loaded machine takes more than the 0.5 s once slept:
    # a client that cannot connect ends at once, and the window saw no network at all)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and p.poll() is None:
        r = subprocess.run(["ip", "netns", "exec", ns, "ss", "-ltnH", "sport", "= :5201"],
                           capture_output=True, text=True)
        if r.returncode != 0 or r.stdout.strip():
            break  # listening (or no ss to ask: as before)
        time.sleep(0.05)
    try:
        yield
    finally:
        p.kill()
        p.wait()


def shm_filler(size: str = "16m") -> list[str]:
    """A workload in its own mount namespace whose /dev/shm (a `size` tmpfs) is full while it
    keeps trying to allocate 4 MiB batches there (as a dataloader's workers do)."""
    script = (f"mount -t tmpfs -o size={size} tmpfs /dev/shm && "
              "dd if=/dev/zero of=/dev/shm/fill bs=1M count=64 2>/dev/null; "
              "while true; do dd if=/dev/zero of=/dev/shm/batch bs=1M count=4 2>/dev/null; "
              "rm -f /dev/shm/batch; sleep 0.2; done")
    return ["unshare", "-m", "sh", "-c", script]
