"""Drain rejected nodes and resume only what the harness drained (the NHC rule).

A drain reason always starts with "harness:", so `resume` can tell the harness's drains from an
operator's: a node drained for any other reason is never resumed. Every action is appended to
DIR/drain.json.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.fleet import dispatch
from harness.fleet.collect import DRAIN_PREFIX, NodeOutcome
from harness.fleet.slurmtext import NodeInfo
from harness.fsutil import atomic_write_json
from harness.platform import slurm

LOG = "drain.json"


@dataclass(frozen=True)
class Action:
    """One drain or resume the harness did, or decided not to do."""

    node: str
    action: str  # drain | resume | keep
    reason: str  # the drain reason set, or why a node was kept as it is
    done: bool  # the scontrol call succeeded (False for keep, or on error)
    message: str = ""  # scontrol's error, when it failed
    at: str = ""


def resume_plan(nodes: Mapping[str, NodeInfo], wanted: Sequence[str]) -> list[tuple[str, str, str]]:
    """(node, 'resume' | 'keep', why) for each wanted node (pure)."""
    out = []
    for name in wanted:
        info = nodes.get(name)
        if info is None:
            out.append((name, "keep", "not known to Slurm"))
        elif not info.drained:
            out.append((name, "keep", f"not drained ({info.state})"))
        elif not info.reason.startswith(DRAIN_PREFIX):
            out.append((name, "keep", f"drained by someone else: {info.reason or 'no reason given'}"))
        else:
            out.append((name, "resume", info.reason))
    return out


def _scontrol_update(node: str, *fields: str) -> tuple[bool, str]:
    rc, out, err = slurm.call(["scontrol", "update", f"nodename={node}", *fields], check=False)
    return rc == 0, (err or out).strip()


def _log(fleet_dir: Path, actions: Iterable[Action]) -> None:
    path = fleet_dir / LOG
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = []
    atomic_write_json(path, [*(old if isinstance(old, list) else []), *(asdict(a) for a in actions)])


def drain(fleet_dir: Path, rejected: Sequence[NodeOutcome]) -> list[Action]:
    """`scontrol update nodename=X state=drain reason="harness: <check> <reason>"` per rejected node."""
    actions = []
    for n in rejected:
        reason = n.drain_reason
        if not reason:
            continue
        ok, msg = _scontrol_update(n.node, "state=drain", f"reason={reason}")
        actions.append(Action(n.node, "drain", reason, ok, "" if ok else msg, dispatch.utcnow()))
    _log(fleet_dir, actions)
    return actions


def resume(fleet_dir: Path, nodes: Sequence[str]) -> list[Action]:
    """Resume those of `nodes` the harness drained; keep every other node as it is."""
    states = dispatch.node_states(nodes)
    actions = []
    for node, what, why in resume_plan(states, nodes):
        if what == "resume":
            ok, msg = _scontrol_update(node, "state=resume")
            actions.append(Action(node, "resume", why, ok, "" if ok else msg, dispatch.utcnow()))
        else:
            actions.append(Action(node, "keep", why, False, "", dispatch.utcnow()))
    _log(fleet_dir, actions)
    return actions
