"""Readiness (`harness list --tools`): each kind's declared needs, probed for real on this machine."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.checks.base import CheckKind, Need
from harness.checks.readiness import NeedState, is_ready, readiness
from harness.checks.registry import kinds
from harness.cli.listing import tools_listing
from harness.platform.toolprobe import Presence, probe_python, probe_tool, version_in

NO_TOOLS = {"command", "mdraid"}  # the suite's own argv; /proc/mdstat


def test_every_kind_says_what_it_needs():
    for name, kind in kinds().items():
        assert bool(kind.requires) == (name not in NO_TOOLS), name
        for need in kind.requires:  # a concrete way to get it, not the generic fallback
            assert re.search(r"apt-get install \w|pip install \S|build github|OFED", need.hint), need
            assert not need.hint.startswith(f"install {need.name} and put it"), need


def _state(name: str, found: bool, use: str = "", group: str = "") -> NeedState:
    return NeedState(Need(name, "hint", use=use, group=group), Presence(found))


def test_ready_needs_every_unconditional_need_and_one_of_each_group():
    assert is_ready([])
    assert not is_ready([_state("fio", False)])
    assert is_ready([_state("fio", True), _state("ipmitool", False, use="bmc kind: ipmi")])
    engines = [_state("gpu_burn", False, "engine: gpu-burn", "engine"),
               _state("torch", True, "builtin", "engine")]
    assert is_ready(engines)
    assert not is_ready([_state("gpu_burn", False, "x", "engine"), _state("torch", False, "y", "engine")])
    assert not is_ready([*engines, _state("stress-ng", False)])


def test_each_distinct_need_is_probed_once():
    asked: list[str] = []

    def probe(need: Need) -> Presence:
        asked.append(need.name)
        return Presence(need.name != "torch", "/x", "1.0")

    report = readiness(kinds(), probe)
    assert len(asked) == len(set(asked)) and {"torch", "fio", "nvidia-smi"} <= set(asked)
    by = {r.kind: r for r in report}
    assert list(by) == list(kinds())
    assert by["fio"].ready and by["gpu_burn"].ready  # gpu_burn found, torch missing: one engine is enough
    assert by["power_headroom"].ready  # cupy stands in for torch
    text = tools_listing(report)
    assert "torch" in text and "install: pip install 'gpu-acceptance-harness[torch]'" in text
    assert text.splitlines()[-1] == f"{len(report)} of {len(report)} check kinds ready on this machine"


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_the_real_fio_reports_its_version():
    p = probe_tool("fio", ("--version",))
    real = subprocess.run(["fio", "--version"], capture_output=True, text=True, check=True).stdout
    assert p.found and p.where == shutil.which("fio") and p.version and p.version in real


def test_a_missing_tool_and_a_missing_package():
    assert probe_tool("no-such-tool-xyz", ("--version",)) == Presence(False, note="not on PATH")
    assert probe_python("no_such_module_xyz") == Presence(False, note="not importable")


def test_a_python_package_is_found_without_importing_it():
    import importlib.metadata as md

    p = probe_python("yaml")
    assert p.found and p.where == "PyYAML" and p.version == md.version("PyYAML")


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_a_broken_hanging_or_silent_tool_is_found_but_says_why(tmp_path: Path, monkeypatch):
    sleep = shutil.which("sleep")
    monkeypatch.setenv("PATH", str(tmp_path))
    _script(tmp_path, "broken", "echo 'NVIDIA-SMI has failed because it could not communicate' >&2\nexit 9\n")
    _script(tmp_path, "hangs", f"exec {sleep} 30\n")
    _script(tmp_path, "quiet", "exit 0\n")
    _script(tmp_path, "oldstyle", "echo 'Version: 6.06'\nexit 1\n")  # perftest: rc 1, still a version
    monkeypatch.setattr("harness.platform.toolprobe.TIMEOUT_S", 0.5)
    broken = probe_tool("broken", ("--version",))
    assert broken.found and not broken.version and broken.note.startswith("exit 9: NVIDIA-SMI has failed")
    hangs = probe_tool("hangs", ("--version",))
    assert hangs.found and "no answer" in hangs.note
    assert probe_tool("quiet", ("--version",)) == Presence(True, str(tmp_path / "quiet"))
    assert probe_tool("oldstyle", ("--version",)).version == "6.06"


def test_a_tool_that_must_not_be_run_is_only_looked_up(tmp_path: Path, monkeypatch):
    """gpu_burn without arguments starts a burn: it is never run to ask its version."""
    monkeypatch.setenv("PATH", str(tmp_path))
    marker = tmp_path / "ran"
    _script(tmp_path, "gpu_burn", f"touch {marker}\n")
    burn = next(n for n in kinds()["gpu_burn"].requires if n.name == "gpu_burn")
    assert burn.version_args == ()
    assert probe_tool("gpu_burn", burn.version_args).found and not marker.exists()


@pytest.mark.parametrize(("text", "version"), [
    ("fio-3.33\n", "3.33"), ("iperf 3.12 (cJSON 1.7.15)\n", "3.12"), ("ipmitool version 1.8.19\n", "1.8.19"),
    ("550.54.15\n550.54.15\n", "550.54.15"), ("nvbandwidth Version: v0.5\n", "0.5"),
    ("stress-ng, version 0.15.06 (gcc 12.2.0)", "0.15.06"), ("usage: tool [-h]\n", ""),
])
def test_version_in(text: str, version: str):
    assert version_in(text) == version


def test_a_kind_without_needs_is_ready():
    kind = kinds()["command"]
    assert isinstance(kind, CheckKind)
    (r,) = readiness({"command": kind})
    assert r.ready and r.needs == ()
