"""`harness ARGS` with the NVML and BMC edges faked, for tests only.

Usage: python tests/support/powerlaunch.py SCENARIO.json ARGS...   (ARGS as for `harness`).
The scenario names the fake GPUs (tests/fakenvml.FakeGpu fields) and the scripted BMC
(tests/fakebmc.ScriptedBmc fields, plus `node_w_steps`: [[from_read, watts], ...]); without
`bmc` the check's own `open_bmc` runs (kind none: no BMC). Everything else, the CLI, runner,
the check, stress-ng and the burn engine, is the real thing in this real process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fakebmc
import fakenvml


def _watts(steps: list[list[float]]) -> Any:
    def at(n: int) -> float:
        return next(w for start, w in reversed(steps) if n >= start)
    return at


def main() -> None:
    scenario = json.loads(Path(sys.argv[1]).read_text())
    sys.modules["pynvml"] = fakenvml.module([fakenvml.FakeGpu(**g) for g in scenario.get("gpus", [])])
    if "bmc" in scenario:
        spec = dict(scenario["bmc"])
        if "node_w_steps" in spec:
            spec["node_w"] = _watts(spec.pop("node_w_steps"))
        bmc = fakebmc.ScriptedBmc(**spec)
        from harness.checks import power_headroom

        power_headroom.open_bmc = lambda cfg: bmc  # type: ignore[assignment]
    sys.argv = ["harness", *sys.argv[2:]]
    from harness.cli.main import main as cli

    cli()


if __name__ == "__main__":
    main()
