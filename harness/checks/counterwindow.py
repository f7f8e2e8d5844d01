"""The before/after window of the port counter checks (ib_ports, nic_ports).

Counters are read, then read again after a soak window (`window_s`), or compared with the last
reading an earlier check of the same run kept (`since: <check id>`), so a suite can bracket a
whole run: one counter check first, the load checks, the same kind again with `since`. Each
reading is kept as raw/<check>/<name>.json; the window's sleep runs as a tool, so a signal
ends it at once. Pure helpers besides the file and sleep edges.
"""

from __future__ import annotations

import fnmatch
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from pydantic import Field, model_validator

from harness.checks.base import CheckContext, Params, PlannedCommand
from harness.config.numbers import Duration
from harness.errors import HarnessError, ToolError
from harness.fsutil import atomic_write_json

AFTER = "after"
DEFAULT_WINDOW_S = 10.0
Counters = Mapping[str, Mapping[str, int]]  # port or interface -> counter -> value


class WindowParams(Params):
    """The soak window, or the earlier check the deltas are taken against."""

    window_s: Optional[Duration] = Field(
        None, ge=0, le=7 * 24 * 3600,
        description=f"seconds between the two readings (default {DEFAULT_WINDOW_S:g}; 0: back to back)")
    since: Optional[str] = Field(
        None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description="id of an earlier check of the same kind in this suite: deltas since its reading")

    @model_validator(mode="after")
    def _one_window(self) -> WindowParams:
        if self.since is not None and self.window_s is not None:
            raise ValueError("give window_s or since, not both")
        return self

    @property
    def window(self) -> float:
        return 0.0 if self.since is not None else (DEFAULT_WINDOW_S if self.window_s is None
                                                   else self.window_s)


def selected(names: Sequence[str], include: Optional[Sequence[str]], exclude: Sequence[str]) -> bool:
    """True when one of `names` matches an include pattern (or none are given) and none is excluded."""
    def hit(patterns: Sequence[str]) -> bool:
        return any(fnmatch.fnmatchcase(n, p) for n in names for p in patterns)
    return (include is None or hit(include)) and not hit(exclude)


def unmatched(include: Optional[Sequence[str]], names: Sequence[str]) -> list[str]:
    """Include patterns that match none of `names` (a device or interface that is not there)."""
    return [p for p in include or [] if not any(fnmatch.fnmatchcase(n, p) for n in names)]


def keep(ctx: CheckContext, kind: str, name: str, counters: Counters,
         extra: Mapping[str, Any] | None = None) -> None:
    """Write one reading to raw/<check>/<name>.json (the evidence, and the snapshot for `since`)."""
    ctx.raw_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(ctx.raw_dir / f"{name}.json",
                      {"kind": kind, "time": time.time(), "counters": counters, **(extra or {})})


def earlier(ctx: CheckContext, kind: str, check_id: str) -> tuple[dict[str, dict[str, int]], float]:
    """The last reading of check `check_id` (of the same kind) in this run, and its age in seconds."""
    path = ctx.run_dir / "raw" / check_id / f"{AFTER}.json"
    try:
        data = json.loads(path.read_text())
        if data.get("kind") != kind:
            raise HarnessError(f"since: {check_id!r} is a {data.get('kind')} check, not {kind}")
        counters = {k: {c: int(v) for c, v in cs.items()} for k, cs in data["counters"].items()}
        age = max(0.0, time.time() - float(data["time"]))
    except FileNotFoundError:
        raise HarnessError(f"since: {check_id!r} left no counter reading in this run ({path} is missing); "
                           "it must be a check of the same kind that ran earlier in the suite") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise HarnessError(f"since: cannot read {path}: {e}") from e
    return counters, age


def planned_soak(window_s: float) -> list[PlannedCommand]:
    """The soak window's command for --dry-run (none for a window of 0)."""
    return [PlannedCommand(("sleep", f"{window_s:g}"), "soak window")] if window_s > 0 else []


def soak(ctx: CheckContext, window_s: float) -> None:
    """Wait `window_s` seconds as a `sleep` tool run, which the runner can interrupt."""
    if window_s <= 0:
        return
    ctx.progress(f"soak window: {window_s:g} s between the two readings")
    res = ctx.run_tool(["sleep", f"{window_s:g}"], name="soak-window", timeout_s=window_s + 60.0,
                       check_rc=False)
    if res.interrupted or res.rc != 0:
        raise ToolError(f"soak window interrupted after {res.duration_s:.1f} s of {window_s:g} s",
                        argv=res.argv, rc=res.rc)

