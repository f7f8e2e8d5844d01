"""The settle gate: on the NVML fake (tests/support/fakenvml.py) with a cooling series and a fake
clock, through the suite's settings, and once through the real runner with a busy GPU going idle."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from fakenvml import FakeGpu, install

from harness.checks import registry
from harness.config.loader import ResolvedCheck, load_suite
from harness.config.models import Settle
from harness.errors import ConfigError
from harness.model import RunRecord
from harness.platform import nvml
from harness.run import session as app
from harness.run import settle

INVENTORY = {"gpus": [{"index": 0}, {"index": 1}]}


class Clock:
    """A clock that only moves when the gate sleeps."""

    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


def check(kind: str, **settings: Any) -> ResolvedCheck:
    k = registry.get(kind)
    return ResolvedCheck(spec=None, kind=k, params=None, timeout_s=60, repeat=1, tags=(),  # type: ignore[arg-type]
                         settle=Settle(**settings))


def gate(clock: Clock) -> settle.Gate:
    return settle.Gate(nvml.NvmlSession, clock, clock.sleep, poll_s=1.0)


def test_waits_for_a_gpu_cooling_down_after_a_burn(monkeypatch):
    clock = Clock()
    hot = {"on": False}
    # GPU 1 idles at 38 C; after "the burn" it reads 80 C and cools 4 C a second (one reading a second)
    start = {"t": 0.0}

    def temp(_n: int) -> float:
        return max(38.0, 80.0 - 4.0 * (clock.t - start["t"])) if hot["on"] else 38.0

    install(monkeypatch, [FakeGpu(temp=36.0, util=0.0), FakeGpu(temp=temp, util=0.0)])
    notes: list[str] = []
    g = gate(clock)
    assert g.before(check("gpu_health"), INVENTORY, lambda: False, notes.append) == {}  # learns 36 / 38 C
    assert g.idle == {0: 36.0, 1: 38.0}
    hot["on"], start["t"] = True, clock.t
    got = g.before(check("gpu_bandwidth"), INVENTORY, lambda: False, notes.append)["settle"]
    # 80 - 4t <= 38 + 5 first at t = 9.25 s: readings each second, so settled at the 10th
    assert got["settled"] is True and got["waited_s"] == 10.0
    assert got["gpus"][1] == {"gpu": 1, "temp": 40.0, "util": 0.0, "idle_temp": 38.0, "settled": True,
                              "why": "idle and near its idle temperature"}
    assert notes == ["waiting up to 300 s for the GPUs to settle: GPU 1 cooling: 80 C, idle 38 C + 5"]
    assert clock.sleeps == [1.0] * 10


def test_a_busy_gpu_is_waited_for_until_the_timeout_then_measured_anyway(monkeypatch):
    clock = Clock()
    install(monkeypatch, [FakeGpu(temp=40.0, util=0.0), FakeGpu(temp=40.0, util=97.0)])
    notes: list[str] = []
    got = gate(clock).before(check("nccl", timeout=12), INVENTORY, lambda: False, notes.append)["settle"]
    assert got["settled"] is False and got["reason"] == "timed out after 12 s"
    assert got["waited_s"] == 12.0 and sum(clock.sleeps) == 12.0  # bounded: never past the timeout
    assert [g["why"] for g in got["gpus"]] == ["idle and near its idle temperature", "busy (97%)"]
    assert notes[-1] == "GPUs did not settle in 12 s (GPU 1 busy (97%)): measuring anyway"


def test_a_gpu_that_stopped_cooling_above_its_idle_temperature_counts_as_settled(monkeypatch):
    clock = Clock()
    hot = {"on": False}
    install(monkeypatch, [FakeGpu(temp=lambda _n: 55.0 if hot["on"] else 35.0, util=0.0)])
    g = gate(clock)
    g.before(check("gpu_health"), {"gpus": [{}]}, lambda: False, print)
    hot["on"] = True  # the room warmed up: 55 C is as cool as it gets now
    got = g.before(check("gpu_burn"), {"gpus": [{}]}, lambda: False, print)["settle"]
    assert got["settled"] is True and got["waited_s"] == settle.PLATEAU_S
    assert got["gpus"][0]["why"] == "stopped cooling (1 C in 30 s)"


def test_an_interrupt_ends_the_wait(monkeypatch):
    clock = Clock()
    install(monkeypatch, [FakeGpu(util=100.0)])
    got = gate(clock).before(check("gpu_burn"), {"gpus": [{}]}, lambda: clock.t >= 3, print)["settle"]
    assert got["settled"] is False and got["reason"] == "interrupted" and got["waited_s"] == 3.0


def test_no_gpus_no_nvml_and_kinds_that_do_not_measure(monkeypatch):
    clock = Clock()
    g = gate(clock)
    assert g.before(check("gpu_burn"), {"gpus": []}, lambda: False, print) == {
        "settle": {"skipped": "no GPUs on this node"}}
    assert g.before(check("fio"), {"gpus": []}, lambda: False, print) == {}
    install(monkeypatch, [FakeGpu()], fail_init="no driver")
    got = gate(clock).before(check("gpu_burn"), INVENTORY, lambda: False, print)
    assert got["settle"]["skipped"].startswith("cannot read the GPUs: NVML not loadable")
    assert clock.sleeps == []
    # a suite can turn the gate on for any kind, or off for a measuring one
    assert settle.wants(check("fio", enabled=True)) and not settle.wants(check("gpu_burn", enabled=False))
    assert settle.wants(check("gpu_bandwidth")) and settle.wants(check("nccl"))
    assert not settle.wants(check("gpu_health"))


def test_a_lost_gpu_does_not_hold_the_gate(monkeypatch):
    clock = Clock()
    install(monkeypatch, [FakeGpu(util=0.0, lost_after=0), FakeGpu(util=0.0)])
    got = gate(clock).before(check("gpu_burn"), INVENTORY, lambda: False, print)["settle"]
    assert got["settled"] is True and got["waited_s"] == 0.0
    assert got["gpus"][0]["why"].startswith("not answering: GPU is lost")


SUITE = """\
name: s
defaults:
  settle: {timeout: 10m, temp_margin: 3}
checks:
  - id: bw
    kind: gpu_bandwidth
  - id: burn
    kind: gpu_burn
    settle: {temp_margin: 8}
  - id: fio
    kind: command
    params: {argv: ["true"]}
    settle: {enabled: true, timeout: 30s}
"""


def test_suite_defaults_and_per_check_settings(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(SUITE)
    bw, burn, fio = load_suite(path, registry.kinds()).checks
    assert (bw.settle.timeout, bw.settle.temp_margin, bw.settle.max_util) == (600.0, 3.0, 5.0)
    assert (burn.settle.timeout, burn.settle.temp_margin) == (600.0, 8.0)  # the rest from defaults
    assert fio.settle.enabled is True and (fio.settle.timeout, fio.settle.temp_margin) == (30.0, 3.0)


@pytest.mark.parametrize("bad", ["{temp_margin: -1}", "{timeout: soon}", "{max_util: 101}", "{wait: 5}"])
def test_bad_settle_settings_are_config_errors(tmp_path: Path, bad: str):
    path = tmp_path / "s.yaml"
    path.write_text(SUITE.replace("{temp_margin: 8}", bad))
    with pytest.raises(ConfigError, match="settle"):
        load_suite(path, registry.kinds())


BURN_OUT = (Path(__file__).parents[1] / "data" / "gpu-burn"
            / "gpu_burn_k80_2gpu_doubles_ok_interleaved_child_output.txt")


def test_the_runner_waits_for_a_busy_gpu_before_the_burn_and_records_it(tmp_path: Path, monkeypatch):
    t0 = time.monotonic()
    install(monkeypatch, [FakeGpu(util=0.0),
                          FakeGpu(util=lambda _n: 100.0 if time.monotonic() - t0 < 1.5 else 0.0)])
    exe = tmp_path / "gpu_burn"
    exe.write_text(f'#!/bin/sh\ncat "{BURN_OUT}"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "suite.yaml").write_text(f"""\
name: settle-e2e
defaults: {{settle: {{timeout: 60s}}}}
checks:
  - id: gpu-burn
    kind: gpu_burn
    params: {{binary: "{exe}", duration: 1, telemetry_period: 0.2}}
""")
    (tmp_path / "p.yaml").write_text("name: p\nhardware: {gpu: {models: [\"NVIDIA H200\"], count: 2}}\n")
    out = tmp_path / "reports"
    app.run(suite=str(tmp_path / "suite.yaml"), profile=str(tmp_path / "p.yaml"), output=out)
    (run_dir,) = [p for p in out.iterdir() if (p / "results.json").is_file()]
    rec = RunRecord.from_dict(json.loads((run_dir / "results.json").read_text()))
    (burn,) = rec.checks
    got = burn.details["settle"]
    assert got["settled"] is True and 1.0 <= got["waited_s"] <= 10.0, got
    assert [g["util"] for g in got["gpus"]] == [0.0, 0.0]
    assert burn.duration_s >= got["waited_s"]
