"""`harness audit capture`: a known-good node's facts written as a profile with `config:` rules.

Versions and modes are pinned exactly, sizes and limits as minimums (swap as a maximum), each
fact as its catalogue entry says. Facts unknown on this node are listed as comments. The file
is validated by the real loader before it is written, so it always loads.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from harness.config import load_profile
from harness.errors import ConfigError, UsageError
from harness.facts import FACTS, UNLIMITED, Fact
from harness.model import join_labels
from harness.platform import facts as platform_facts
from harness.platform import nvml, proc


def _rule(fact: str, value: Any, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    spec = FACTS[fact]
    rule: dict[str, Any] = {"fact": fact}
    if labels:
        rule["labels"] = dict(labels)
    how = spec.capture
    if how in ("min", "max") and value != UNLIMITED:
        rule[how] = value
    else:
        rule["equals"] = value
    if spec.severity != "fail":
        rule["severity"] = spec.severity
    return rule


def capture_rules(facts: Sequence[Fact]) -> list[dict[str, Any]]:
    """Rules that the given facts pass: one per node fact; per-device facts get one rule when
    every device agrees, else one per device."""
    by_name: dict[str, list[Fact]] = {}
    for f in facts:
        if f.value is not None and FACTS[f.name].capture != "skip":
            by_name.setdefault(f.name, []).append(f)
    out = []
    for name in FACTS:
        known = by_name.get(name, [])
        if not known:
            continue
        values = {repr(f.value) for f in known}
        if len(values) == 1:
            out.append(_rule(name, known[0].value))
        else:
            out += [_rule(name, f.value, f.labels) for f in known]
    return out


def render(name: str, extends: str | None, facts: Sequence[Fact], host: str, when: str) -> str:
    """The profile fragment as YAML text, one flow-style rule per line."""
    rules = capture_rules(facts)
    lines = [f"# Golden config captured by `harness audit capture` on {host} at {when}.",
             "# Every rule below passes on that node; edit freely (severity, min/max, drop rules).",
             f"name: {name}"]
    if extends:
        lines.append(f"extends: {_scalar(extends)}")
    lines += [f"description: {_scalar(f'golden config of {host}, {when}')}", "config:"]
    lines += ["  - " + yaml.safe_dump(r, default_flow_style=True, sort_keys=False, width=10000).strip()
              for r in rules]
    unknown = [f for f in facts if f.value is None]
    if unknown:
        lines.append("# not known on this node, so not pinned:")
        lines += [f"#   {f.name}{_labels(f.labels)}: {f.reason}" for f in unknown]
    return "\n".join(lines) + "\n"


def _scalar(text: str) -> str:
    return yaml.safe_dump(text, default_flow_style=True, width=10000).splitlines()[0]


def _labels(labels: Mapping[str, str]) -> str:
    return join_labels(labels, braces=True)


def capture_to(output: Path, *, name: str | None = None, extends: str | None = None,
               force: bool = False) -> tuple[Path, int]:
    """Collect this node's facts, write the golden profile to `output`; (path, rule count)."""
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
    text = render(name, extends, facts, socket.gethostname(), when)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    try:
        load_profile(tmp)  # the real loader: the fragment must load (and its extends resolve)
    except ConfigError:
        tmp.unlink()
        raise
    os.replace(tmp, output)
    return output, len(capture_rules(facts))
