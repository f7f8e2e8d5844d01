"""Which runs may be compared: series identity, acceptance suites and the go-live run. Pure.

A series is check id + a digest of the parameters that decide what the check measures (+ metric
and labels). Which parameters those are is decided here, once, for every kind: the ones in
SPAN_PARAMS set how long, how often or how closely a check measures (fio `runtime`, a burn's
`duration`, nccl `iters`, a telemetry period), so a 10-second fio job measures what a 4-second
one does and the acceptance and quarterly suites pair; everything else (block size, queue depth,
engine, dtype, message sizes, the tests run) changes the measurement, so a different block size
is another series that trends, drift and `compare` never pair. A run records its suite's tags
and one parameter digest per check (RunRecord.suite["tags"] and ["params"]).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from harness import catalog

ACCEPTANCE_TAGS = frozenset({"acceptance", "go-live", "golive"})


# Parameters (at any depth: a fio job's `runtime` too) that set how long, how often or how closely
# a check measures, not what: two runs differing only in these measure the same series.
SPAN_PARAMS = frozenset({
    "duration", "runtime", "duration_s", "ramp_time", "warmup", "iters", "iterations", "cooldown",
    "telemetry_period", "window_s", "interval", "settle_s", "timeout"})


def comparable(params: Any) -> Any:
    """`params` without SPAN_PARAMS at any depth: what decides what a check measures."""
    if isinstance(params, Mapping):
        return {k: comparable(v) for k, v in params.items() if k not in SPAN_PARAMS}
    if isinstance(params, (list, tuple)):
        return [comparable(v) for v in params]
    return params


DIGEST_PREFIX = "m1:"  # digests of comparable parameters; older runs' digests counted every parameter


def params_digest(kind: str, params: Mapping[str, Any], repeat: int = 1) -> str:
    """A short digest of a check's kind, comparable parameters and repeat count (canonical JSON)."""
    text = json.dumps({"kind": kind, "params": comparable(params), "repeat": repeat}, sort_keys=True,
                      ensure_ascii=False, default=str)
    return DIGEST_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def older_digest(digest: str) -> bool:
    """A digest recorded before SPAN_PARAMS (it counted durations too): it pairs with nothing new."""
    return bool(digest) and not digest.startswith(DIGEST_PREFIX)


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
