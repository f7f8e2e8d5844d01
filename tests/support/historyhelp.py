"""Helpers for the history, drift and baseline tests: real quick runs and records derived from them.

`quick_runs` makes real 1-second fio runs through the CLI; `derive` makes later "runs" of a node
from a real record (other time, hostname, GPUs, scaled metrics), the way a fleet's history looks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from clihelp import QUICK_FIO, harness, run_dirs, write

from harness import results
from harness.checks.inventory import metrics_from
from harness.compare.judge import evaluate
from harness.compare.rules import Rule, applicable
from harness.config.loader import LoadedProfile
from harness.model import CheckResult, Evaluation, Metric, RunRecord, Status
from harness.run.plan import hardware_rules

# a real H200's identity (shared/fixtures/real/nvidia-smi/nvidia-smi_-q_h200_550.90.12.txt),
# numbered on for the other seven GPUs of the node
H200_SERIAL, H200_UUID = 1753724031847, "GPU-cb3dfa52-e2f3-9ca4-a399-7d16041c3732"


def quick_runs(tmp: Path, n: int, suite_text: str = QUICK_FIO, profile: str = "generic",
               env: Mapping[str, str] | None = None) -> list[Path]:
    """`n` real runs of the quick fio suite; returns their run directories, oldest first.

    Module-scoped fixtures call this before conftest's per-test run lock is set, so it takes its own.
    """
    suite = write(tmp / "quick.yaml", suite_text)
    out = tmp / "reports"
    for _ in range(n):
        r = harness("run", str(suite), "--profile", profile, "--output", str(out),
                    env={"HARNESS_HISTORY": "off", "HARNESS_LOCK_FILE": str(tmp / "run.lock"), **(env or {})})
        assert r.returncode in (0, 1), r.stdout + r.stderr
    dirs = run_dirs(out)
    assert len(dirs) == n
    return dirs


def gpus(swapped: Iterable[int] = (), new_serial_base: int = 1753724099000) -> list[dict[str, Any]]:
    """Eight H200 GPUs; the indexes in `swapped` carry replacement serials and UUIDs."""
    out = []
    for i in range(8):
        serial = str(new_serial_base + i if i in set(swapped) else H200_SERIAL + i)
        uuid = H200_UUID[:-4] + (f"{0xa000 + i:04x}" if i in set(swapped) else f"{0x3732 + i:04x}")
        out.append({"index": i, "name": "NVIDIA H200", "serial": serial, "uuid": uuid,
                    "vbios": "96.00.A5.00.01", "pci_bus_id": f"00000000:{0x03 + i:02X}:00.0",
                    "driver": "550.90.12"})
    return out


def derive(base: RunRecord, run_id: str, started: str, *, hostname: str | None = None,
           system_serial: str | None = "S-NODE-1", gpu_list: list[dict[str, Any]] | None = None,
           driver: str | None = None, scale: Mapping[str, float] | None = None,
           extra: Callable[[RunRecord], Sequence[Metric]] | None = None,
           errored_check: bool = False) -> RunRecord:
    """Another run of a node made from a real record: identity, time and metric values changed."""
    inv = dict(base.inventory)
    inv["host"] = {**inv.get("host", {}), "hostname": hostname or base.host}
    inv["system"] = {**inv.get("system", {}), "serial": system_serial}
    if gpu_list is not None:
        inv["gpus"] = gpu_list
    if driver is not None:
        inv["software"] = {**inv.get("software", {}), "nvidia_driver": driver}
    checks = []
    for c in base.checks:
        ms = tuple(Metric(m.name, m.value * (scale or {}).get(m.name, 1.0), m.unit, m.labels)
                   for m in c.metrics)
        if c.kind == "inventory":  # the counts follow the changed inventory
            ms = metrics_from(inv)
        checks.append(replace(c, metrics=ms, evaluations=()))
    rec = replace(base, run_id=run_id, host=hostname or base.host, started=started, finished=started,
                  inventory=inv, checks=tuple(checks), history={})
    if extra is not None:
        checks.append(CheckResult("burn", "command", Status.PASSED, metrics=tuple(extra(rec))))
    if errored_check:
        checks.append(CheckResult("broken", "command", Status.ERRORED, "tool crashed"))
    return replace(rec, checks=tuple(checks))


def acceptance(record: RunRecord) -> RunRecord:
    """The record as a run of a suite tagged for acceptance (so it can be a node's go-live run)."""
    return replace(record, suite={**record.suite, "tags": ["acceptance"]})


def load(run_dir: Path) -> RunRecord:
    return results.load(run_dir)


def judge(profile: LoadedProfile, record: RunRecord) -> list[Evaluation]:
    """The profile's rules against each valid check of a record, as the runner applies them."""
    rules = [Rule(e, profile.profile.name) for e in profile.profile.expectations]
    rules += hardware_rules(profile.profile)
    out: list[Evaluation] = []
    for c in record.checks:
        if c.status.value in ("passed", "recorded", "warned", "failed"):
            out += evaluate(applicable(rules, c.id, {m.name for m in c.metrics}), c.metrics)
    return out


def write_suite(tmp: Path, text: str) -> Path:
    return write(tmp / "suite.yaml", text)
