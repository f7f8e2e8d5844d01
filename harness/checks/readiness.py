"""Readiness: for each check kind, are the tools and Python packages it uses here? (`harness list --tools`)

The knowledge is each kind's `requires`; this module probes every distinct need once (in
parallel: a tool's `--version` may take a moment) and says whether the kind can run here. A kind
is ready when every need it always uses is present and, for each group of alternatives (the
burn engines), at least one is; a need used only in some setting (`use`) does not decide it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from harness.checks.base import CheckKind, Need
from harness.platform.toolprobe import Presence, probe_python, probe_tool


@dataclass(frozen=True)
class NeedState:
    need: Need
    presence: Presence


@dataclass(frozen=True)
class KindReadiness:
    kind: str
    needs: tuple[NeedState, ...]
    ready: bool


def is_ready(states: Iterable[NeedState]) -> bool:
    """Every unconditional need present, and one of each group of alternatives."""
    groups: dict[str, bool] = {}
    for s in states:
        if s.need.group:
            groups[s.need.group] = groups.get(s.need.group, False) or s.presence.found
        elif not s.need.use and not s.presence.found:
            return False
    return all(groups.values())


def _probe(need: Need) -> Presence:
    return probe_python(need.name) if need.python else probe_tool(need.name, need.version_args)


def readiness(kinds: Mapping[str, CheckKind],
              probe: Callable[[Need], Presence] = _probe) -> list[KindReadiness]:
    """Each kind's needs with what was found here, in the registry's order."""
    distinct = {(n.name, n.python, n.version_args): n for k in kinds.values() for n in k.requires}
    with ThreadPoolExecutor(max_workers=8) as pool:
        found = dict(zip(distinct, pool.map(probe, distinct.values()), strict=True))
    out = []
    for name, kind in kinds.items():
        states = tuple(NeedState(n, found[(n.name, n.python, n.version_args)]) for n in kind.requires)
        out.append(KindReadiness(name, states, is_ready(states)))
    return out
