"""Turn a loaded suite and profile into a plan: which checks run, with which rules. Pure."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from harness.checks import afterload
from harness.compare.rules import OwnRule, Rule, applicable, band, describe_band, describe_rule
from harness.config.models import Expectation, Profile
from harness.errors import UsageError
from harness.history.series import is_acceptance
from harness.model import LeftOut, join_labels
from harness.platform import pci
from harness.series import telemetry

if TYPE_CHECKING:
    from harness.checks.base import CheckKind
    from harness.config.loader import LoadedProfile, LoadedSuite, ResolvedCheck


@dataclass(frozen=True)
class PlannedCheck:
    """One check as it will run: the resolved suite entry and the rules that judge it."""

    check: ResolvedCheck[CheckKind]
    rules: tuple[Rule, ...]  # the profile's and the suite's
    expecting: Rule | None = None  # see expecting(): the profile's rule that expects a measurement

    @property
    def id(self) -> str:
        return self.check.spec.id

    @property
    def expected_by(self) -> str:
        """'profile P expects it: RULE' when the profile expects a measurement from it, else ''."""
        r = self.expecting
        return "" if r is None else f"profile {r.source} expects it: {_rule_text(r.expectation)}"

    @property
    def own_rules(self) -> tuple[OwnRule, ...]:
        """The kind's own rules from its params, then the telemetry's: what compare.judge applies
        after `rules`, and what --dry-run lists after them."""
        c = self.check
        return (*c.kind.rules_of(c.params), *telemetry.own_rules(c.params))


# An option that selects checks, as (its name, whether it keeps a check): --only and --skip here; a
# new selecting option (tags, say) is one more entry, and what it leaves out is named after it.
Selector = tuple[str, Callable[["ResolvedCheck[CheckKind]"], bool]]


def selectors(only: Sequence[str], skip: Sequence[str], tags: Sequence[str] = ()) -> list[Selector]:
    """The selecting options given: --only keeps the ids it names, --skip the others, --tags the
    checks carrying one of its tags (the suite's default tags count)."""
    out: list[Selector] = []
    if only:
        out.append(("--only", lambda c: c.spec.id in only))
    if skip:
        out.append(("--skip", lambda c: c.spec.id not in skip))
    if tags:
        out.append(("--tags", lambda c: not set(c.tags).isdisjoint(tags)))
    return out


def split(suite: LoadedSuite[CheckKind], chosen_by: Sequence[Selector]
          ) -> tuple[list[ResolvedCheck[CheckKind]], list[tuple[ResolvedCheck[CheckKind], str]]]:
    """(the checks every selector keeps, [(a check left out, the first option that left it out)])."""
    kept, left = [], []
    for c in suite.checks:
        option = next((name for name, keeps in chosen_by if not keeps(c)), None)
        if option is None:
            kept.append(c)
        else:
            left.append((c, option))
    return kept, left


def select_checks(suite: LoadedSuite[CheckKind], only: Sequence[str], skip: Sequence[str],
                  tags: Sequence[str] = ()) -> list[ResolvedCheck[CheckKind]]:
    """Apply --only, --skip and --tags; an unknown id or tag is a usage error naming the known ones."""
    ids = [c.spec.id for c in suite.checks]
    unknown = [i for i in (*only, *skip) if i not in ids]
    if unknown:
        raise UsageError(f"unknown check id(s) {', '.join(unknown)} in --only/--skip; "
                         f"{suite.path} has: {', '.join(ids)}")
    known_tags = sorted({t for c in suite.checks for t in c.tags})
    strange = [t for t in tags if t not in known_tags]
    if strange:
        near = _near_tag(strange[0], known_tags)
        raise UsageError(f"no check of {suite.path} has tag(s) {', '.join(strange)}{near}; "
                         f"its tags: {', '.join(known_tags) or 'none'}")
    chosen, _ = split(suite, selectors(only, skip, tags))
    if not chosen:
        raise UsageError("--only/--skip/--tags left no check to run")
    return chosen


def _near_tag(tag: str, known: Sequence[str]) -> str:
    import difflib  # start-up: only when a tag is unknown

    close = difflib.get_close_matches(tag, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


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


def expecting(check_id: str, rules: Sequence[Rule], hardware: Sequence[Rule]) -> Rule | None:
    """The profile's rule that expects a measurement from a check (None when none does): a rule of
    its hardware block applies to the check, or one of its expectations names the check (`check: ID`);
    `if_measured` rules never do. A rule that only names a metric applies wherever that metric is
    measured and expects nothing: skipping nvme-health on a node without NVMe is fine."""
    for r in rules:
        e = r.expectation
        if not e.if_measured and (r in hardware or e.check == check_id):
            return r
    return None


def _rule_text(e: Expectation) -> str:
    what = f"{e.metric}{{{join_labels(e.labels)}}}" if e.labels else e.metric
    sib = e.sibling
    if sib is not None:  # its bounds come from the median of the siblings, not from band()
        how = (f">= {sib.min_ratio:g} x" if sib.min_ratio is not None else
               f"<= {sib.max_ratio:g} x" if sib.max_ratio is not None else
               f"within {sib.max_below:g} {e.unit} below" if sib.max_below is not None else
               f"within {sib.max_above:g} {e.unit} above")
        return f"{what} {how} the median of its siblings ({', '.join(sib.vary)})"
    return f"{what} {describe_band(*band(e), e.unit)}"


def _planned(rc: ResolvedCheck[CheckKind], suite: LoadedSuite[CheckKind], profile: LoadedProfile,
             profile_rules: Sequence[Rule], hardware_block: Sequence[Rule]) -> PlannedCheck:
    params = rc.kind.with_profile(rc.params, profile.profile.hardware.model_dump())
    if params is not rc.params:
        rc = replace(rc, params=params)
    names = rc.kind.metric_specs(rc.params).keys()
    rules = applicable(profile_rules, rc.spec.id, names)
    expected = expecting(rc.spec.id, rules, hardware_block)
    rules += [Rule(e, f"suite {suite.suite.name}") for e in rc.spec.expect]
    return PlannedCheck(rc, tuple(rules), expected)


def _rules(profile: LoadedProfile) -> tuple[list[Rule], list[Rule]]:
    """(every rule of the profile, its hardware block's rules)."""
    hardware_block = hardware_rules(profile.profile)
    return [Rule(e, profile.profile.name) for e in profile.profile.expectations] + hardware_block, \
        hardware_block


def build(suite: LoadedSuite[CheckKind], profile: LoadedProfile, only: Sequence[str] = (),
          skip: Sequence[str] = (), tags: Sequence[str] = ()) -> list[PlannedCheck]:
    """Every selected check with its rules: profile rules, hardware rules, the check's own."""
    profile_rules, hardware_block = _rules(profile)
    return [_planned(rc, suite, profile, profile_rules, hardware_block)
            for rc in select_checks(suite, only, skip, tags)]


def left_out(suite: LoadedSuite[CheckKind], profile: LoadedProfile,
             chosen_by: Sequence[Selector]) -> tuple[LeftOut, ...]:
    """The suite's checks the selecting options leave out, each with the option and who expects it:
    the profile (as for a skipped check: PlannedCheck.expected_by), and an acceptance suite, every
    check of which gates go-live. An expected check left out makes the run UNTESTED."""
    profile_rules, hardware_block = _rules(profile)
    gate = (f"suite {suite.suite.name} is an acceptance suite: every check of it gates go-live"
            if is_acceptance(suite.suite.tags) else "")
    out = []
    for rc, option in split(suite, chosen_by)[1]:
        by = _planned(rc, suite, profile, profile_rules, hardware_block).expected_by
        out.append(LeftOut(rc.spec.id, rc.kind.name, option, " and ".join(x for x in (by, gate) if x)))
    return tuple(out)


def gpu_expectation_text(profile: Profile) -> str | None:
    """'8 x NVIDIA H100 80GB HBM3' when the profile expects GPUs, else None."""
    gpu = profile.hardware.gpu
    if not gpu.count:
        return None
    return f"{gpu.count} x {gpu.models[0] if gpu.models else 'GPU'}"


def select_profile(inventory: Mapping[str, Any],
                   candidates: Sequence[LoadedProfile]) -> tuple[str, str]:
    """Pick a profile by the GPU model found (NVML name, else PCI device id); the count is then
    judged against it (gpu.count), never used to pick a lesser profile. Returns (name, why).

    No NVIDIA GPU on the PCI bus and no NVML: generic (a CPU-only node). GPUs of a model no
    profile lists, or GPUs that cannot be told apart from none: UsageError asking for --profile.
    """
    gpus = inventory.get("gpus") or []
    on_bus = inventory.get("pci_gpus") or []
    unknown = inventory.get("unknown") or {}
    names = sorted({str(g["name"]) for g in gpus if g.get("name")})  # a lost GPU has none: gpu_health
    # names it, and the count still judges it (gpu.count): the node is REJECTED under its own profile
    lost = [g for g in gpus if not g.get("name")]
    ids = sorted({str(d.get("device_id", "")).lower() for d in on_bus})
    nvml_why = inventory.get("nvml", {}).get("reason") or "NVML not loadable"
    if not gpus and not on_bus:
        nvml_ok = bool(inventory.get("nvml", {}).get("available"))
        bus_known = "pci_gpus" in inventory and "pci_gpus" not in unknown
        if not bus_known and not nvml_ok:
            raise UsageError(f"auto profile: cannot tell whether this node has GPUs ({nvml_why}; PCI "
                             f"bus: {unknown.get('pci_gpus', 'not read')}); give --profile")
        if not bus_known:
            return "generic", "auto: NVML sees no GPU (PCI bus not read); using generic"
        why = "" if nvml_ok else f" and {nvml_why}"
        return "generic", f"auto: no NVIDIA GPU on the PCI bus{why}: a CPU-only node; using generic"
    if gpus and (names or not on_bus):
        found, n = f"{len(gpus)} x {', '.join(names) or 'GPU'}", len(gpus)
        if lost:
            found += " (" + "; ".join(_lost_text(g) for g in lost) + ")"
    else:
        found, n = f"{len(on_bus)} NVIDIA GPUs (PCI device {', '.join(ids)}) without NVML", len(on_bus)

    def fits(lp: LoadedProfile) -> bool:
        hw = lp.profile.hardware.gpu
        if names and hw.models:
            return all(name.lower() in {m.lower() for m in hw.models} for name in names)
        return bool(hw.pci_device_ids) and all(i in hw.pci_device_ids for i in ids)

    matches = [lp.profile.name for lp in candidates if fits(lp)]
    if not matches:
        raise UsageError(f"auto profile: found {found}; no profile lists that model: give --profile NAME "
                         "(--profile generic judges without GPU expectations)")
    counts = {lp.profile.name: lp.profile.hardware.gpu.count for lp in candidates}
    matches = [m for m in matches if counts[m] == n] or matches  # a 4-GPU and an 8-GPU SKU of a model
    # a profile that extends another match (dgx-h100 over h100-sxm-8x) refines it: chosen by name only
    chains = {lp.profile.name: lp.chain for lp in candidates}
    matches = [m for m in matches if not any(o in chains[m][1:] for o in matches)] or matches
    matches.sort()
    chosen = matches[0]
    more = f" (also matched: {', '.join(matches[1:])})" if len(matches) > 1 else ""
    why = f"auto: found {found}; matches the model of profile {chosen}{more}"
    want = counts[chosen]
    if want and want != n:
        why += f"; profile {chosen} expects {want} GPUs, found {n}{pci.missing_text(gpus, on_bus)}"
    return chosen, why


def _lost_text(g: Mapping[str, Any]) -> str:
    """'GPU 3 at 00000000:4B:00.0 unreadable: GPU is lost' for a GPU NVML could not name."""
    where = f" at {g['pci_bus_id']}" if g.get("pci_bus_id") else ""
    return f"GPU {g.get('index', '?')}{where} unreadable: {g.get('error') or 'no name'}"


def time_text(plan: Sequence[PlannedCheck], inventory: Mapping[str, Any]) -> str:
    """'about 47 s in all (no estimate: inventory; skipped without GPUs: gpu-burn)': the kinds'
    estimates summed over the checks that will run, repeats counted."""
    total, unknown, no_gpu = 0.0, [], []
    gpus = bool(inventory.get("gpus") or inventory.get("pci_gpus"))
    for pc in plan:
        c = pc.check
        if {*c.spec.needs, *c.kind.needs} & {"gpu", "nvml"} and not gpus:
            no_gpu.append(pc.id)
        elif (estimate := c.kind.hooks.estimate_s) is None:
            unknown.append(pc.id)
        else:
            try:
                total += estimate(c.params) * c.repeat
            except Exception:  # an estimate is never worth a failed dry run
                unknown.append(pc.id)
    notes = [f"{what}: {', '.join(ids)}" for what, ids in
             (("no estimate", unknown), ("skipped without GPUs", no_gpu)) if ids]
    return f"about {total:.0f} s in all" + (f" ({'; '.join(notes)})" if notes else "")


def render_dry_run(suite: LoadedSuite[CheckKind], profile: LoadedProfile, profile_reason: str,
                   plan: Sequence[PlannedCheck], inventory: Mapping[str, Any],
                   allow_destructive: bool, came_from: tuple[str, str] = ("", ""),
                   left: Sequence[LeftOut] = ()) -> str:
    """The plan as text: every check, its exact command lines, and every rule that can fail it:
    the profile's and the suite's expectations, then the kind's own rules from its params.
    `came_from` says where the suite and the profile were found ('shipped', ...); `left` is what
    --only/--skip leave out (plan.left_out)."""
    hardware = profile.profile.hardware.model_dump()
    s_from, p_from = (f"{w}: " if w else "" for w in came_from)
    lines = [f"suite   {suite.suite.name}  ({s_from}{suite.path})",
             f"profile {profile.profile.name}  ({p_from}{profile.path}; {profile_reason})",
             f"checks  {len(plan)}   --allow-destructive: {'yes' if allow_destructive else 'no'}"]
    lines += [f"        {lo.text}" for lo in left]
    if any(lo.expected_by for lo in left):
        lines.append("        an expected check is left out: the run will be UNTESTED, not ACCEPTED")
    lines += [f"time    {time_text(plan, inventory)}", ""]
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
        if pc.expecting is not None:
            lines.append(f"   expected by the profile: {_rule_text(pc.expecting.expectation)}  "
                         f"[{pc.expecting.source}]; if it is skipped or left out, the run is UNTESTED")
        try:
            commands = c.kind.plan(c.params, inventory)
        except Exception as e:
            commands = ()
            lines.append(f"   (cannot show commands: {e})")
        for cmd in commands:
            lines.append(f"   $ {shlex.join(cmd.argv)}" + (f"   # {cmd.note}" if cmd.note else ""))
        own = pc.own_rules
        hooks = c.kind.hooks
        built_in = [*(hooks.verdicts(c.params, hardware) if hooks.verdicts else ()),
                    *telemetry.verdicts(c.params), *(afterload.verdicts() if c.kind.loads(c.params) else ())]
        if hooks.config_plan is not None:
            lines += hooks.config_plan(c.params, profile.profile.name, profile.profile.config)
        elif not pc.rules and not own and not built_in:
            lines.append("   (no expectations: metrics are recorded only)")
        lines += [f"   verdict: {v}" for v in built_in]
        lines += [f"   {describe_rule(r)}" for r in (*pc.rules, *own)]
        lines.append("")
    return "\n".join(lines)
