"""The explicit registry of parse kinds, reachable as `harness parse KIND FILE`."""

from __future__ import annotations

from collections.abc import Callable

from harness.parsers.base import ParseResult

Parser = Callable[[str], ParseResult]


def parsers() -> dict[str, Parser]:
    """Every parse kind by name."""
    from harness.parsers import fio  # start-up: parsers load on first use of the registry

    return {"fio": fio.parse, **_interconnect_parsers(), **_network_parsers(), **_gpu_parsers(),
            **_storage_parsers(), **_bmc_parsers()}


def _interconnect_parsers() -> dict[str, Parser]:
    """NCCL, RDMA, IB port state, copy bandwidth and topology outputs."""
    # start-up: parsers load on first use of the registry
    from harness.parsers import cudasamples, ethtool, ibports, nccl, nvbandwidth, perftest, portcounters, topo

    return {"nccl": nccl.parse, "perftest": perftest.parse, "ibstat": ibports.parse_ibstat,
            "ibv-devinfo": ibports.parse_ibv_devinfo, "nvbandwidth": nvbandwidth.parse,
            "cuda-bandwidthtest": cudasamples.parse_bandwidthtest, "p2p": cudasamples.parse_p2p,
            "nvidia-smi-topo": topo.parse, "perfquery": portcounters.parse_perfquery,
            "ethtool-stats": ethtool.parse}


def _network_parsers() -> dict[str, Parser]:
    """TCP/UDP front-end network outputs."""
    from harness.parsers import iperf3  # start-up: parsers load on first use of the registry

    return {"iperf3": iperf3.parse}


def _storage_parsers() -> dict[str, Parser]:
    """NVMe and SMART health logs, software RAID state."""
    from harness.parsers import mdstat, nvme, smartctl  # start-up: parsers load on first use of the registry

    return {"nvme-smart": nvme.parse, "smartctl": smartctl.parse, "mdstat": mdstat.parse}


def _gpu_parsers() -> dict[str, Parser]:
    """GPU health and burn outputs: gpu_burn, dcgmi diag, nvidia-smi, kernel-log XIDs."""
    # start-up: parsers load on first use of the registry
    from harness.parsers import burnlog, copylog, dcgm, gpuburn, nvsmi, nvsmi_csv, xid

    return {"gpu-burn": gpuburn.parse, "dcgmi-diag": dcgm.parse, "nvidia-smi-q": nvsmi.parse,
            "nvidia-smi-csv": nvsmi_csv.parse, "xid": xid.parse, "builtin-burn": burnlog.parse,
            "builtin-copy": copylog.parse, **_smi_screen_parsers()}


def _smi_screen_parsers() -> dict[str, Parser]:
    """What operators paste from a terminal: the default nvidia-smi table and nvidia-smi dmon."""
    from harness.parsers import nvsmi_dmon, nvsmi_table  # start-up: parsers load on first use of the registry

    return {"nvidia-smi": nvsmi_table.parse, "nvidia-smi-dmon": nvsmi_dmon.parse}


def _bmc_parsers() -> dict[str, Parser]:
    """BMC power and PSU state: ipmitool and Redfish."""
    from harness.parsers import ipmi, redfish  # start-up: parsers load on first use of the registry

    return {"ipmi-dcmi-power": ipmi.parse_dcmi, "ipmi-sdr": ipmi.parse_sdr,
            "redfish-power": redfish.parse}
