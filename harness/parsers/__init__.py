"""Pure parsers: tool output text in, ParseResult out. No I/O, no subprocesses.

base (ParseResult and helpers) and registry (the `harness parse` entry); one module per tool format.
`__all__` lists those the layers above import; the rest (nvsmi_csv, smartctl_text, ...) serve them.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = [
    "base", "burnlog", "clockreasons", "copylog", "cudasamples", "dcgm", "ethtool", "extract", "fio",
    "gpuburn", "hostfacts", "ibports", "iperf3", "ipmi", "ipmi_sdr", "libs", "linkstate", "mdstat", "nccl",
    "nvbandwidth", "nvme", "nvsmi", "perftest", "portcounters", "redfish", "registry", "smartctl", "sysinfo",
    "topo", "xid",
]
