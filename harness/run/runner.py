"""Orchestration: plan, run each check, judge it, persist it at once; survive signals.

SIGINT/SIGTERM kill the running tool's process group, mark the rest "not run", and the run
still writes results.json, report.html and junit.xml. Live tool groups are recorded in
RUN_DIR/.running (platform/ledger) so a SIGKILLed run can be cleaned up and resumed. When a
result cannot be written (disk full) the run stops: unsaved results would be lost anyway.

Each check's metrics, findings and validity go to compare.judge once, with the profile's, the
suite's and the kind's own rules; nothing else decides a status. A check whose run was not whole
(problems) is still judged: a failure the hardware showed (a GPU that hung or fell off the bus, its
siblings' computation errors) makes it FAILED, naming the GPU; without one it is ERRORED. Any
exception inside a check (a bug, not only a HarnessError) makes that check ERRORED, its
traceback goes to harness.log, and the run goes on; KeyboardInterrupt and SystemExit are not
caught. Whatever a check returns, its result is made strict JSON (no NaN or inf) before it is
written.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import secrets
import signal
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any

from harness import __version__, results
from harness.checks.base import CheckContext, cut_outputs
from harness.compare.judge import finite_metrics, judge
from harness.errors import GuardRefusal, HarnessError, SkipCheck, StorageError, ToolError
from harness.fsutil import why_not
from harness.model import (
    EXIT_CODES,
    CheckResult,
    Evaluation,
    Finding,
    LeftOut,
    Metric,
    Outcome,
    RunRecord,
    Status,
)
from harness.platform import proc
from harness.platform.ledger import Ledger
from harness.report.fmt import fmt_status
from harness.run import contention, nodeload, settle
from harness.run import sampler as telemetry
from harness.run.finish import History, Reports, finish, internal_error, with_error
from harness.run.plan import PlannedCheck
from harness.run.progress import PlainProgress, Progress
from harness.series import telemetry as gpu_series

log = logging.getLogger("harness")

SIGNAL_NAMES: dict[int, str] = {int(signal.SIGINT): "SIGINT", int(signal.SIGTERM): "SIGTERM"}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_run_dir(output: Path, hostname: str, now: datetime | None = None) -> Path:
    """output/<hostname>-<UTC timestamp>-<6 random hex digits>: its name is the run id, unique
    beyond this output directory too (runs of one second on one host, or of two nodes that share a
    hostname, with different --output and one history store), and mkdir's O_EXCL makes sure."""
    stamp = (now or utcnow()).strftime("%Y%m%dT%H%M%SZ")
    safe_host = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in hostname) or "host"
    for _ in range(100):  # bounded: 16.7 million names a second
        path = output / f"{safe_host}-{stamp}-{secrets.token_hex(3)}"
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
        except OSError as e:
            raise StorageError(f"{path}: cannot create run directory: {why_not(e)}") from e
    raise StorageError(f"{output}: cannot create a run directory of a new name")


@dataclass
class RunContext:
    """What the runner needs besides the plan."""

    run_dir: Path
    suite_info: Mapping[str, Any]
    profile_info: Mapping[str, Any]
    inventory: Mapping[str, Any]
    gpu_expectation: str | None = None  # '8 x NVIDIA H100 ...' when the profile expects GPUs
    allow_destructive: bool = False
    argv: tuple[str, ...] = ()
    progress: Progress = field(default_factory=PlainProgress)
    previous: Mapping[str, CheckResult] = field(default_factory=dict)  # kept when resuming
    started: datetime | None = None  # the first attempt's start, when resuming
    resumed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # for harness.log, e.g. leftovers of a crashed run cleaned up
    hardware: Mapping[str, Any] = field(default_factory=dict)  # the profile's hardware block
    config: tuple[tuple[Any, str], ...] = ()  # the profile's config: rules, with its name
    history: History | None = None  # annotates the record before the final write, records it after
    left_out: tuple[LeftOut, ...] = ()  # the suite's checks an option left out (RunRecord.left_out)
    first_look: nodeload.Snapshot | None = None  # the start of the first check's first window
    reports: Reports | None = None  # what renders the reports (finish.InProcess when None)


class Runner:
    """Runs a plan into a run directory. One instance per run."""

    def __init__(self, plan: list[PlannedCheck], ctx: RunContext) -> None:
        self.plan = plan
        self.ctx = ctx
        self.signum: int | None = None
        self.results: dict[str, CheckResult] = {}
        self.saved: set[str] = set()
        self.started = ctx.started or utcnow()
        self.gate = settle.Gate()
        self.contention = contention.Gate(start=ctx.first_look)
        self.link_faults: dict[str, str] = {}  # gpu_series.once: GPU -> the check that reported its link

    # -- signals ------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
            log.warning("received %s: stopping the running check", SIGNAL_NAMES.get(signum, signum))
        proc.kill_all()

    @contextmanager
    def signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM go to this run while inside (nesting is harmless)."""
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    # -- the run ------------------------------------------------------------------------
    def run(self) -> RunRecord:
        """Run the plan and write the final outputs; returns the record as written.

        The signal handlers stay until the outputs are written: a signal that costs a check
        marks the run interrupted (INCOMPLETE, exit 128+N); one that lands after the last check
        finished is noted in harness.log and changes nothing, so outputs and exit code agree.
        """
        handler = _FileLog(self.ctx.run_dir / "harness.log")
        ledger = Ledger(self.ctx.run_dir, log)
        try:
            with self.signals():
                try:
                    self._run_checks(ledger)
                    record = self._record(final=True)
                except StorageError:
                    raise
                except Exception as e:  # a bug outside the checks: the results so far are still written
                    record = with_error(self._record(final=True), internal_error("running the plan", e))
                record = finish(record, self.ctx.run_dir, self.ctx.history, self.ctx.reports)
            if self.signum is not None and not record.interrupted:
                log.warning("%s arrived after the last check had finished: the verdict stands",
                            SIGNAL_NAMES.get(self.signum, str(self.signum)))
            log.info("verdict %s %s", record.verdict, record.counts)
            self.ctx.progress.finish(record)
            return record
        except StorageError as e:
            proc.kill_all()  # nothing keeps running once results cannot be kept
            done = len(self.saved) + sum(1 for pc in self.plan if pc.id in self.ctx.previous)
            fix = "free space" if "no space left" in str(e) else "fix that"
            msg = (f"{e}; run stopped, results cannot be saved ({done} of {len(self.plan)} checks "
                   f"saved); {fix}, then: harness run --resume {self.ctx.run_dir}")
            log.error("%s", msg)
            raise StorageError(msg) from e
        finally:
            ledger.close()
            handler.close()

    def _run_checks(self, ledger: Ledger) -> None:
        for note in self.ctx.notes:
            log.warning("%s", note)
        ledger.open()
        self.ctx.progress.start(self.ctx.suite_info["name"], self.ctx.profile_info["name"],
                                len(self.plan), str(self.ctx.run_dir))
        self._persist()
        for i, pc in enumerate(self.plan, 1):
            if self.signum is not None:
                break
            if pc.id in self.ctx.previous:
                self._keep(self.ctx.previous[pc.id])
                continue
            result = _strict(self._run_one(i, pc))
            self.results[pc.id] = result
            results.write_check(self.ctx.run_dir, result)
            self.saved.add(pc.id)
            self._persist()
            self.ctx.progress.check_finished(result)

    def _keep(self, result: CheckResult) -> None:
        self.results[result.id] = result
        self.link_faults = {**gpu_series.link_faults(result.evaluations, result.id), **self.link_faults}
        log.info("check %s kept from the earlier attempt: %s", result.id, result.status.value)
        self.ctx.progress.note(f"{result.id}: {fmt_status(result.status.value)} (kept from the earlier "
                               "attempt)")

    def _run_one(self, index: int, pc: PlannedCheck) -> CheckResult:
        c = pc.check
        estimate = c.kind.hooks.estimate_s
        est = estimate(c.params) * c.repeat if estimate else None
        self.ctx.progress.check_started(index, pc.id, c.kind.name, c.timeout_s, est)
        log.info("check %s (%s) started", pc.id, c.kind.name)
        started = utcnow()
        t0 = time.monotonic()
        cctx = CheckContext(check_id=pc.id, run_dir=self.ctx.run_dir, timeout_s=c.timeout_s,
                            destructive=c.spec.destructive,
                            allow_destructive=self.ctx.allow_destructive,
                            inventory=self.ctx.inventory, log=log, progress=self.ctx.progress.note,
                            hardware=self.ctx.hardware, config=self.ctx.config)
        base = CheckResult(id=pc.id, kind=c.kind.name, status=Status.ERRORED, started=iso(started))
        metrics: list[Metric] = []
        problems: list[str] = []
        details: dict[str, Any] = {}
        summary = ""
        findings: list[Finding] = []  # the kind's verdicts that no rule states
        watch: contention.Watch | None = None
        try:
            self._check_needs(pc)
            details.update(self.gate.before(c, self.ctx.inventory, self._stopped, cctx.progress))
            load, busy = self.contention.before(c, self._stopped, cctx.progress)
            details.update(load)
            if busy and self.signum is not None:  # the wait was cut short by the stop: not run
                return self._interrupted(base, t0, cctx, metrics)
            if busy:  # a busy node is not a bad one: nothing measured, nothing judged
                return self._done(base, t0, cctx, Status.ERRORED, f"contended: {busy}", metrics,
                                  details=details)
            watch = self.contention.watch(c)
            try:
                for rep in range(1, c.repeat + 1):
                    with proc.deadline(c.timeout_s):  # probes get what is left of the check's time
                        out = telemetry.observe(c.kind, c.params, cctx)  # GPU telemetry alongside
                    extra = {"repeat": rep} if c.repeat > 1 else {}
                    good, odd = finite_metrics(out.metrics)
                    metrics += [Metric(m.name, m.value, m.unit, {**m.labels, **extra}) for m in good]
                    findings += [replace(f, labels={**f.labels, **extra}) for f in out.findings]
                    problems += [f"repeat {rep}: {p}" if extra else p for p in (*out.problems, *odd)]
                    details.update(out.details)
                    summary = out.summary
                    if self.signum is not None:
                        break
            finally:
                watch.stop()
                if during := watch.details():
                    details.setdefault("contention", {})["during"] = during
        except SkipCheck as e:  # a skip the profile expects a measurement from makes the run UNTESTED
            return replace(self._done(base, t0, cctx, Status.SKIPPED, str(e), metrics, details=details),
                           expected_by=pc.expected_by)
        except (ToolError, GuardRefusal) as e:
            if self.signum is not None:
                return self._interrupted(base, t0, cctx, metrics)
            msg = str(e)
            if isinstance(e, ToolError) and e.output_tail and e.output_tail not in msg:
                details["output_tail"] = e.output_tail[-2000:]
            return self._done(base, t0, cctx, Status.ERRORED, msg, metrics, details=details)
        except StorageError:
            raise
        except HarnessError as e:
            return self._done(base, t0, cctx, Status.ERRORED, str(e), metrics, details=details)
        except Exception as e:  # a bug in a check must not lose the other checks' results
            if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
                where = e.filename or self.ctx.run_dir  # raw output cannot be kept: stop the run
                raise StorageError(f"{where}: cannot write: {why_not(e)}") from e
            return self._done(base, t0, cctx, Status.ERRORED, _internal(pc.id, e), metrics, details=details)
        if self.signum is not None:
            return self._interrupted(base, t0, cctx, metrics)
        findings, seen = gpu_series.once(findings, self.link_faults)
        if seen:
            details["reported_under_other_checks"] = seen
        try:
            judged = judge((*pc.rules, *pc.own_rules), metrics, findings)
        except Exception as e:  # a bug in judging must not lose the other checks' results either
            return self._done(base, t0, cctx, Status.ERRORED, _internal(pc.id, e), metrics, details=details)
        if problems:  # the run was not whole: a fault the hardware showed still fails, else ERRORED
            problems = [*cut_outputs(cctx), *problems]  # said first: what was cut may be why
            bad = [e for e in judged.evaluations if e.outcome is Outcome.FAIL]
            why = "invalid run: " + "; ".join(problems[:3])
            if bad:
                first = bad[0].message or bad[0].metric
                more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
                return self._done(base, t0, cctx, Status.FAILED, f"{first}{more}; also {why}", metrics,
                                  problems=[*problems, *judged.problems], evaluations=judged.evaluations,
                                  details=details)
            return self._done(base, t0, cctx, Status.ERRORED, why, metrics, problems=problems,
                              details=details)
        if watch is not None and (busy := watch.refuses):  # measured, but not the hardware alone
            return self._done(base, t0, cctx, Status.ERRORED, f"contended during the measurement: {busy}",
                              metrics, details=details)
        if judged.problems:
            return self._done(base, t0, cctx, Status.ERRORED, "not judged: " + "; ".join(judged.problems[:3]),
                              metrics, problems=list(judged.problems), evaluations=judged.evaluations,
                              details=details)
        self.link_faults = {**gpu_series.link_faults(judged.evaluations, pc.id), **self.link_faults}
        return self._done(base, t0, cctx, judged.status, summary, metrics,
                          evaluations=judged.evaluations, details=details)

    def _stopped(self) -> bool:
        return self.signum is not None

    def _check_needs(self, pc: PlannedCheck) -> None:
        needs = {*pc.check.spec.needs, *pc.check.kind.needs}
        if "root" in needs and os.geteuid() != 0:
            raise SkipCheck("needs root")
        if needs & {"gpu", "nvml"} and not self.ctx.inventory.get("gpus"):
            reason = self.ctx.inventory.get("nvml", {}).get("reason") or "no NVIDIA GPU found"
            if self.ctx.inventory.get("pci_gpus"):  # GPUs on the bus without NVML: the driver
                raise HarnessError(reason)
            if self.ctx.gpu_expectation:
                raise HarnessError(f"profile expects {self.ctx.gpu_expectation}, found 0 ({reason})")
            raise SkipCheck(f"no NVIDIA GPU: {reason}")

    def _done(self, base: CheckResult, t0: float, cctx: CheckContext, status: Status, message: str,
              metrics: list[Metric], *, problems: list[str] | None = None,
              evaluations: tuple[Evaluation, ...] = (),
              details: Mapping[str, Any] | None = None) -> CheckResult:
        log.info("check %s %s: %s", base.id, status.value, message)
        return replace(base, status=status, message=message, duration_s=time.monotonic() - t0,
                       metrics=tuple(metrics), evaluations=evaluations,
                       problems=tuple(problems or ()), tool_runs=tuple(cctx.tool_runs),
                       details=dict(details or {}))

    def _interrupted(self, base: CheckResult, t0: float, cctx: CheckContext,
                     metrics: list[Metric]) -> CheckResult:
        name = SIGNAL_NAMES.get(self.signum or 0, str(self.signum))
        return self._done(base, t0, cctx, Status.NOT_RUN, f"interrupted by {name} while running",
                          metrics)

    # -- persistence --------------------------------------------------------------------
    def _record(self, final: bool) -> RunRecord:
        checks = []
        for pc in self.plan:
            if pc.id in self.results:
                checks.append(self.results[pc.id])
            else:
                if self.signum is not None:
                    why = "not run: interrupted by " + SIGNAL_NAMES.get(self.signum, str(self.signum))
                else:
                    why = "not run" if final else "pending"
                checks.append(CheckResult(pc.id, pc.check.kind.name, Status.NOT_RUN, why))
        now = utcnow()
        lost = any(c.status is Status.NOT_RUN for c in checks)  # to the signal, or still pending
        return RunRecord(
            run_id=self.ctx.run_dir.name, host=str(self.ctx.inventory.get("host", {}).get("hostname")),
            suite=self.ctx.suite_info, profile=self.ctx.profile_info, started=iso(self.started),
            finished=iso(now) if final else "", duration_s=(now - self.started).total_seconds(),
            inventory=self.ctx.inventory, checks=tuple(checks), harness_version=__version__,
            argv=self.ctx.argv, interrupted=self.signum is not None and lost, resumed=self.ctx.resumed,
            left_out=self.ctx.left_out,
        )

    def _persist(self) -> None:
        results.write(self.ctx.run_dir, self._record(final=False), durable=False)


def _internal(check_id: str, e: Exception) -> str:
    """Log the traceback of an exception inside a check to harness.log; one line for the screen."""
    log.error("internal error in check %s:\n%s", check_id, traceback.format_exc())
    what = " ".join(str(e).split())[:300]
    return f"internal error: {type(e).__name__}: {what} (traceback in harness.log)"


def _strict(result: CheckResult) -> CheckResult:
    """The result with its details made plain strict JSON: metrics and evaluations are finite already
    (compare), details are whatever a kind put there (NaN and inf become null, other objects text)."""
    try:
        json.dumps(result.details, allow_nan=False)
        return result
    except (ValueError, TypeError):
        log.warning("check %s: details held values strict JSON cannot (NaN, inf, objects); NaN and inf "
                    "recorded as null, objects as text", result.id)
        return replace(result, details=_plain(result.details))


def _plain(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return str(obj)


class _QuietFileHandler(logging.FileHandler):
    """A log file that, when it cannot be written (disk full), stops trying instead of printing
    a traceback per line; the run reports the storage problem itself."""

    failed = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.failed:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        self.failed = True


class _FileLog:
    """Attach a file handler for the run's log to the 'harness' logger."""

    def __init__(self, path: Path) -> None:
        try:
            self.handler: logging.FileHandler = _QuietFileHandler(path, encoding="utf-8")
        except OSError as e:
            raise StorageError(f"{path}: cannot write: {why_not(e)}") from e
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(self.handler)
        log.setLevel(logging.INFO)

    def close(self) -> None:
        log.removeHandler(self.handler)
        self.handler.close()


def exit_code(record: RunRecord, signum: int | None) -> int:
    """128+signal when the signal interrupted the run (130 SIGINT, 143 SIGTERM), else
    model.EXIT_CODES for the verdict: the code follows the record, never the signal alone."""
    if record.interrupted and signum is not None:
        return 128 + signum
    return EXIT_CODES[record.verdict]


