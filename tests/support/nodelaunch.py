"""`harness ARGS` on a node faked at its two GPU edges, for tests only: NVML (tests/fakenvml) and
the PCI bus root (a /sys/bus/pci/devices tree the test built, tests/pcisysfs).

Usage: python tests/support/nodelaunch.py SCENARIO.json ARGS...   (ARGS as for `harness`).
Scenario: {"gpus": [FakeGpu fields...], "bus_ids": ["0000:1b:00.0", ...] (NVML's PCI address of
each GPU), "nvml_fails": "why" (nvmlInit raises), "pci_root": "/path/to/devices", "memory_bytes": N
(MemTotal as the node reports it; default: this machine's), "ib_root": "/path/to/infiniband" (a
/sys/class/infiniband tree, tests/ibsysfs; default: this machine's)}. Everything else,
lsblk (PATH decides which), the CLI, runner, checks and compare, is the real thing.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fakenvml


def main() -> None:
    scenario = json.loads(Path(sys.argv[1]).read_text())
    m = fakenvml.module([fakenvml.FakeGpu(**g) for g in scenario.get("gpus", [])],
                        fail_init=scenario.get("nvml_fails"))
    bus = scenario.get("bus_ids")
    if bus:
        m.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(  # type: ignore[attr-defined]
            busId="0000" + bus[h].upper())
    sys.modules["pynvml"] = m
    from harness.platform import pci

    pci.SYSFS = Path(scenario["pci_root"])
    if "ib_root" in scenario:
        from harness.platform import infiniband

        infiniband.SYSFS = Path(scenario["ib_root"])
    if "memory_bytes" in scenario:  # an 8-GPU node's host memory, not this machine's
        from harness.parsers import sysinfo as parse

        real = parse.parse_meminfo
        parse.parse_meminfo = lambda text: {**real(text), "MemTotal": int(scenario["memory_bytes"])}
    sys.argv = ["harness", *sys.argv[2:]]
    from harness.cli.main import main as cli

    cli()


if __name__ == "__main__":
    main()
