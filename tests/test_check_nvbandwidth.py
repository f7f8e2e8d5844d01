"""The nvbandwidth check kind: params, command lines, run+parse through a real process that
stands in for the nvbandwidth binary and prints real captured output for the test it is asked."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.nvbandwidth import KIND, NvbandwidthParams
from harness.errors import ToolError
from harness.model import Outcome

DATA = Path(__file__).parent / "data" / "nvbandwidth"
BY_TEST = {
    "device_to_host_memcpy_ce": DATA / "nvbandwidth_v0.10.0_8x_h100_device_to_host_memcpy_ce.txt",
    "device_to_device_memcpy_read_ce": DATA / "nvbandwidth_v0.10.0_8x_h100_d2d_memcpy_read_ce.txt",
    "device_to_device_latency_sm": DATA / "nvbandwidth_v0.10.0_8x_h100_device_to_device_latency_sm.txt",
}


def fake_nvbandwidth(tmp_path: Path, rc: int = 0) -> Path:
    """Prints the captured output of the test named after -t; nothing (exit 1) for others."""
    cases = "\n".join(f'  {t}) cat "{p}" ;;' for t, p in BY_TEST.items())
    path = tmp_path / "nvbandwidth"
    path.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> "{tmp_path}/argv"\n'
                    f'case "$2" in\n{cases}\n  *) exit 1 ;;\nesac\nexit {rc}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def ctx_for(tmp_path: Path) -> CheckContext:
    return CheckContext("nvbw", tmp_path / "run", 30, destructive=False, allow_destructive=False,
                        inventory={}, log=logging.getLogger("t"))


def test_plan_one_command_per_test():
    p = NvbandwidthParams(buffer_mib=512, samples=3)
    cmds = [c.argv for c in KIND.plan(p, {})]
    assert cmds[0] == ("nvbandwidth", "-t", "host_to_device_memcpy_ce", "-b", "512", "-i", "3")
    assert [c[2] for c in cmds] == ["host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
                                    "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce"]
    assert KIND.needs == frozenset({"gpu"})


@pytest.mark.parametrize("kw, words", [
    ({"tests": ["h2d; rm -rf"]}, "not an nvbandwidth test name"),
    ({"tests": ["a_b_c", "a_b_c"]}, "listed twice"),
    ({"tests": []}, "at least 1 item"),
    ({"buffer_mib": 0}, "greater than or equal to 1"),
])
def test_bad_params_are_refused(kw, words):
    with pytest.raises(ValidationError, match=words):
        NvbandwidthParams.model_validate(kw)


def test_run_each_test_and_judge_siblings(tmp_path):
    exe = fake_nvbandwidth(tmp_path)
    p = NvbandwidthParams(binary=str(exe), tests=list(BY_TEST))
    ctx = ctx_for(tmp_path)
    out = KIND.run(p, ctx)
    assert out.problems == ()
    assert len(out.metrics) == 9 + 57 + 56
    assert (tmp_path / "argv").read_text().split() == [x for t in BY_TEST for x in ("-t", t)]
    d2h = {m.labels["src"]: m.value for m in out.metrics
           if m.name == "nvbandwidth.bw" and m.labels["test"] == "device_to_host_memcpy_ce"}
    assert d2h["gpu4"] == 55.25 and len(d2h) == 8
    assert [(e.labels, e.outcome) for e in out.evaluations] == [
        ({"test": "device_to_host_memcpy_ce"}, Outcome.PASS),
        ({"test": "device_to_device_memcpy_read_ce"}, Outcome.PASS)]  # latency is not compared
    assert out.summary == ("device_to_host_memcpy_ce min 55.2 GB/s (gpu2->cpu); "
                           "device_to_device_memcpy_read_ce min 395.1 GB/s (gpu7->gpu0)")
    assert out.details["version"] == "v0.10.0" and out.details["driver"] == "595.71.05"
    assert out.details["tests"]["device_to_host_memcpy_ce"] == {"cov": {"device_to_host_memcpy_ce": 0.0},
                                                                "not_measured": []}
    assert [Path(t.stdout_file).name for t in ctx.tool_runs] == [
        f"0{i}-nvbandwidth-{t}.stdout" for i, t in enumerate(BY_TEST, 1)]


def test_a_test_with_no_output_is_a_tool_error(tmp_path):
    p = NvbandwidthParams(binary=str(fake_nvbandwidth(tmp_path)), tests=["host_to_device_memcpy_sm"])
    with pytest.raises(ToolError, match=r"nvbandwidth -t host_to_device_memcpy_sm \(exit 1\): "
                       r"not nvbandwidth output \(no result matrix found\)"):
        KIND.run(p, ctx_for(tmp_path))


def test_results_then_a_nonzero_exit_are_invalid(tmp_path):
    p = NvbandwidthParams(binary=str(fake_nvbandwidth(tmp_path, rc=4)), tests=["device_to_host_memcpy_ce"])
    out = KIND.run(p, ctx_for(tmp_path))
    assert len(out.metrics) == 9
    assert out.problems[0].startswith("nvbandwidth -t device_to_host_memcpy_ce exited with status 4")


def test_sibling_rule_can_be_switched_off(tmp_path):
    p = NvbandwidthParams(binary=str(fake_nvbandwidth(tmp_path)), tests=["device_to_host_memcpy_ce"],
                          sibling_tolerance=None)
    assert KIND.run(p, ctx_for(tmp_path)).evaluations == ()
