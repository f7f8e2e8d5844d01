"""Which runs may be compared: series identity, acceptance suites and the go-live run. Pure.

A series is suite name + check id + a digest of the check's effective parameters (+ metric and
labels): smoke's 4-second `fio-quick` and quarterly's 10-second one are different series, so
neither trends nor drift nor `compare` pairs them. A run records its suite's tags and one
parameter digest per check (RunRecord.suite["tags"] and ["params"]).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from harness import catalog

ACCEPTANCE_TAGS = frozenset({"acceptance", "go-live", "golive"})


def params_digest(kind: str, params: Mapping[str, Any], repeat: int = 1) -> str:
    """A short digest of a check's kind, effective parameters and repeat count (canonical JSON)."""
    text = json.dumps({"kind": kind, "params": params, "repeat": repeat}, sort_keys=True,
                      ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def is_acceptance(tags: Iterable[str]) -> bool:
    """Whether a suite's tags mark it as an acceptance (go-live) suite."""
    return any(str(t).strip().lower() in ACCEPTANCE_TAGS for t in tags)


def suite_tags(suite: Mapping[str, Any]) -> tuple[str, ...]:
    tags = suite.get("tags") or ()
    return tuple(str(t) for t in tags) if isinstance(tags, (list, tuple)) else ()


def suite_params(suite: Mapping[str, Any]) -> dict[str, str]:
    """check id -> parameter digest as a run recorded it ({} for runs older than digests)."""
    params = suite.get("params")
    return {str(k): str(v) for k, v in params.items()} if isinstance(params, Mapping) else {}


def better_of(suite: Mapping[str, Any], check: str, metric: str) -> str:
    """Which way is better for a metric: what its check declared (a command check's `better:`),
    else the catalogue's; "none" when neither knows."""
    declared = suite.get("declared")
    if isinstance(declared, Mapping):
        mine = declared.get(check)
        if isinstance(mine, Mapping) and str(mine.get(metric, "")) in ("higher", "lower", "none"):
            return str(mine[metric])
    spec = catalog.spec(metric)
    return spec.better if spec else "none"


def is_declared(suite: Mapping[str, Any], check: str, metric: str) -> bool:
    declared = suite.get("declared")
    mine = declared.get(check) if isinstance(declared, Mapping) else None
    return isinstance(mine, Mapping) and metric in mine


class RunLike(Protocol):
    """What go-live selection needs of a stored run."""

    @property
    def run_id(self) -> str: ...
    @property
    def verdict(self) -> str: ...
    @property
    def tags(self) -> tuple[str, ...]: ...


def golive_of(rows: Sequence[RunLike], pinned: str | None = None) -> RunLike | None:
    """The pinned run when it is among `rows`, else the first ACCEPTED run of an acceptance suite."""
    if pinned:
        hit = next((r for r in rows if r.run_id == pinned), None)
        if hit is not None:
            return hit
    return next((r for r in rows if r.verdict == "ACCEPTED" and is_acceptance(r.tags)), None)


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What makes two runs' series differ, in words: suite names, and checks of both whose
    parameters differ (runs from before digests: unknown, not a difference)."""
    out = []
    na, nb = str(a.get("name", "")), str(b.get("name", ""))
    if na != nb:
        out.append(f"suites differ: A ran {na or '?'}, B ran {nb or '?'}")
    pa, pb = suite_params(a), suite_params(b)
    changed = sorted(c for c in set(pa) & set(pb) if pa[c] != pb[c])
    if changed:
        out.append(f"parameters differ for {', '.join(changed)}: those checks are not paired")
    return out
