"""The config audit on this real machine: facts checked against values the test reads itself,
and the config_audit kind run through a real CheckContext."""

from __future__ import annotations

import logging
import os
import platform
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.checks.base import CheckContext
from harness.checks.config_audit import KIND, ConfigAuditParams
from harness.config.factrule import FactRule
from harness.facts import FACTS, Fact
from harness.model import Outcome
from harness.platform import facts as live
from harness.platform import proc


@pytest.fixture(scope="module")
def facts() -> dict[str, list[Fact]]:
    got = live.collect(lambda argv: proc.capture_rc(argv, 30.0),
                       inventory={"nvml": {"available": False, "reason": "NVML not loadable: test"}})
    out: dict[str, list[Fact]] = {}
    for f in got:
        out.setdefault(f.name, []).append(f)
    return out


def value(facts: dict[str, list[Fact]], name: str):
    (f,) = facts[name]
    return f.value


def test_every_catalogued_fact_is_collected_with_a_source_or_a_reason(facts):
    assert set(facts) == set(FACTS)
    for name, fs in facts.items():
        for f in fs:
            assert f.source, name
            assert (f.value is None) == bool(f.reason), (name, f.value, f.reason)
            if FACTS[name].per and f.value is not None:
                assert set(f.labels) == {FACTS[name].per}, name


def test_host_facts_match_what_the_system_says(facts):
    st = os.statvfs("/dev/shm")
    assert value(facts, "host.shm_bytes") == st.f_blocks * st.f_frsize
    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    assert value(facts, "host.memlock") == ("unlimited" if soft == resource.RLIM_INFINITY else soft)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert value(facts, "host.nofile") == ("unlimited" if soft == resource.RLIM_INFINITY else soft)
    assert value(facts, "host.kernel") == platform.release() == os.uname().release
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    assert value(facts, "host.thp") == thp[thp.index("[") + 1:thp.index("]")]
    swap_lines = Path("/proc/swaps").read_text().splitlines()[1:]
    assert (value(facts, "host.swap_bytes") == 0) == (not swap_lines)
    nb = Path("/proc/sys/kernel/numa_balancing")
    if nb.exists():
        assert value(facts, "host.numa_balancing") is (nb.read_text().strip() != "0")
    cmdline = Path("/proc/cmdline").read_text()
    assert value(facts, "host.kernel_cmdline") == cmdline.strip()
    assert value(facts, "host.kernel_cmdline.iommu") == next(
        (w.split("=", 1)[1] for w in cmdline.split("--")[0].split() if w.startswith("iommu=")), "unset")
    assert value(facts, "host.cuda_visible_devices") == os.environ.get("CUDA_VISIBLE_DEVICES", "unset")


def test_container_and_cgroup(facts):
    kind = value(facts, "host.container")
    if "KUBERNETES_SERVICE_HOST" not in os.environ and Path("/.dockerenv").exists():
        assert kind == "docker"
    assert value(facts, "host.cgroup_version") in ("v1", "v2")
    (mem,) = facts["host.cgroup_memory_limit"]
    assert mem.value == "unlimited" or (isinstance(mem.value, int) and mem.value > 0)
    assert mem.source.startswith("/sys/fs/cgroup")


def test_clock_state_is_the_kernels(facts):
    import ctypes

    state = ctypes.CDLL(None).adjtimex(ctypes.create_string_buffer(1024))
    assert value(facts, "host.clock_synced") is (state != 5)


def test_nic_facts_for_every_physical_interface(facts):
    nics = sorted(p.name for p in Path("/sys/class/net").iterdir() if (p / "device").exists())
    if not nics:
        pytest.skip("no physical network interface")
    mtus = {f.labels["nic"]: f.value for f in facts["net.mtu"]}
    assert mtus == {n: int(Path(f"/sys/class/net/{n}/mtu").read_text()) for n in nics}
    for f in facts["net.irq_spread"]:
        assert f.value is None or 1 <= f.value <= (os.cpu_count() or 1)


def test_gpu_and_rdma_facts_say_why_they_are_unknown(facts):
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    for name in ("gpu.driver_version", "gpu.vbios_version", "gpu.fabricmanager_running"):
        (f,) = facts[name]
        assert f.value is None and f.reason == "no NVIDIA GPU: NVML not loadable: test"
    if not Path("/sys/class/infiniband").is_dir() or not any(Path("/sys/class/infiniband").iterdir()):
        (f,) = facts["net.hca_fw_version"]
        assert (f.value, f.reason) == (None, "no RDMA devices")


def test_rdma_core_version_matches_the_package():
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "rdma-core"], capture_output=True,
                             text=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("no dpkg")
    if out.returncode != 0 or not out.stdout:
        pytest.skip("rdma-core not installed")
    got = [f for f in live.collect(lambda argv: proc.capture_rc(argv, 30.0))
           if f.name == "net.rdma_core_version"]
    assert got[0].value == out.stdout.split("-")[0].split(":")[-1]  # e.g. 44.0-2 -> 44.0


def test_cuda_runtime_version_is_a_version_or_absent(facts):
    (f,) = facts["lib.cuda_runtime"]
    if f.value == "absent":
        assert "no libcudart.so" in f.source
    else:
        assert f.value and f.value[0].isdigit() and "." in str(f.value), f
        assert "libcudart" in f.source


def test_the_kind_records_tools_judges_rules_and_emits_metrics(tmp_path):
    ctx = CheckContext("config-audit", tmp_path, 60, False, False,
                       {"nvml": {"available": False, "reason": "NVML not loadable: test"}},
                       logging.getLogger("t"),
                       config=((FactRule(fact="host.shm_bytes", min=1024**5), "big"),
                               (FactRule(fact="gpu.driver_version", min_version="550"), "big")))
    params = ConfigAuditParams.model_validate({"rules": [{"fact": "host.kernel", "min_version": "3.10"}]})
    out = KIND.run(params, ctx)
    by_fact = {e.metric: e for e in out.findings}
    assert by_fact["host.shm_bytes"].outcome is Outcome.FAIL
    assert by_fact["host.shm_bytes"].message.endswith("expected >= 1 PiB")
    kernel = by_fact["host.kernel"]
    assert kernel.outcome is Outcome.PASS and kernel.source == "suite (config)"
    outcomes = {o["fact"]: o for o in out.details["audit"]["outcomes"]}
    if not shutil.which("nvidia-smi"):
        assert "gpu.driver_version" not in by_fact and outcomes["gpu.driver_version"]["outcome"] == "skip"
    assert len(out.details["audit"]["facts"]) >= len(FACTS)
    shm = [m for m in out.metrics if m.name == "host.shm_bytes"]
    assert len(shm) == 1 and shm[0].unit == "B" and shm[0].value == by_fact["host.shm_bytes"].measured
    if shutil.which("ldconfig") or Path("/sbin/ldconfig").exists():
        assert any(t.argv[0].endswith("ldconfig") for t in ctx.tool_runs)
        assert (tmp_path / ctx.tool_runs[0].stdout_file).exists()
    assert "rule outcomes" in out.summary
