"""Edges to the machine: subprocesses, block devices, sysfs, NVML. Nothing else touches them.

proc (run a tool, bounded; INSTALL_HINTS, group_alive) and nvml (the NVML session) are the edges most
layers use; the others read one part of the machine each (blockdev, pci, infiniband, bmc, ...).
"""
