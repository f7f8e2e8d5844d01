"""`harness audit capture`: a known-good node's facts written as a profile with `config:` rules.

Versions and modes are pinned exactly, sizes and limits as minimums (swap as a maximum), each
fact as its catalogue entry says. Facts that scale with the node (shm, the process limit, cgroup
memory) are written as portable minimums: 90% of this node's value rounded down (to a GiB, or
to two significant digits), which any healthy node of the SKU meets. A capture never writes a
known-bad state as golden (clock not synchronised, no time daemon, irqbalance off) and never
weakens the parent profile's rule: a fact this node fails in the parent is reported, not
pinned; a fact it passes is pinned at least as strictly, at the parent's severity when that is
`fail`. Facts unknown on this node are listed as comments. The file is one yaml.safe_dump and
is validated by the real loader before it is written, so it always loads.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from harness.audit.judge import judge_rule
from harness.config import load_profile
from harness.config.factrule import FactRule
from harness.errors import UsageError
from harness.facts import FACTS, UNLIMITED, Fact
from harness.fsutil import atomic_write_text
from harness.model import join_labels
from harness.platform import facts as platform_facts
from harness.platform import nvml, proc

# facts whose value scales with the node's memory: pinned as a portable minimum
SCALING = frozenset({"host.shm_bytes", "host.nproc", "host.cgroup_memory_limit"})
PORTABLE_SHARE = 0.9
GIB = 1024**3
# states that are never golden, whatever the node says: (fact, bad value, why)
KNOWN_BAD = {("host.clock_synced", False): "the clock is not synchronised",
             ("host.time_sync_daemon", "none"): "no time-sync daemon runs",
             ("host.irqbalance", False): "irqbalance is not running"}


def portable(value: int | float, unit: str | None) -> int:
    """90% of a node-scaled value, rounded down: to a GiB for sizes of a GiB or more, else to two
    significant digits (96363 -> 86000)."""
    v = float(value) * PORTABLE_SHARE
    if unit == "B" and v >= GIB:
        return int(v // GIB) * GIB
    if v < 100:
        return int(v)
    step = 10 ** (len(str(int(v))) - 2)
    return int(v // step) * step


def _rule(fact: str, value: Any, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    spec = FACTS[fact]
    rule: dict[str, Any] = {"fact": fact}
    if labels:
        rule["labels"] = dict(labels)
    how = spec.capture
    if how in ("min", "max") and value != UNLIMITED:
        scaled = how == "min" and fact in SCALING and isinstance(value, (int, float)) \
            and not isinstance(value, bool)
        rule[how] = portable(value, spec.unit) if scaled else value
        if scaled:
            rule["note"] = (f"portable: {int(PORTABLE_SHARE * 100)}% of {value} on the captured node, "
                            "rounded down")
    else:
        rule["equals"] = value
    if spec.severity != "fail":
        rule["severity"] = spec.severity
    return rule


def capture_rules(facts: Sequence[Fact]) -> list[dict[str, Any]]:
    """Rules that the given facts pass: one per node fact; per-device facts get one rule when
    every device agrees, else one per device (no parent profile; see capture_plan)."""
    return capture_plan(facts)[0]


def capture_plan(facts: Sequence[Fact], parent: Sequence[FactRule] = ()
                 ) -> tuple[list[dict[str, Any]], list[str]]:
    """(rules, refused): rules the facts pass that never weaken `parent`'s, and why each fact
    that is a known-bad state or fails the parent was not pinned."""
    by_name: dict[str, list[Fact]] = {}
    for f in facts:
        if f.value is not None and FACTS[f.name].capture != "skip":
            by_name.setdefault(f.name, []).append(f)
    out: list[dict[str, Any]] = []
    refused: list[str] = []
    for name in FACTS:
        known = by_name.get(name, [])
        if not known:
            continue
        bad = [KNOWN_BAD[(name, f.value)] for f in known if (name, f.value) in KNOWN_BAD]
        theirs = [r for r in parent if r.fact == name]
        failed = [o for r in theirs for o in judge_rule(r, "parent", known) if o.outcome in ("fail", "warn")]
        if bad:
            refused.append(f"{name} = {known[0].value!r}: {bad[0]}; fix the node, not the profile")
            continue
        if failed:
            refused.append(f"{name}: this node fails the parent's rule ({failed[0].message}); "
                           "the parent's rule is kept")
            continue
        values = {repr(f.value) for f in known}
        mine = [_rule(name, known[0].value)] if len(values) == 1 else \
            [_rule(name, f.value, f.labels) for f in known]
        out += [_no_weaker(r, theirs) for r in mine]
    return out, refused


def _no_weaker(rule: dict[str, Any], parent: Sequence[FactRule]) -> dict[str, Any]:
    """`rule` with bounds no looser and a severity no milder than the parent's rules on its fact."""
    out = dict(rule)
    for p in parent:
        if p.severity == "fail":
            out.pop("severity", None)
        for side, tighter in (("min", max), ("max", min)):
            theirs = getattr(p, side)
            if side in out and isinstance(theirs, (int, float)) and isinstance(out[side], (int, float)):
                out[side] = tighter(out[side], theirs)
    return out


def render(name: str, extends: str | None, facts: Sequence[Fact], host: str, when: str,
           parent: Sequence[FactRule] = ()) -> str:
    """The profile as YAML text: a comment header, then one yaml.safe_dump of the document."""
    rules, refused = capture_plan(facts, parent)
    doc: dict[str, Any] = {"name": name}
    if extends:
        doc["extends"] = extends
    doc["description"] = f"golden config of {host}, {when}"
    doc["config"] = rules
    head = [f"Golden config captured by `harness audit capture` on {host} at {when}.",
            "Every rule below passes on that node; sizes that scale with memory are portable minimums."]
    if refused:
        head.append("not pinned, a known-bad state or failing the parent profile (fix the node):")
        head += [f"  {why}" for why in refused]
    tail = [f"  {f.name}{_labels(f.labels)}: {f.reason}" for f in facts if f.value is None]
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=110, allow_unicode=True)
    out = "".join(f"# {_comment(line)}\n" for line in head) + body
    if tail:
        out += "".join(f"# {_comment(line)}\n" for line in ["not known on this node, so not pinned:", *tail])
    return out


def _comment(text: str) -> str:
    return "".join(ch.encode("unicode_escape").decode() if ch < " " or ch in "\x7f\x85\u2028\u2029" else ch
                   for ch in text)


def _labels(labels: Mapping[str, str]) -> str:
    return join_labels(labels, braces=True)


def capture_to(output: Path, *, name: str | None = None, extends: str | None = None,
               force: bool = False) -> tuple[Path, int, list[str]]:
    """Collect this node's facts, write the golden profile to `output`; (path, rule count, what
    was not pinned because it is a known-bad state or fails the parent)."""
    if output.exists() and not force:
        raise UsageError(f"{output} exists; give --force to replace it")
    name = name or output.stem
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
        raise UsageError(f"{name!r} is not a valid profile name: give --name with letters, digits, "
                         "'_', '.' or '-'")
    gpus = nvml.gpu_inventory()
    inventory = {"nvml": {"available": gpus.get("available"), "reason": gpus.get("reason", "")},
                 "gpus": gpus.get("gpus", []),
                 "software": {"nvidia_driver": gpus.get("driver"), "cuda_driver": gpus.get("cuda_driver")}}
    facts = platform_facts.collect(lambda argv: proc.capture_rc(argv, 30.0), inventory=inventory)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    parent = load_profile(extends).profile.config if extends else []
    text = render(name, extends, facts, socket.gethostname(), when, parent)
    # a new temporary file beside it (O_EXCL|O_NOFOLLOW), loaded by the real loader (the fragment
    # must load and its extends resolve) before it replaces `output`
    atomic_write_text(output, text, before=load_profile)
    rules, refused = capture_plan(facts, parent)
    return output, len(rules), refused
