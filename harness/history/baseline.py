"""`harness baseline capture`: a profile from golden runs, with its provenance.

Per check, metric and label set (the `repeat` label folded in), the reference is the median of the
observed values and the tolerance max(3 x MAD / median, a floor for the metric's family, the
observed range), on the side the check's declared direction or the catalogue calls worse only; it
takes at least MIN_RUNS (3) golden runs, and refuses fewer. A tolerance is capped (CAPS): golden
runs that disagree by more are not baselined, and `warnings` says so with the numbers. Latency tails
(p99, p99.9) are captured as warn-level rules unless asked otherwise. Counts without a direction
(inventory) become exact min/max; error counters a max of what was seen. Because every band written
covers what was observed, the runs a baseline came from never fail it. The file is one
yaml.safe_dump of a dict, read back and compared before it is written, so nothing from tool output
can become a key.
"""

from __future__ import annotations

import math
import os
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from harness import __version__, catalog
from harness.compare.rules import band
from harness.config import validate_paths
from harness.config.kinds import KindSpec
from harness.config.models import Expectation
from harness.errors import HarnessError, UsageError
from harness.fsutil import atomic_write_text
from harness.history.drift import VALID
from harness.history.identity import identity_of
from harness.history.series import better_of, is_declared
from harness.model import Metric, RunRecord, join_labels
from harness.numfmt import fmt_num, fmt_value
from harness.units import BYTES, CELSIUS, COUNT, GBPS, IOPS, JOULE, MHZ, PERCENT, SECONDS, TFLOPS, US, WATT

FLOORS = {GBPS: 0.05, IOPS: 0.05, TFLOPS: 0.05, MHZ: 0.05, US: 0.10, SECONDS: 0.10, CELSIUS: 0.10,
          WATT: 0.10, PERCENT: 0.10, JOULE: 0.10, BYTES: 0.01}
DEFAULT_FLOOR = 0.10
METRIC_FLOORS = {"fio.clat_p99": 0.25, "fio.clat_p999": 0.5}  # latency tails scatter more
# the widest tolerance written: at most half the reference lost, at most 2x (tails 3x) gained
CAPS = {"higher": 0.5, "lower": 1.0}
TAIL_CAP = 2.0
STEP = 1e-4  # tolerances are written rounded up to this
# golden runs a baseline needs at least: with 2, a bad run moves the median halfway and two equal
# values give a MAD of 0 (the tolerance then rests on the floor alone); the median of 3 outvotes one
MIN_RUNS = 3


def is_tail(metric: str) -> bool:
    """A latency tail (p99 and beyond): noisy by nature, captured as a warning unless asked."""
    last = metric.rsplit(".", 1)[-1]
    return any(t in last for t in ("p99", "p999", "p9999", "max_lat", "lat_max"))


def _comment(text: str) -> str:
    """One comment line's text: newlines and other control characters escaped, never a line break."""
    return "".join(ch.encode("unicode_escape").decode() if ch < " " or ch in _BREAKS else ch for ch in text)


_BREAKS = "\x7f\x85\u2028\u2029"  # what YAML (or an editor) may also read as a line break


@dataclass(frozen=True)
class Baseline:
    """A captured profile: the document, its comment header, what was left out and why, and
    warnings for the operator (golden runs that disagree, with their numbers)."""

    doc: dict[str, Any]
    header: str
    skipped: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    def text(self) -> str:
        """The YAML file: comment header, then the whole profile as one yaml.safe_dump."""
        doc = {**self.doc, "expectations": [_tidy(e) for e in self.doc["expectations"]]}
        body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=110, allow_unicode=True)
        if yaml.safe_load(body) != doc:  # pragma: no cover - a serializer bug, never written
            raise HarnessError("the captured profile does not read back as written (a bug)")
        return self.header + body


def _tidy(e: dict[str, Any]) -> dict[str, Any]:
    """Whole numbers written without a trailing .0."""
    return {k: int(v) if isinstance(v, float) and v.is_integer() and abs(v) < 2**53 else v
            for k, v in e.items()}


def _labels_key(m: Metric) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in m.labels.items() if k != "repeat"))


def _round_sig(x: float, digits: int = 5) -> float:
    return float(f"{x:.{digits}g}")


def _ceil_step(x: float) -> float:
    return math.ceil(x / STEP - 1e-9) * STEP


def _covering(base: dict[str, Any], side: str, need: float, values: Sequence[float]) -> dict[str, Any]:
    """`base` with tolerance `side` at least `need`, widened until every value is inside the band."""
    tol = _ceil_step(max(need, 0.0))
    for _ in range(100):
        e = {**base, side: round(tol, 6)}
        low, high = band(Expectation.model_validate({**e, side: tolerance(e[side])}))
        if all((low is None or v >= low) and (high is None or v <= high) for v in values):
            return e
        tol = tol * (1 + 1e-9) + STEP  # relative too: a step of 1e-4 vanishes beside a huge ratio
    raise HarnessError(f"cannot fit a band around {base['metric']} values")  # pragma: no cover


def expectation_for(check: str, metric: str, labels: dict[str, Any], unit: str, own: Sequence[float],
                    scope: Sequence[float], runs: int, better: str | None = None,
                    tails: str = "warn") -> tuple[dict[str, Any] | None, str]:
    """One expectation from the group's own values (reference) and all it selects (band); or why not.
    `better` is the direction the check declared (a command metric), else the catalogue's;
    `tails` the severity of latency-tail rules. A why starting with "disagree" is a warning."""
    spec = catalog.spec(metric)
    if better is None:
        if spec is None:
            return None, "not in the metric catalogue and no direction declared by its check"
        better = spec.better
    base: dict[str, Any] = {"metric": metric, "check": check}
    if labels:
        base["labels"] = labels
    m = statistics.median(own)
    mad = statistics.median(abs(v - m) for v in own)
    note = f"baseline: median of {len(own)} value(s) from {runs} run(s), MAD {fmt_num(mad, 4, trim=True)}"
    lo, hi = min(scope), max(scope)
    if better == "none":
        if unit != COUNT:
            return None, "no better direction (workload-dependent): not judged"
        return {**base, "min": lo, "max": hi, "unit": unit, "note": "baseline: exact inventory count"}, ""
    if is_tail(metric) and tails == "warn":
        base["severity"] = "warn"
        note += "; a latency tail: warns (capture with --tails fail to fail)"
    higher = better == "higher"
    if unit == COUNT or m <= 0:
        bound = {"min": lo} if higher else {"max": hi}
        return {**base, **bound, "unit": unit, "note": note}, ""
    ref = _round_sig(m)
    floor = METRIC_FLOORS.get(metric, FLOORS.get(unit, DEFAULT_FLOOR))
    spread = 3 * mad / abs(ref)
    if higher:
        need = max(spread, floor, (ref - lo) / abs(ref))
        side = "lower"
    else:
        need = max(spread, floor, (hi - ref) / abs(ref))
        side = "upper"
    cap = TAIL_CAP if is_tail(metric) and not higher else CAPS["higher" if higher else "lower"]
    if not math.isfinite(need) or need > cap:
        return None, (f"disagree: the golden runs' values span {_val(lo, unit)} to {_val(hi, unit)} "
                      f"around a median of {_val(ref, unit)} (needs a tolerance of {_pct(need)}, more "
                      f"than the cap of "
                      f"{_pct(cap)}); rerun the golden runs or write this rule by hand")
    e = _covering({**base, "reference": ref, "unit": unit, "note": note}, side, need, scope)
    if e[side] > cap:  # covering every value took more than the cap
        return None, (f"disagree: the golden runs' values span {_val(lo, unit)} to {_val(hi, unit)}, "
                      f"more than the cap of {_pct(cap)} around {_val(ref, unit)}")
    keep = ("metric", "check", "labels", "reference", side, "unit", "severity", "note")
    return {**{k: e[k] for k in keep if k in e}, side: tolerance(e[side])}, ""


def tolerance(x: float) -> float | str:
    """A tolerance as a profile writes it: a fraction up to 1, a percent above (the loader refuses a
    bare fraction above 1, the classic `lower: 15` meant as 15%)."""
    return x if x <= 1 else f"{round(100 * x, 4):g}%"


def _num(x: float) -> str:
    return fmt_num(x, 6, trim=True)


def _val(x: float, unit: str) -> str:
    return fmt_value(x, unit, 6, trim=True)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%" if math.isfinite(x) else "infinite"


def capture(records: Sequence[RunRecord], name: str, extends: str | None = None,
            now: datetime | None = None, tails: str = "warn") -> Baseline:
    """The baseline profile of accepted runs (UsageError for a run that was not accepted);
    `tails` ("warn" or "fail") is the severity of latency-tail rules."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
        raise UsageError(f"profile name {name!r}: letters, digits, '_', '.' and '-' only (at most 64)")
    if not records:
        raise UsageError("baseline capture needs at least one run directory")
    for r in records:
        if r.verdict != "ACCEPTED":
            raise UsageError(f"run {r.run_id} is {r.verdict}: a baseline is captured from accepted runs only")
    if len(records) < MIN_RUNS:
        raise UsageError(f"a baseline needs at least {MIN_RUNS} golden runs, got {len(records)}: the median "
                         f"of {MIN_RUNS} outvotes one bad run and their MAD measures the spread; of fewer, "
                         "one run sets the reference and a spread of 0 the tolerance")
    per_run: list[list[tuple[str, Metric]]] = [
        [(c.id, m) for c in r.checks if c.status.value in VALID for m in c.metrics if math.isfinite(m.value)]
        for r in records]
    groups: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[tuple[int, Metric]]] = {}
    for i, items in enumerate(per_run):
        for check, m in items:
            groups.setdefault((check, m.name, _labels_key(m)), []).append((i, m))
    expectations: list[dict[str, Any]] = []
    skipped: list[str] = []
    warnings: list[str] = []
    for (check, metric, lkey), members in sorted(groups.items()):
        text = f"{check}/{metric}" + join_labels(lkey, braces=True)
        seen_in = {i for i, _ in members}
        if len(seen_in) < len(records):
            skipped.append(f"{text}: measured in {len(seen_in)} of {len(records)} runs")
            continue
        first = members[0][1]
        labels = {k: v for k, v in first.labels.items() if k != "repeat"}
        units = {m.unit for _, m in members}
        if len(units) > 1:
            skipped.append(f"{text}: units differ between runs ({', '.join(sorted(units))})")
            continue
        scope = [m.value for items in per_run for c, m in items
                 if c == check and m.name == metric and m.matches(labels)]
        declared = [better_of(r.suite, check, metric) for r in records if is_declared(r.suite, check, metric)]
        exp, why = expectation_for(check, metric, labels, first.unit, [m.value for _, m in members],
                                   scope, len(records), declared[-1] if declared else None, tails)
        if exp is None:
            skipped.append(f"{text}: {why}")
            if why.startswith("disagree"):
                warnings.append(f"{text}: not baselined: {why[len('disagree: '):]}")
        else:
            expectations.append(exp)
    base = _assemble(records, name, extends, expectations, skipped, now or datetime.now(timezone.utc))
    return replace(base, warnings=tuple(warnings))


def _assemble(records: Sequence[RunRecord], name: str, extends: str | None,
              expectations: list[dict[str, Any]], skipped: list[str], now: datetime) -> Baseline:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    idents = [identity_of(r.inventory, r.host) for r in records]
    nodes = sorted({f"{i.hostname} (system serial {i.system_serial or 'unknown'})" for i in idents})
    n_nodes = len({i.hostname for i in idents})
    doc: dict[str, Any] = {"name": name, "description": f"Baseline from {len(records)} golden run(s) of "
                                                        f"{n_nodes} node(s), captured {stamp[:10]}"}
    if extends:
        doc["extends"] = extends
    doc["sources"] = [f"harness baseline capture {stamp}: {len(records)} run(s) "
                      f"({', '.join(r.run_id for r in records)}) of {'; '.join(nodes)}"]
    gpu_names = {g.name for i in idents for g in i.gpus}
    if not extends and gpu_names and len({len(i.gpus) for i in idents}) == 1:
        doc["hardware"] = {"gpu": {"models": sorted(gpu_names), "count": len(idents[0].gpus)}}
    doc["expectations"] = expectations
    lines = [f"Baseline profile {name!r}, captured {stamp} by harness {__version__}",
             f"from {len(records)} accepted run(s): " + ", ".join(r.run_id for r in records),
             "nodes: " + "; ".join(nodes)]
    for i in sorted({(x.hostname, x.system_serial): x for x in idents}.values(), key=lambda x: x.hostname):
        if i.gpu_idents:
            lines.append(f"  {i.hostname} GPU serials: {', '.join(sorted(i.gpu_idents))}")
        if i.nvme_serials:
            lines.append(f"  {i.hostname} NVMe serials: {', '.join(i.nvme_serials)}")
    software = sorted({f"{k} {v}" for i in idents for k, v in i.software.items()})
    if software:
        lines.append("software: " + "; ".join(software))
    lines += ["reference = median; tolerance = max(3 x MAD / median, family floor, observed range),",
              "on the worse side only (catalogue direction); counts without a direction are exact."]
    if skipped:
        lines.append(f"not baselined ({len(skipped)}):")
        lines += [f"  {s}" for s in skipped]
    header = "".join(f"# {_comment(line)}".rstrip() + "\n" for line in lines)
    return Baseline(doc, header, tuple(skipped))


def extends_value(extends: str, output: Path) -> str:
    """A profile name as given; an existing file as a path relative to the output's folder."""
    p = Path(extends)
    if p.is_file():
        return os.path.relpath(p.resolve(), output.resolve().parent)
    return extends


def write(baseline: Baseline, output: Path, kinds: Mapping[str, KindSpec], force: bool = False) -> None:
    """Write the profile after loading it back through the loader beside its destination, with the
    check kinds the caller hands over (harness.checks.registry.kinds())."""
    if output.exists() and not force:
        raise UsageError(f"{output} exists; pass --force to replace it")
    trial = output.with_name(f".{output.stem}.capture.yaml")
    atomic_write_text(trial, baseline.text())
    try:
        problems = validate_paths([trial], kinds)
        if problems:
            raise HarnessError("the captured profile did not validate (a bug): "
                               + "; ".join(str(p) for p in problems[:5]))
        os.replace(trial, output)
    finally:
        trial.unlink(missing_ok=True)
