"""Check kind `nvbandwidth`: host-device and GPU-GPU copy bandwidth and latency with nvbandwidth.

One nvbandwidth invocation per test (`-t <test>`), so each test's output is kept on its
own and a crash in one test does not hide the others' numbers. Text output is parsed (the
matrix format is stable across v0.7-v0.10; no real JSON capture exists to test against).
The sibling rule flags a GPU or GPU pair whose bandwidth is far below the median of the
same test's other cells.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from pydantic import Field, field_validator

from harness import catalog, siblings
from harness.checks.base import CheckContext, CheckKind, CheckOutput, Params, PlannedCommand
from harness.errors import ToolError
from harness.model import Evaluation, Metric
from harness.parsers import nvbandwidth as nvb_parser

DEFAULT_TESTS = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
                 "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce")


class NvbandwidthParams(Params):
    """Which nvbandwidth tests, with which buffer size and sample count."""

    tests: list[str] = Field(default_factory=lambda: list(DEFAULT_TESTS), min_length=1,
                             description="nvbandwidth test names (nvbandwidth -l lists them)")
    binary: str = Field("nvbandwidth", description="path or name on PATH")
    buffer_mib: Optional[int] = Field(None, ge=1, le=65536, description="-b, buffer size in MiB")
    samples: Optional[int] = Field(None, ge=1, le=1000, description="-i, iterations per sample")
    sibling_tolerance: Optional[float] = Field(
        0.10, gt=0, lt=1, description="fail a GPU or pair this fraction below its test's median")

    @field_validator("tests")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for t in v:
            if not re.match(r"^[a-z0-9_]{3,80}$", t):
                raise ValueError(f"not an nvbandwidth test name: {t!r}")
        if len(set(v)) != len(v):
            raise ValueError("a test is listed twice")
        return v


def build_argv(params: NvbandwidthParams, test: str) -> list[str]:
    """nvbandwidth's command line for one test."""
    argv = [params.binary, "-t", test]
    if params.buffer_mib is not None:
        argv += ["-b", str(params.buffer_mib)]
    if params.samples is not None:
        argv += ["-i", str(params.samples)]
    return argv


def plan(params: NvbandwidthParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    """One command line per test."""
    return [PlannedCommand(tuple(build_argv(params, t))) for t in params.tests]


def _last(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def run(params: NvbandwidthParams, ctx: CheckContext) -> CheckOutput:
    """Every test in turn; bandwidth cells labelled test, src, dst (cpu, gpu<N>)."""
    metrics: list[Metric] = []
    problems: list[str] = []
    details: dict[str, Any] = {"tests": {}}
    for test in params.tests:
        ctx.progress(f"nvbandwidth {test}")
        res = ctx.run_tool(build_argv(params, test), name=f"nvbandwidth-{test}", check_rc=False)
        if res.interrupted:
            raise ToolError("nvbandwidth: interrupted; its process group was killed", argv=res.argv)
        parsed = nvb_parser.parse(res.stdout() + "\n" + res.stderr())
        if not parsed.metrics:
            why = "; ".join(parsed.problems) or "no output"
            raise ToolError(f"nvbandwidth -t {test} (exit {res.rc}): {why}", argv=res.argv, rc=res.rc,
                            output_tail=res.tail())
        problems += list(parsed.problems)
        if res.rc != 0:
            problems.append(f"nvbandwidth -t {test} exited with status {res.rc}: {_last(res.tail(600))}")
        metrics += parsed.metrics
        details["tests"][test] = {k: parsed.details.get(k) for k in ("cov", "not_measured")}
        for key in ("version", "driver"):
            details.setdefault(key, parsed.details.get(key))
    evaluations: tuple[Evaluation, ...] = ()
    if params.sibling_tolerance is not None:
        rule = siblings.SiblingRule("nvbandwidth.bw", ("src", "dst"), params.sibling_tolerance)
        evaluations = siblings.judge(rule, metrics)
    return CheckOutput(tuple(metrics), tuple(problems), details, _summary(metrics), evaluations)


def _summary(metrics: Sequence[Metric]) -> str:
    parts = []
    for test in dict.fromkeys(str(m.labels.get("test")) for m in metrics if m.name == "nvbandwidth.bw"):
        cells = [m for m in metrics if m.name == "nvbandwidth.bw" and m.labels.get("test") == test
                 and m.labels.get("part") in (None, "total")]
        if cells:
            low = min(cells, key=lambda m: m.value)
            parts.append(f"{test} min {low.value:.1f} GB/s ({low.labels['src']}->{low.labels['dst']})")
    return "; ".join(parts) or "no bandwidth measured"


KIND = CheckKind(
    name="nvbandwidth",
    description="host-device and GPU-GPU copy bandwidth/latency with NVIDIA nvbandwidth",
    params=NvbandwidthParams,
    metrics=catalog.subset(["nvbandwidth.bw", "nvbandwidth.sum", "nvbandwidth.lat"]),
    run=run,
    plan=plan,
    needs=frozenset({"gpu"}),
)
