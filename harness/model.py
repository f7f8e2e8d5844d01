"""The typed result model: metrics, evaluations, check results and the run record.

Frozen dataclasses, serialised to plain JSON by to_dict/from_dict. No structure is
hidden in metric names: every metric has a unit and labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional, Protocol, Union

FORMAT_VERSION = 1

LabelValue = Union[str, int]


class Status(str, Enum):
    """Outcome of a whole check."""

    PASSED = "passed"
    RECORDED = "recorded"  # measured validly, but no rule judged it: not a pass
    WARNED = "warned"
    FAILED = "failed"  # hardware measured badly
    ERRORED = "errored"  # tool or environment failed: never a hardware verdict
    SKIPPED = "skipped"
    NOT_RUN = "not_run"


# Statuses whose metrics are valid measurements (history stores them, fleets compare them).
MEASURED = (Status.PASSED, Status.RECORDED, Status.WARNED, Status.FAILED)
# Statuses that are a judgement of the hardware: a run needs one before it can be ACCEPTED.
JUDGED = (Status.PASSED, Status.WARNED, Status.FAILED)
# The source of every evaluation of the drift check that history adds to a run ("drift: <rule's file>").
DRIFT_SOURCE = "drift: "

# The run's verdict, worst first. Only hardware that measured badly rejects; a tool or environment
# failure leaves the node unjudged (ERRORED), never a hardware verdict; a run that finished but
# judged nothing, or skipped or left out (--only/--skip) a check that is expected, is UNTESTED: a
# verdict needs a measurement, and a deliberately partial run says so in its verdict.
VERDICTS = ("REJECTED", "ERRORED", "INCOMPLETE", "UNTESTED", "ACCEPTED")
# Exit status per verdict, for CI. 2 is invalid input; 128+N an interrupting signal.
EXIT_CODES = {"ACCEPTED": 0, "REJECTED": 1, "ERRORED": 3, "INCOMPLETE": 3, "UNTESTED": 4}


def verdict_of(failed: int, errored: int, unfinished: bool, *, untested: bool) -> str:
    """The worst that applies: REJECTED (a check failed), ERRORED (one errored), INCOMPLETE (the run
    did not finish), UNTESTED (nothing was judged, or an expected check was skipped), else ACCEPTED."""
    if failed:
        return "REJECTED"
    if errored:
        return "ERRORED"
    if unfinished:
        return "INCOMPLETE"
    return "UNTESTED" if untested else "ACCEPTED"


class Outcome(str, Enum):
    """Outcome of one expectation against measured metrics."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    XFAIL = "xfail"  # failed, but a known issue
    XPASS = "xpass"  # marked known issue, yet passed
    ERROR = "error"  # metric missing or unusable


def join_labels(labels: Mapping[str, Any] | Iterable[tuple[str, Any]], braces: bool = False) -> str:
    """Labels as 'k=v,k=v' in the order given (with `braces`: '{k=v,k=v}', or '' when none)."""
    text = ",".join(f"{k}={v}" for k, v in (labels.items() if isinstance(labels, Mapping) else labels))
    return ("{" + text + "}" if text else "") if braces else text


@dataclass(frozen=True)
class Metric:
    """One measured number with its unit and labels."""

    name: str
    value: float
    unit: str
    labels: Mapping[str, LabelValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", dict(sorted(self.labels.items())))

    def matches(self, selector: Mapping[str, LabelValue]) -> bool:
        """True when every selector label is present with an equal value (compared as text)."""
        return all(k in self.labels and str(self.labels[k]) == str(v) for k, v in selector.items())

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "labels": dict(self.labels)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Metric:
        value = number(d["value"], "value")
        if value is None:
            raise TypeError("value null is not a number")
        return cls(d["name"], value, d["unit"], dict(d.get("labels", {})))


def number(v: Any, name: str) -> float | None:
    """A recorded number as a float (None stays None); TypeError for text: "NaN" or "1e3" in a
    record is not a number, though float() would read it."""
    if v is None:
        return None
    if isinstance(v, (str, bytes, bool)):
        raise TypeError(f"{name} {v!r} is not a number")
    return float(v)


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """One expectation judged against the metric(s) it selected. Built by keyword, and only by the
    judge (harness.compare); a kind reports a Finding instead."""

    metric: str
    labels: Mapping[str, LabelValue]
    outcome: Outcome
    severity: str
    measured: float | None
    unit: str
    reference: float | None
    low: float | None
    high: float | None
    reduce: str
    message: str
    xfail: str | None = None
    source: str = ""  # where the expectation came from: profile name or suite

    @property
    def delta_pct(self) -> float | None:
        if self.measured is None or not self.reference:
            return None
        return 100.0 * (self.measured - self.reference) / abs(self.reference)

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric, "labels": dict(self.labels), "outcome": self.outcome.value,
            "severity": self.severity, "measured": self.measured, "unit": self.unit,
            "reference": self.reference, "low": self.low, "high": self.high,
            "delta_pct": self.delta_pct, "reduce": self.reduce, "message": self.message,
            "xfail": self.xfail, "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Evaluation:
        return cls(
            metric=d["metric"], labels=dict(d.get("labels", {})), outcome=Outcome(d["outcome"]),
            severity=d["severity"], measured=number(d.get("measured"), "measured"), unit=d["unit"],
            reference=number(d.get("reference"), "reference"), low=number(d.get("low"), "low"),
            high=number(d.get("high"), "high"),
            reduce=d.get("reduce", "each"), message=d.get("message", ""), xfail=d.get("xfail"),
            source=d.get("source", ""),
        )


# What a Finding may conclude: XFAIL/XPASS belong to rules marked as known issues.
FINDING_OUTCOMES = frozenset({Outcome.PASS, Outcome.WARN, Outcome.FAIL, Outcome.ERROR})


@dataclass(frozen=True, kw_only=True)
class Finding:
    """A verdict a kind reached itself that no rule can state (a FAULTY GPU, a GPU that stopped
    answering, a PSU lost under load, a config fact that differs), as data: compare.judge turns
    it into an Evaluation, with the same checks as every rule's (finite numbers, labels)."""

    metric: str
    outcome: Outcome  # one of FINDING_OUTCOMES
    message: str
    labels: Mapping[str, LabelValue] = field(default_factory=dict)
    severity: str = "fail"  # "fail" | "warn": how bad a miss is (a WARN finding says "warn")
    measured: float | None = None
    unit: str = "count"
    reference: float | None = None
    low: float | None = None
    high: float | None = None
    reduce: str = "each"
    source: str = ""

    def __post_init__(self) -> None:
        if self.outcome not in FINDING_OUTCOMES:
            raise ValueError(f"a finding cannot be {self.outcome.value}: xfail/xpass come from rules")


@dataclass(frozen=True)
class ToolRun:
    """One subprocess the check ran; output lives in files under the run directory."""

    argv: tuple[str, ...]
    rc: int | None
    duration_s: float
    stdout_file: str  # relative to the run directory
    stderr_file: str
    timed_out: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"argv": list(self.argv), "rc": self.rc, "duration_s": round(self.duration_s, 3),
                "stdout_file": self.stdout_file, "stderr_file": self.stderr_file,
                "timed_out": self.timed_out}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ToolRun:
        return cls(tuple(d["argv"]), d.get("rc"), float(d.get("duration_s", 0.0)),
                   d["stdout_file"], d["stderr_file"], bool(d.get("timed_out", False)))


@dataclass(frozen=True)
class CheckResult:
    """Everything one check produced: status, metrics, evaluations, tool runs."""

    id: str
    kind: str
    status: Status
    message: str = ""  # error / skip / not-run reason, or a one-line summary
    started: str = ""  # ISO 8601 UTC
    duration_s: float = 0.0
    metrics: tuple[Metric, ...] = ()
    evaluations: tuple[Evaluation, ...] = ()
    problems: tuple[str, ...] = ()  # why the tool run was not valid
    tool_runs: tuple[ToolRun, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    # on a skipped check the profile expects: which rule of the profile wanted a measurement
    expected_by: str = ""

    @property
    def expected_skip(self) -> bool:
        """Skipped, though the profile expects a measurement from it: the run is UNTESTED."""
        return self.status is Status.SKIPPED and bool(self.expected_by)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "kind": self.kind, "status": self.status.value, "message": self.message,
            "started": self.started, "duration_s": round(self.duration_s, 3),
            "metrics": [m.to_dict() for m in self.metrics],
            "evaluations": [e.to_dict() for e in self.evaluations],
            "problems": list(self.problems), "tool_runs": [t.to_dict() for t in self.tool_runs],
            "details": dict(self.details), "expected_by": self.expected_by,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CheckResult:
        return cls(
            id=d["id"], kind=d["kind"], status=Status(d["status"]), message=d.get("message", ""),
            started=d.get("started", ""), duration_s=float(d.get("duration_s", 0.0)),
            metrics=tuple(Metric.from_dict(m) for m in d.get("metrics", [])),
            evaluations=tuple(Evaluation.from_dict(e) for e in d.get("evaluations", [])),
            problems=tuple(d.get("problems", [])),
            tool_runs=tuple(ToolRun.from_dict(t) for t in d.get("tool_runs", [])),
            details=dict(d.get("details", {})), expected_by=str(d.get("expected_by") or ""),
        )


@dataclass(frozen=True)
class LeftOut:
    """A check of the suite that an option (--only, --skip, ...) left out of this run. When
    `expected_by` says who expects it (the profile, or an acceptance suite whose every check
    gates go-live), the run is UNTESTED, as when such a check is skipped."""

    id: str
    kind: str
    option: str  # the option that left it out: "--only", "--skip"
    expected_by: str = ""

    @property
    def text(self) -> str:
        """'gpu-burn left out by --skip, but profile P expects it: RULE' (or '(nothing expects it)')."""
        why = f", but {self.expected_by}" if self.expected_by else " (nothing expects it)"
        return f"{self.id} left out by {self.option}{why}"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "option": self.option, "expected_by": self.expected_by}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LeftOut:
        return cls(str(d["id"]), str(d.get("kind", "")), str(d["option"]), str(d.get("expected_by") or ""))


@dataclass(frozen=True)
class RunRecord:
    """A whole run: identity, suite, profile, checks and the verdict."""

    run_id: str
    host: str
    suite: Mapping[str, Any]  # name, path, description
    profile: Mapping[str, Any]  # name, path, reason it was chosen
    started: str
    finished: str
    duration_s: float
    inventory: Mapping[str, Any]
    checks: tuple[CheckResult, ...]
    harness_version: str
    argv: tuple[str, ...] = ()
    interrupted: bool = False
    format_version: int = FORMAT_VERSION
    history: Mapping[str, Any] = field(default_factory=dict)  # node, trends, changes (harness.history.record)
    resumed: tuple[str, ...] = ()  # UTC times `harness run --resume` continued this run
    left_out: tuple[LeftOut, ...] = ()  # checks of the suite an option left out, in suite order

    @property
    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Status}
        for c in self.checks:
            out[c.status.value] += 1
        return out

    @property
    def untested(self) -> tuple[str, ...]:
        """Why the run cannot be accepted although nothing failed or errored: () when it judged
        something, and skipped or left out no check that is expected."""
        out = [f"{c.id} skipped ({c.message or 'no reason given'}), but {c.expected_by}"
               for c in self.checks if c.expected_skip]
        out += [lo.text for lo in self.left_out if lo.expected_by]
        if not any(c.status in JUDGED for c in self.checks):
            c = self.counts
            what = ", ".join(f"{c[s.value]} {s.value.replace('_', ' ')}" for s in
                             (Status.RECORDED, Status.SKIPPED, Status.NOT_RUN) if c[s.value])
            out.insert(0, "no check judged anything" + (f" ({what})" if what else ": no checks"))
        return tuple(out)

    @property
    def verdict(self) -> str:
        """See verdict_of: a failed check rejects, an errored one leaves the node unjudged, and a
        run that judged nothing (or skipped or left out an expected check) is UNTESTED."""
        c = self.counts
        return verdict_of(c["failed"], c["errored"], self.interrupted or bool(c["not_run"]),
                          untested=bool(self.untested))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": self.format_version, "run_id": self.run_id, "host": self.host,
            "verdict": self.verdict, "counts": self.counts, "suite": dict(self.suite),
            "profile": dict(self.profile), "started": self.started, "finished": self.finished,
            "duration_s": round(self.duration_s, 3), "interrupted": self.interrupted,
            "harness_version": self.harness_version, "argv": list(self.argv),
            "inventory": dict(self.inventory), "checks": [c.to_dict() for c in self.checks],
            "history": dict(self.history), "resumed": list(self.resumed),
            "left_out": [lo.to_dict() for lo in self.left_out],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunRecord:
        return cls(
            run_id=d["run_id"], host=d["host"], suite=dict(d.get("suite", {})),
            profile=dict(d.get("profile", {})), started=d.get("started", ""),
            finished=d.get("finished", ""), duration_s=float(d.get("duration_s", 0.0)),
            inventory=dict(d.get("inventory", {})),
            checks=tuple(CheckResult.from_dict(c) for c in d.get("checks", [])),
            harness_version=d.get("harness_version", ""), argv=tuple(d.get("argv", [])),
            interrupted=bool(d.get("interrupted", False)),
            format_version=int(d.get("format_version", FORMAT_VERSION)),
            history=dict(d.get("history") or {}),
            resumed=tuple(d.get("resumed") or ()),
            left_out=tuple(LeftOut.from_dict(lo) for lo in d.get("left_out") or ()),
        )


# What a BMC reading is, independent of where it came from (ipmitool or Redfish): parsers of BMC
# output return these; the power_headroom check consumes them. Power is in W.

@dataclass(frozen=True)
class PsuReading:
    """One power supply as the BMC reports it at one moment."""

    name: str  # the BMC's own name for it: "PSU1", "PS2 Status", "PSU.Slot.1"
    ok: Optional[bool]  # True present and healthy; False absent, failed or AC lost; None unknown
    power_in_w: Optional[float] = None
    power_out_w: Optional[float] = None
    capacity_w: Optional[float] = None  # the PSU's rating, where the BMC tells it
    status: str = ""  # the BMC's status words, for the report ("Presence detected, AC lost")


@dataclass(frozen=True)
class BmcReading:
    """Node power and PSU state at one moment. `t` is seconds since the epoch."""

    t: float
    node_power_w: Optional[float]  # instantaneous input power of the whole node
    psus: tuple[PsuReading, ...] = ()
    redundant: Optional[bool] = None  # from a redundancy sensor; None where the BMC has none
    source: str = ""  # "ipmitool dcmi", "ipmitool sdr", "redfish https://bmc/...": for the report
    inlet_temp_c: Optional[float] = None
    fans_ok: Optional[bool] = None


class BmcSource(Protocol):
    """Anything that can read the BMC now. Raises a HarnessError subclass when it cannot."""

    def read(self) -> BmcReading: ...

    def describe(self) -> str: ...

    def close(self) -> None:
        """Let go of what the source holds open (a Redfish session and its connection)."""
