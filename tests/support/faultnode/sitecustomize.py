"""Fault scenarios for whole `harness` runs, tests only: loaded by every Python process started
with this directory on PYTHONPATH (the harness, the builtin burn's parent and its children), and
active only when FAULT_NODE names a scenario file (tests/support/faultscenario.py writes them).

In the harness: the fake pynvml (tests/support/fakenvml.py) over the scenario's GPUs, their
faults unfolding over the telemetry reads, and the NVML call bound (`nvml_timeout_s`). In the
builtin burn (NumPy backend): one stand-in per fake GPU, and per device a fault `after_s` seconds
after it is ready (None: at once, before ready): `raise` (the device errors, as CUDA does on a
GPU that fell off the bus), `hang` (it stops answering), `unkillable` (it stops answering and the
parent's SIGKILL does not take, as on a process in uninterruptible sleep). A fault may append a
kernel-log line (`xid`) to the file the scenario's fake dmesg prints.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _value(spec: Any) -> Any:
    """A FakeGpu field from JSON: a number, or a schedule over the read number:
    {"after": N, "then": V, "before": V0} (a step), {"after": N, "per_read": K} (a ramp),
    {"after": N, "every": P, "on": V, "for": R, "off": V0} (bursts of R reads every P)."""
    if not isinstance(spec, dict):
        return spec
    after, before = spec.get("after", 0), spec.get("before", 0)
    if "per_read" in spec:
        return lambda n: before + max(0, n - after) * spec["per_read"]
    if "every" in spec:
        return lambda n: spec["on"] if n >= after and (n - after) % spec["every"] < spec.get("for", 1) \
            else spec.get("off", 0)
    return lambda n: spec["then"] if n >= after else before


def _gpu(d: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if k in ("ecc", "nvlink_errors"):
            v = {(tuple(int(x) for x in key.split(",")) if "," in key else int(key)): _value(x)
                 for key, x in v.items()}
        elif k in ("pcie",):
            v = tuple(v)
        else:
            v = _value(v)
        out[k] = v
    return out


def _harness(scenario: dict[str, Any]) -> None:
    sys.path.insert(0, str(HERE.parent))
    import fakenvml

    sys.modules["pynvml"] = fakenvml.module([fakenvml.FakeGpu(**_gpu(g)) for g in scenario["gpus"]])
    from harness.platform import nvml

    nvml.CALL_TIMEOUT_S = float(scenario.get("nvml_timeout_s", nvml.CALL_TIMEOUT_S))


def _burn(scenario: dict[str, Any], child: int | None) -> None:
    from harness.engines import burn_ops

    faults = {int(k): v for k, v in scenario.get("burn_faults", {}).items()}
    n = len(scenario["gpus"])
    init, setup = burn_ops.NumpyBackend.__init__, burn_ops.NumpyBackend.setup

    def __init__(self: Any, host_devices: int = 1) -> None:
        init(self, n)

    def fault(device: int, f: dict[str, Any]) -> None:
        if f.get("xid"):
            with open(scenario["kernel_log"], "a", encoding="utf-8") as log:
                log.write(f["xid"] + "\n")
        if f["do"] == "raise":
            raise RuntimeError(f.get("message", "CUDA error: unspecified launch failure"))
        time.sleep(3600)  # hang, unkillable: the device stops answering

    def faulty_setup(self: Any, device: int, size: int, dtype: str) -> Any:
        f = faults.get(device)
        if f is not None and f.get("after_s") is None:
            fault(device, f)
        ops = setup(self, device, size, dtype)
        if f is None:
            return ops
        t0 = time.monotonic()
        multiply = ops.multiply

        def late() -> Any:
            if time.monotonic() - t0 >= f["after_s"]:
                fault(device, f)
            return multiply()

        return _with(ops, late)

    burn_ops.NumpyBackend.__init__ = __init__  # type: ignore[method-assign]
    burn_ops.NumpyBackend.setup = faulty_setup  # type: ignore[method-assign]
    if child is None:  # the parent: SIGKILL does not take on an unkillable device's child
        import subprocess

        stuck = {str(d) for d, f in faults.items() if f["do"] == "unkillable"}
        kill = subprocess.Popen.kill

        def no_kill(p: subprocess.Popen[Any]) -> None:
            args = [str(a) for a in p.args]  # type: ignore[union-attr]
            if "--device" in args and args[args.index("--device") + 1] in stuck:
                return
            kill(p)

        subprocess.Popen.kill = no_kill  # type: ignore[method-assign]


def _with(ops: Any, multiply: Any) -> Any:
    import dataclasses

    return dataclasses.replace(ops, multiply=multiply)


def _install() -> None:
    path = os.environ.get("FAULT_NODE")
    if not path:
        return
    scenario = json.loads(Path(path).read_text())
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if "harness.engines.burn" in argv:
        _burn(scenario, int(argv[argv.index("--device") + 1]) if "--device" in argv else None)
    elif "harness" in argv:
        _harness(scenario)


_install()
