"""The `command` kind: run any argument list, extract metrics by regex or JSON path. No eval."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Optional

from pydantic import Field, field_validator, model_validator

from harness import catalog
from harness.checks.base import (
    CheckContext,
    CheckKind,
    CheckOutput,
    KindHooks,
    MetricSpec,
    Params,
    PlannedCommand,
)
from harness.model import Metric
from harness.numfmt import fmt_value
from harness.parsers import extract
from harness.units import SECONDS, UNITS

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Extractor(Params):
    """One metric to pull out of the command's output."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$",
                      description="metric name, dotted, e.g. app.throughput")
    unit: str
    better: Literal["higher", "lower", "none"] = "none"
    source: Literal["stdout", "stderr"] = "stdout"
    regex: Optional[str] = Field(None, description="named group 'value'; other named groups "
                                 "become labels")
    json_path: Optional[str] = Field(None, description="e.g. results[0].bw or jobs.*.iops")
    labels: dict[str, str] = Field(default_factory=dict, description="fixed labels to add")
    required: bool = Field(True, description="a missing value makes the run invalid")

    @field_validator("unit")
    @classmethod
    def _unit(cls, v: str) -> str:
        if v not in UNITS:
            raise ValueError(f"unknown unit {v!r}; use one of {', '.join(sorted(UNITS))}")
        return v

    @field_validator("regex")
    @classmethod
    def _regex(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return v
        try:
            pattern = re.compile(v, re.MULTILINE)
        except re.error as e:
            raise ValueError(f"bad regex: {e}") from None
        if "value" not in pattern.groupindex:
            raise ValueError("regex needs a named group 'value', e.g. (?P<value>[0-9.]+)")
        return v

    @field_validator("json_path")
    @classmethod
    def _path(cls, v: Optional[str]) -> Optional[str]:
        if v is not None:
            extract.parse_path(v)
        return v

    @model_validator(mode="after")
    def _one_source(self) -> Extractor:
        if (self.regex is None) == (self.json_path is None):
            raise ValueError("give exactly one of regex or json_path")
        return self


class CommandParams(Params):
    argv: list[str] = Field(min_length=1, description="program and arguments; never a shell")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    expect_rc: list[int] = Field(default_factory=lambda: [0])
    metrics: list[Extractor] = Field(default_factory=list)
    loads_node: bool = Field(True, description="false for a read-only command (df, a config "
                             "read): then it runs beside other read-only runs, e.g. in a prolog")

    @field_validator("argv")
    @classmethod
    def _argv(cls, v: list[str]) -> list[str]:
        if not v[0]:
            raise ValueError("the program (argv[0]) is empty")
        bad = next((i for i, a in enumerate(v) if "\0" in a), None)
        if bad is not None:
            raise ValueError(f"argv[{bad}] holds a NUL byte, which no argument can carry")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        """Names as a shell would take them (no '=', no NUL, not empty); values without NUL:
        refused here (exit 2), not when the program starts (an internal error, exit 3)."""
        for key, value in v.items():
            if not ENV_NAME.fullmatch(key):
                raise ValueError(f"environment variable name {key!r} is not one: use letters, digits "
                                 "and '_', not starting with a digit")
            if "\0" in value:
                raise ValueError(f"environment variable {key}: the value holds a NUL byte")
        return v


def extract_metrics(params: CommandParams, stdout: str, stderr: str) -> tuple[list[Metric], list[str]]:
    """Apply every extractor (pure): metrics found, and problems for required ones not found."""
    metrics: list[Metric] = []
    problems: list[str] = []
    for ex in params.metrics:
        text = stdout if ex.source == "stdout" else stderr
        try:
            found = (extract.by_regex(text, re.compile(ex.regex, re.MULTILINE)) if ex.regex
                     else extract.by_json_path(text, ex.json_path or ""))
        except ValueError as e:
            problems.append(f"{ex.name}: {e}")
            continue
        good = 0
        for labels, value, raw in found:
            if value is None:
                problems.append(f"{ex.name}: {raw!r} is not a number")
                continue
            metrics.append(Metric(ex.name, value, ex.unit, {**ex.labels, **labels}))
            good += 1
        if not good and ex.required:
            where = f"regex {ex.regex!r}" if ex.regex else f"JSON path {ex.json_path!r}"
            problems.append(f"{ex.name}: {where} matched nothing in {ex.source}")
    return metrics, problems


def run(params: CommandParams, ctx: CheckContext) -> CheckOutput:
    res = ctx.run_tool(params.argv, env=params.env or None, check_rc=False)
    problems: list[str] = []
    if res.rc not in params.expect_rc:
        how = f"killed by signal {-res.rc}" if res.rc is not None and res.rc < 0 else f"exit {res.rc}"
        problems.append(f"{' '.join(params.argv)}: {how} (expected {params.expect_rc})"
                        + (f": {res.tail(300)}" if res.tail(300) else ""))
    metrics, more = extract_metrics(params, res.stdout(), res.stderr())
    shown = "; ".join(f"{m.name} {fmt_value(m.value, m.unit)}" for m in metrics[:4])
    metrics.append(Metric("command.duration", round(res.duration_s, 6), SECONDS))
    return CheckOutput(metrics=tuple(metrics), problems=tuple(problems + more),
                       summary=f"exit {res.rc} in {res.duration_s:.2f} s" + (f": {shown}" if shown else ""))


def plan(params: CommandParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    env = " ".join(f"{k}=..." for k in params.env)
    return (PlannedCommand(tuple(params.argv), f"env: {env}" if env else ""),)


def declared(params: CommandParams) -> dict[str, MetricSpec]:
    return {ex.name: MetricSpec(ex.unit, ex.better) for ex in params.metrics}


KIND = CheckKind(
    name="command",
    description="run any program; metrics from regex named groups or a JSON path",
    params=CommandParams,
    metrics=catalog.subset(["command.duration"]),
    run=run,
    plan=plan,
    hooks=KindHooks(
        declared_metrics=declared,
        loads_node=lambda p: p.loads_node,
    ),
)
