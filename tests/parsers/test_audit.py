"""The config audit's pure parsers on real captured text (tests/data/audit/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.parsers import hostfacts as hp
from harness.parsers import ibports, libs
from harness.parsers.nvsmi import parse_smi_xml

DATA = Path(__file__).parents[1] / "data" / "audit"


def text(name: str) -> str:
    return (DATA / name).read_text()


# ---------------------------------------------------------------- ldconfig and library versions

def test_ldconfig_every_entry_and_the_libraries_audited():
    raw = text("ldconfig-p_debian12_vm_cuda13-wheel_rdma-core44.txt")
    entries = libs.parse_ldconfig(raw)
    announced = int(raw.split()[0])  # "598 libs found in cache ..."
    assert len(entries) == announced == 598
    cudart = libs.find(entries, "libcudart")
    assert [(e.soname, e.path) for e in cudart] == [
        ("libcudart.so.13", "/usr/local/cuda-13.0/lib/libcudart.so.13"),
        ("libcudart.so", "/usr/local/cuda-13.0/lib/libcudart.so")]
    assert cudart[0].flags == "libc6,x86-64"
    verbs = libs.find(entries, "libibverbs")
    assert [e.path for e in verbs] == ["/lib/x86_64-linux-gnu/libibverbs.so.1"]
    assert libs.find(entries, "libnccl") == [] and libs.find(entries, "libcudnn") == []


def test_find_does_not_confuse_prefixes():
    entries = libs.parse_ldconfig(text("ldconfig-p_debian12_vm_cuda13-wheel_rdma-core44.txt"))
    assert all(e.soname.startswith("libz.so") for e in libs.find(entries, "libz"))
    assert any(e.soname.startswith("libz3") for e in entries)


@pytest.mark.parametrize("name, version", [
    ("libnccl.so.2.21.5", "2.21.5"), ("libcudart.so.12.4.127", "12.4.127"), ("libcudnn.so.9.1.0", "9.1.0"),
    ("libcudart.so.13", "13"), ("libibverbs.so.1.14.44.0", "1.14.44.0"), ("libz.so", None),
    ("libfoo.so.1.0rc1", None)])
def test_version_from_filename(name, version):
    assert libs.version_from_filename(name) == version


def test_rdma_core_version_from_libibverbs_name():
    assert libs.rdma_core_version("libibverbs.so.1.14.44.0") == "44.0"  # Debian 12 rdma-core 44.0-2
    assert libs.rdma_core_version("libibverbs.so.1") is None


@pytest.mark.parametrize("lib, code, version", [
    ("cudart", 13000, "13.0"), ("cudart", 12040, "12.4"), ("nccl", 22105, "2.21.5"),
    ("nccl", 2708, "2.7.8"), ("cudnn", 90100, "9.1.0"), ("cudnn", 8907, "8.9.7")])
def test_decode_version_codes(lib, code, version):
    assert libs.decode_version(lib, code) == version


# ---------------------------------------------------------------- nvidia-smi -q -x

def test_nvidia_smi_xml_p100():
    log = parse_smi_xml(text("nvidia-smi_-q_-x_tesla_p100_510.47.03.xml"))
    assert (log.driver_version, log.cuda_version, log.attached_gpus) == ("510.47.03", "11.6", 1)
    (g,) = log.gpus
    assert (g.index, g.pci_bus_id, g.name) == (0, "00000000:00:04.0", "Tesla P100-PCIE-16GB")
    assert g.persistence_mode is False
    assert (g.mig_mode, g.ecc_mode, g.vbios_version) == ("n/a", "enabled", "86.00.52.00.02")
    assert g.fabric_state is None  # a 510 driver on Pascal does not report it


@pytest.mark.parametrize("bad", ["", "NVIDIA-SMI has failed because it couldn't communicate with the "
                                    "NVIDIA driver.", "<other/>"])
def test_nvidia_smi_xml_rejects_other_text(bad):
    with pytest.raises(ValueError):
        parse_smi_xml(bad)


# ---------------------------------------------------------------- ibv_devinfo, ofed_info

def test_ibv_devinfo_four_hcas_sorted():
    hcas = ibports.hcas(text("ibv_devinfo_4x_cx4_edr_ib_port_active_dgx1.txt"))
    assert [h.name for h in hcas] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert {h.fw_ver for h in hcas} == {"12.23.1020"}
    assert all(h.ports == ((1, "PORT_ACTIVE", "InfiniBand"),) for h in hcas)
    assert hcas[0].vendor_part_id == "4115"


def test_ibv_devinfo_port_down_ethernet_vf():
    (h,) = ibports.hcas(text("ibv_devinfo_cx6_vf_port_down_ethernet.txt"))
    assert (h.name, h.fw_ver, h.ports) == ("mlx5_1", "16.23.1020", ((1, "PORT_DOWN", "Ethernet"),))


def test_ibv_devinfo_without_devices():
    assert ibports.hcas(text("ibv_devinfo_no_devices_rdma-core44.txt")) == []


@pytest.mark.parametrize("out, version", [
    ("MLNX_OFED_LINUX-23.10-1.1.9.0:\n", "23.10-1.1.9.0"),  # MLNX_OFED's `ofed_info -s` form
    ("OFED-internal-24.04-0.6.6:\n", "24.04-0.6.6"),  # DOCA-OFED's
    ("", None)])
def test_ofed_info(out, version):
    assert ibports.parse_ofed_info(out) == version


# ---------------------------------------------------------------- /proc and /sys

def test_cmdline_params_stop_at_init_arguments():
    params = hp.parse_cmdline(text("proc-cmdline_firecracker_vm.txt"))
    assert params["console"] == "ttyS0" and params["quiet"] == ""
    assert params["mitigations"] == "auto,no_guest_host,no_guest_guest"
    assert params["page_reporting.page_reporting_order"] == "11"
    assert "--firecracker-init" not in params and "iommu" not in params


def test_thp_and_swaps():
    assert hp.parse_thp(text("thp-enabled_madvise.txt")) == "madvise"
    assert hp.parse_swaps(text("proc-swaps_no_swap.txt")) == 0
    # the kernel's /proc/swaps layout (sizes in KiB) with one swap file and one partition
    two = ("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/swapfile file\t\t2097148\t\t0\t\t-2\n"
           "/dev/sda2 partition\t8388604\t\t1024\t\t-3\n")
    assert hp.parse_swaps(two) == (2097148 + 8388604) * 1024


def test_interrupts_and_the_nic_irqs():
    lines = hp.parse_interrupts(text("proc-interrupts_2cpu_firecracker_virtio.txt"))
    by_irq = {ln.irq: ln for ln in lines}
    assert len(lines) == 19 and min(by_irq) == 24 and max(by_irq) == 43
    assert by_irq[38].name == "virtio2-input.0" and by_irq[38].counts == (0, 7133)
    assert by_irq[38].chip == "PCI-MSIX-0000:00:03.0 1-edge"
    assert hp.irqs_for(lines, "0000:00:03.0", "eth0") == [37, 38, 39]
    assert hp.irqs_for(lines, None, "virtio3") == [40, 41, 42, 43]


@pytest.mark.parametrize("cpus, want", [("0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}), ("1\n", {1}), ("", set())])
def test_cpulist(cpus, want):
    assert hp.parse_cpulist(cpus) == want


def test_cgroup_v1_hybrid_paths():
    groups = hp.parse_proc_cgroup(text("proc-self-cgroup_v1_hybrid_docker.txt"))
    assert groups["memory"] == "/process_api/70634fcd6a62e3c2ffc9685ea41a3432"
    assert groups[""] == "/" and groups["systemd"] == "/"
    mounts = hp.parse_cgroup_mounts(text("proc-self-mountinfo_v1_hybrid_docker.txt"))
    assert {(m.mount_point, m.version) for m in mounts if m.version == 2} == {("/sys/fs/cgroup/unified", 2)}
    mem = next(m for m in mounts if "memory" in m.controllers)
    assert (mem.mount_point, mem.root, mem.version) == ("/sys/fs/cgroup/memory", "/", 1)
    assert hp.cgroup_dir(mounts, groups, "memory") == (
        "/sys/fs/cgroup/memory/process_api/70634fcd6a62e3c2ffc9685ea41a3432", 1)
    assert hp.cgroup_dir(mounts, groups, "cpu") == ("/sys/fs/cgroup/cpu", 1)


def test_cgroup_v2_only_and_a_mount_root():
    mounts = hp.parse_cgroup_mounts("35 28 0:30 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    assert hp.cgroup_dir(mounts, {"": "/kubepods/pod1/c1"}, "memory") == ("/sys/fs/cgroup/c1", 2)
    assert hp.cgroup_dir([], {"": "/"}, "memory") is None


def test_cgroup_limits():
    assert hp.parse_memory_limit(text("cgroup1-memory.limit_in_bytes_no_limit.txt")) == "unlimited"
    # cgroup v2 formats as Documentation/admin-guide/cgroup-v2.rst gives them
    assert hp.parse_memory_limit("max\n") == "unlimited"
    assert hp.parse_memory_limit("68719476736\n") == 64 * 1024**3
    assert hp.parse_cpu_max("max 100000\n") == "unlimited"
    assert hp.parse_cpu_max("250000 100000\n") == 2.5
    assert hp.parse_cfs("-1\n", "100000\n") == "unlimited" and hp.parse_cfs("50000", "100000") == 0.5


def test_governors_summary():
    assert hp.summarize_governors(["performance"] * 4) == "performance"
    assert hp.summarize_governors(["performance"] * 3 + ["powersave"]) == \
        "mixed: performance x 3, powersave x 1"
    assert hp.summarize_governors([]) is None


def test_processes_by_comm_truncated_to_15():
    comms = ["bash", "nv-fabricmanage", "chronyd", "systemd-timesyn"]
    assert hp.running(comms, "nv-fabricmanager")
    assert not hp.running(comms, "irqbalance")
    assert hp.time_daemon(comms) == "chronyd,systemd-timesyncd"
    assert hp.time_daemon(["bash"]) == "none"


@pytest.mark.parametrize("kw, kind", [
    ({"env_names": ["KUBERNETES_SERVICE_HOST"], "dockerenv": True}, "kubernetes"),
    ({"env_names": ["ENROOT_ROOTFS"]}, "enroot"),
    ({"env_names": ["APPTAINER_CONTAINER"]}, "apptainer"),
    ({"containerenv": True}, "podman"),
    ({"dockerenv": True}, "docker"),
    ({"cgroup_text": "0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-1.scope\n"}, "kubernetes"),
    ({"cgroup_text": "0::/system.slice/containerd.service\n"}, "container"),
    ({}, "none")])
def test_container_detection(kw, kind):
    args = {"dockerenv": False, "containerenv": False, "cgroup_text": "", "env_names": [], **kw}
    assert hp.detect_container(**args)[0] == kind
