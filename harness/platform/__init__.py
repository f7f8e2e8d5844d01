"""Edges to the machine: subprocesses, block devices, sysfs, NVML. Nothing else touches them.

proc (run a tool, bounded; INSTALL_HINTS, group_alive) and nvml (the NVML session) are the edges most
layers use; the others read one part of the machine each (blockdev, pci, infiniband, bmc, ...).
`__all__` lists those the layers above import; the rest (bounded, blockscan, procscan, ...) serve them.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = [
    "blockdev", "bmc", "cgroup", "diskstats", "facts", "forked", "infiniband", "ledger", "netdev", "nvlink",
    "nvme", "nvml", "pair", "pci", "proc", "procfs", "pushgateway", "runlock", "scratch", "shm", "slurm",
    "storage", "sysinfo", "toolprobe", "workload",
]
