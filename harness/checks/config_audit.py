"""The `config_audit` kind: collect the node's software and configuration facts and judge them
against the profile's `config:` rules (plus any the suite adds), in a few seconds.

Every fact lands in details (and so in results.json) with where it was read; numeric facts are
also metrics, so baselines and fleet views can use them. Rules give Evaluations (fail/warn/
error/pass); a rule on a fact that cannot be known here is skipped with the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from harness import catalog, sections
from harness.audit.judge import FactOutcome, judge
from harness.checks import needs
from harness.checks.base import CheckContext, CheckKind, CheckOutput, KindHooks, Need, Params, PlannedCommand
from harness.config.factrule import FactRule, plan_lines
from harness.errors import ToolTimeout
from harness.facts import FACTS, Fact
from harness.model import Metric
from harness.platform.facts import collect

TOOL_TIMEOUT_S = 30.0
METRIC_FACTS = [n for n, s in FACTS.items() if s.unit is not None]

NAME = "config_audit"


class ConfigAuditParams(Params):
    """Extra rules on top of the profile's `config:` block."""

    rules: list[FactRule] = Field(default_factory=list, description="suite-level fact rules")


def gpu_expected(hardware: Mapping[str, Any]) -> str | None:
    """'8 x NVIDIA H100 80GB HBM3' when the profile's hardware block expects GPUs."""
    gpu = hardware.get("gpu")
    count = gpu.get("count") if isinstance(gpu, Mapping) else 0
    if not count or not isinstance(gpu, Mapping):
        return None
    models = gpu.get("models") or ["GPU"]
    return f"{count} x {models[0]}"


def metrics_from(facts: Sequence[Fact]) -> tuple[Metric, ...]:
    """Numeric facts that have a metric unit, as metrics (an 'unlimited' limit has no number)."""
    out = []
    for f in facts:
        unit = FACTS[f.name].unit
        if unit and isinstance(f.value, (int, float)) and not isinstance(f.value, bool):
            out.append(Metric(f.name, float(f.value), unit, dict(f.labels)))
    return tuple(out)


def summarize(facts: Sequence[Fact], outcomes: Sequence[FactOutcome], profile: str) -> str:
    """'48 facts (9 unknown here); 14 rules: 11 pass, 1 warn, 2 skipped'."""
    unknown = sum(1 for f in facts if f.value is None)
    head = f"{len(facts)} facts" + (f" ({unknown} unknown here)" if unknown else "")
    if not outcomes:
        return f"{head}; no config rules in profile {profile}: facts recorded only"
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.outcome] = counts.get(o.outcome, 0) + 1
    order = ("fail", "error", "warn", "pass", "skip")
    words = {"skip": "skipped"}
    parts = [f"{counts[k]} {words.get(k, k)}" for k in order if counts.get(k)]
    return f"{head}; {len(outcomes)} rule outcomes: {', '.join(parts)}"


def run(params: ConfigAuditParams, ctx: CheckContext) -> CheckOutput:
    def tool(argv: Sequence[str]) -> tuple[int, str, str]:
        name = "libversion" if argv[0] == sys.executable else None
        try:
            res = ctx.run_tool(argv, name=name, timeout_s=TOOL_TIMEOUT_S, check_rc=False)
        except ToolTimeout as e:
            return -1, "", str(e)
        return (res.rc if res.rc is not None else -1), res.stdout(), res.stderr()

    ctx.progress("reading facts")
    facts = collect(tool, inventory=ctx.inventory)
    rules = [*ctx.config, *((r, "suite") for r in params.rules)]
    outcomes = judge(rules, facts, gpu_expected(ctx.hardware))
    profile = ctx.config[0][1] if ctx.config else "(none)"
    found = tuple(f for o in outcomes if (f := o.finding()) is not None)
    details: sections.Details = {"audit": {"facts": [f.to_dict() for f in facts],
                         "outcomes": [o.to_dict() for o in outcomes]}}
    return CheckOutput(metrics=metrics_from(facts), details=details, findings=found,
                       summary=summarize(facts, outcomes, profile))


def plan(params: ConfigAuditParams, inventory: Mapping[str, Any]) -> Sequence[PlannedCommand]:
    return (
        PlannedCommand(("nvidia-smi", "-q", "-x"), "when present; GPU facts"),
        PlannedCommand(("ldconfig", "-p"), "CUDA runtime, cuDNN, NCCL, libibverbs"),
        PlannedCommand(("ofed_info", "-s"), "when present"),
        PlannedCommand(("ibv_devinfo",), "when RDMA devices exist"),
        PlannedCommand((sys.executable, "-c", "<version probe>", "cudart|nccl|cudnn", "LIB"),
                       "only when a library file name carries no full version; plus /proc, /sys, "
                       "getrlimit and statvfs reads"),
    )


KIND = CheckKind(
    name=NAME,
    description="software and configuration facts against the profile's golden config",
    params=ConfigAuditParams,
    metrics=catalog.subset(METRIC_FACTS),
    run=run,
    plan=plan,
    hooks=KindHooks(
        estimate_s=lambda _p: 3.0,
        loads_node=False,
        sections=frozenset({"audit"}),
        config_plan=lambda p, profile, rules: plan_lines(profile, list(rules), p.rules),
        requires=(needs.nvidia_smi("GPU and driver facts"),
                  Need("ofed_info", "MLNX_OFED / DOCA-OFED", use="OFED version", version_args=("-s",)),
                  needs.tool("ibv_devinfo", use="HCA firmware")),
    ),
)
