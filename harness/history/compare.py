"""`harness compare RUN_A RUN_B`: every metric side by side, worst regression first. Pure.

Series are matched by check id, the digest of the check's parameters, metric name and labels
(repeats folded by median): a check run with other parameters in B is two one-sided rows, and
`notes` says plainly when the suites or parameters differ. The regression of a series is its
change in the bad direction (`better`, as the check declared it or the catalogue says): a drop
for higher-is-better, a rise for lower-is-better; metrics without a direction rank after every
directed one by the size of their change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.history.drift import VALID, SeriesKey, collapse
from harness.history.identity import identity_of
from harness.history.series import better_of, differences, suite_params
from harness.model import RunRecord
from harness.numfmt import fmt_delta, fmt_value


@dataclass(frozen=True)
class Row:
    """One series in both runs (a side is None when only the other has it)."""

    key: SeriesKey
    unit: str
    better: str
    a: float | None
    b: float | None

    @property
    def delta_pct(self) -> float | None:
        """B's change from A in percent; None when there is no A, A is 0, or the change is not a
        finite number (scaled before it is subtracted: 1e308 to 0 is -100 %, not -inf)."""
        if self.a is None or self.b is None or self.a == 0:
            return None
        d = 100.0 * (self.b - self.a) / abs(self.a)
        if not math.isfinite(d):
            d = 100.0 * (self.b / abs(self.a) - math.copysign(1.0, self.a))
        return d if math.isfinite(d) else None

    @property
    def regression_pct(self) -> float | None:
        """How much worse B is than A in percent (negative: better); None without a direction."""
        d = self.delta_pct
        if d is None or self.better not in ("higher", "lower"):
            return None
        return -d if self.better == "higher" else d

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.key.check, "metric": self.key.metric, "labels": self.key.label_dict,
                "unit": self.unit, "better": self.better, "a": _finite(self.a), "b": _finite(self.b),
                "delta_pct": self.delta_pct, "regression_pct": self.regression_pct}


def _finite(v: float | None) -> float | None:
    """JSON has no infinity or NaN: such a value is null."""
    return v if v is not None and math.isfinite(v) else None


def _series(record: RunRecord, params: dict[str, str]) -> dict[SeriesKey, tuple[float, str]]:
    pairs = [(c.id, m) for c in record.checks if c.status.value in VALID for m in c.metrics]
    # part serials are left out on purpose: comparing runs compares positions (GPU 3 vs GPU 3)
    return collapse(pairs, None, params) if pairs else {}


def _digests(a: RunRecord, b: RunRecord) -> tuple[dict[str, str], dict[str, str]]:
    """Each run's parameter digests, kept only for checks both runs know digests of (a run from
    before digests pairs by check id alone)."""
    pa, pb = suite_params(a.suite), suite_params(b.suite)
    both = set(pa) & set(pb)
    return {c: pa[c] for c in both}, {c: pb[c] for c in both}


def _order(r: Row) -> tuple[int, float, str]:
    reg = r.regression_pct
    if reg is not None:
        return (0, -reg, r.key.text())
    if r.delta_pct is not None:
        return (1, -abs(r.delta_pct), r.key.text())
    return (2, 0.0, r.key.text())


def compare_runs(a: RunRecord, b: RunRecord) -> list[Row]:
    """Rows for every series of either run, largest regression first, one-sided rows last."""
    da, db = _digests(a, b)
    sa, sb = _series(a, da), _series(b, db)
    rows = []
    for key in set(sa) | set(sb):
        va, vb = sa.get(key), sb.get(key)
        unit = (vb or va or (math.nan, ""))[1]
        better = better_of(b.suite if vb is not None else a.suite, key.check, key.metric)
        rows.append(Row(key, unit, better, None if va is None else va[0], None if vb is None else vb[0]))
    return sorted(rows, key=_order)


def notes(a: RunRecord, b: RunRecord) -> list[str]:
    """Why some series of A and B are not paired: the suites or a check's parameters differ."""
    return differences(a.suite, b.suite)


def to_json(a: RunRecord, b: RunRecord, rows: list[Row]) -> dict[str, Any]:
    def side(r: RunRecord) -> Mapping[str, Any]:
        ident = identity_of(r.inventory, r.host)
        return {"run_id": r.run_id, "host": r.host, "system_serial": ident.system_serial,
                "started": r.started, "verdict": r.verdict, "suite": r.suite.get("name")}

    return {"a": side(a), "b": side(b), "notes": notes(a, b), "rows": [r.to_dict() for r in rows]}


def table_rows(rows: list[Row]) -> list[tuple[str, ...]]:
    """Display cells: series, A, B (each with its unit, as the one formatter scales it: 23.5 GiB,
    37.0 ms), delta, better (↑ higher, ↓ lower), and a verdict word."""
    out: list[tuple[str, ...]] = []
    for r in rows:
        reg = r.regression_pct
        if r.a is None or r.b is None:
            word = "only in B" if r.a is None else "only in A"
        elif reg is None:
            word = ""
        else:
            word = "worse" if reg > 0 else ("better" if reg < 0 else "same")
        arrow = {"higher": "↑ higher", "lower": "↓ lower"}.get(r.better, "")
        out.append((r.key.text(), fmt_value(r.a, r.unit, 4), fmt_value(r.b, r.unit, 4),
                    fmt_delta(r.delta_pct), arrow, word))
    return out
