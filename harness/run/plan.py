"""Turn a loaded suite and profile into a plan: which checks run, with which rules. Pure."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from harness import ownrules
from harness.compare import Rule, applicable, band, describe_band
from harness.config.models import Expectation, Profile
from harness.errors import UsageError

if TYPE_CHECKING:
    from harness.config.loader import LoadedProfile, LoadedSuite, ResolvedCheck


@dataclass(frozen=True)
class PlannedCheck:
    """One check as it will run: the resolved suite entry and the rules that judge it."""

    check: ResolvedCheck
    rules: tuple[Rule, ...]
    expected_by: str = ""  # see expected_by(): set when the profile expects a measurement from it

    @property
    def id(self) -> str:
        return self.check.spec.id


def select_checks(suite: LoadedSuite, only: Sequence[str], skip: Sequence[str]) -> list[ResolvedCheck]:
    """Apply --only and --skip; an unknown id is a usage error naming the known ones."""
    ids = [c.spec.id for c in suite.checks]
    unknown = [i for i in (*only, *skip) if i not in ids]
    if unknown:
        raise UsageError(f"unknown check id(s) {', '.join(unknown)} in --only/--skip; "
                         f"{suite.path} has: {', '.join(ids)}")
    chosen = [c for c in suite.checks if (not only or c.spec.id in only) and c.spec.id not in skip]
    if not chosen:
        raise UsageError("--only/--skip left no check to run")
    return chosen


def hardware_rules(profile: Profile) -> list[Rule]:
    """The profile's hardware block as expectations on inventory metrics."""
    hw = profile.hardware
    src = f"{profile.name} (hardware)"
    out = []
    if hw.gpu.count:
        out.append(Rule(Expectation(metric="gpu.count", unit="count", min=hw.gpu.count,
                                    max=hw.gpu.count), src))
    if hw.memory_min_bytes:
        out.append(Rule(Expectation(metric="host.memory", unit="B", min=hw.memory_min_bytes), src))
    if hw.nvme_count is not None:
        out.append(Rule(Expectation(metric="host.nvme_count", unit="count", min=hw.nvme_count), src))
        out.append(Rule(Expectation(metric="nvme.count", unit="count", min=hw.nvme_count), src))
    if hw.hca_count:
        out.append(Rule(Expectation(metric="ib.hca_count", unit="count", min=hw.hca_count), src))
    return out


def expected_by(check_id: str, rules: Sequence[Rule], hardware: Sequence[Rule]) -> str:
    """Why the profile expects a measurement from a check ('' when it does not): a rule of its
    hardware block applies to the check, or one of its expectations names the check (`check: ID`);
    `if_measured` rules never do. A rule that only names a metric applies wherever that metric is
    measured and expects nothing: skipping nvme-health on a node without NVMe is fine."""
    for r in rules:
        e = r.expectation
        if not e.if_measured and (r in hardware or e.check == check_id):
            sel = ",".join(f"{k}={v}" for k, v in sorted(e.labels.items()))
            what = f"{e.metric}{{{sel}}}" if sel else e.metric
            return f"profile {r.source} expects it: {what} {describe_band(*band(e), e.unit)}"
    return ""


def build(suite: LoadedSuite, profile: LoadedProfile, only: Sequence[str] = (),
          skip: Sequence[str] = ()) -> list[PlannedCheck]:
    """Every selected check with its rules: profile rules, hardware rules, the check's own."""
    hardware_block = hardware_rules(profile.profile)
    profile_rules = [Rule(e, profile.profile.name) for e in profile.profile.expectations]
    profile_rules += hardware_block
    plan = []
    hardware = profile.profile.hardware.model_dump()
    for rc in select_checks(suite, only, skip):
        params = rc.kind.with_profile(rc.params, hardware)
        if params is not rc.params:
            rc = replace(rc, params=params)
        names = rc.kind.metric_specs(rc.params).keys()
        rules = applicable(profile_rules, rc.spec.id, names)
        expected = expected_by(rc.spec.id, rules, hardware_block)
        rules += [Rule(e, f"suite {suite.suite.name}") for e in rc.spec.expect]
        plan.append(PlannedCheck(rc, tuple(rules), expected))
    return plan


def gpu_expectation_text(profile: Profile) -> str | None:
    """'8 x NVIDIA H100 80GB HBM3' when the profile expects GPUs, else None."""
    gpu = profile.hardware.gpu
    if not gpu.count:
        return None
    return f"{gpu.count} x {gpu.models[0] if gpu.models else 'GPU'}"


def select_profile(inventory: Mapping[str, Any],
                   candidates: Sequence[LoadedProfile]) -> tuple[str, str]:
    """Pick a profile name by the GPUs found (model and count); else 'generic'. Returns (name, why)."""
    gpus = inventory.get("gpus", [])
    if not gpus:
        reason = inventory.get("nvml", {}).get("reason") or "no NVIDIA GPU found"
        return "generic", f"auto: no GPU found ({reason}); using generic"
    names = {g.get("name", "") for g in gpus}
    found = f"{len(gpus)} x {', '.join(sorted(names))}"
    matches = []
    for lp in candidates:
        hw = lp.profile.hardware.gpu
        models = {m.lower() for m in hw.models}
        if hw.count == len(gpus) and models and all(n.lower() in models for n in names):
            matches.append(lp.profile.name)
    if not matches:
        return "generic", f"auto: found {found}; no profile lists that model and count; using generic"
    # a profile that extends another match (dgx-h100 over h100-sxm-8x) refines it: chosen by name only
    chains = {lp.profile.name: lp.chain for lp in candidates}
    matches = [m for m in matches if not any(o in chains[m][1:] for o in matches)] or matches
    matches.sort()
    more = f" (also matched: {', '.join(matches[1:])})" if len(matches) > 1 else ""
    return matches[0], f"auto: found {found}; matches hardware of profile {matches[0]}{more}"


def render_dry_run(suite: LoadedSuite, profile: LoadedProfile, profile_reason: str,
                   plan: Sequence[PlannedCheck], inventory: Mapping[str, Any],
                   allow_destructive: bool) -> str:
    """The plan as text: every check, its exact command lines, and every rule that can fail it:
    the profile's and the suite's expectations, then the kind's own rules from its params."""
    from harness.run import sampler as telemetry

    hardware = profile.profile.hardware.model_dump()
    lines = [f"suite   {suite.suite.name}  ({suite.path})",
             f"profile {profile.profile.name}  ({profile.path}; {profile_reason})",
             f"checks  {len(plan)}   --allow-destructive: {'yes' if allow_destructive else 'no'}", ""]
    for n, pc in enumerate(plan, 1):
        c = pc.check
        extra = []
        if c.repeat > 1:
            extra.append(f"repeat {c.repeat}")
        if c.spec.needs or c.kind.needs:
            extra.append("needs " + ",".join(sorted({*c.spec.needs, *c.kind.needs})))
        if c.spec.destructive:
            extra.append("destructive")
        lines.append(f"{n}. {c.spec.id}  [{c.kind.name}]  timeout {c.timeout_s:g} s"
                     + (f"  {'  '.join(extra)}" if extra else ""))
        try:
            commands = c.kind.plan(c.params, inventory)
        except Exception as e:
            commands = ()
            lines.append(f"   (cannot show commands: {e})")
        for cmd in commands:
            lines.append(f"   $ {shlex.join(cmd.argv)}" + (f"   # {cmd.note}" if cmd.note else ""))
        own = [*c.kind.rules_of(c.params), *telemetry.own_rules(c.params)]
        built_in = [*(c.kind.verdicts(c.params, hardware) if c.kind.verdicts else ()),
                    *telemetry.verdicts(c.params)]
        if c.kind.name == "config_audit":
            from harness.config.factrule import plan_lines

            lines += plan_lines(profile.profile.name, profile.profile.config, getattr(c.params, "rules", []))
        elif not pc.rules and not own and not built_in:
            lines.append("   (no expectations: metrics are recorded only)")
        lines += [f"   verdict: {v}" for v in built_in]
        lines += [f"   {ownrules.describe(r)}" for r in (*pc.rules, *own)]
        lines.append("")
    return "\n".join(lines)
