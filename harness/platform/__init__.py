"""Edges to the machine: subprocesses, block devices, sysfs, NVML. Nothing else touches them."""
