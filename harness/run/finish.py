"""The end of a run: annotate the record, render every output, then write each exactly once.

results.json is rewritten as each check finishes (crash safety); the final results.json,
report.html and junit.xml are written here, once, after history has annotated the record. The
reports are rendered by `Reports`: in this process (InProcess, which loads the renderers only
then), or by the run's helper process (run.helper), which loaded them while the run started.

A failure outside the checks (a bug in the session, history or a renderer) is an error of the
run, not of the hardware: it becomes an ERRORED entry of kind `harness` in the record, so the
verdict (ERRORED), the exit code (3), the report, junit and `--quiet` line all say so, and
whatever can still be written is. Its traceback goes to harness.log.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness import results
from harness.model import CheckResult, RunRecord, Status
from harness.report.files import NAMES, write_rendered

if TYPE_CHECKING:
    from harness.report.outputs import Renderer

log = logging.getLogger("harness")

KIND = "harness"  # the kind of the entry that carries errors outside the checks


class History(Protocol):
    """What the end of a run needs of history (harness.history.record.RunHistory)."""

    def annotate(self, record: RunRecord) -> RunRecord: ...
    def keep(self, record: RunRecord, run_dir: Path) -> None: ...
    def close(self) -> None: ...


def internal_error(doing: str, e: BaseException) -> str:
    """Log the traceback being handled to harness.log; the one-line message for the record."""
    log.error("internal error while %s:\n%s", doing, traceback.format_exc())
    return f"internal error while {doing}: {type(e).__name__}: {e} (traceback in harness.log)"


def with_error(record: RunRecord, message: str) -> RunRecord:
    """The record with `message` added to its `harness` entry (made when there is none)."""
    mine = next((c for c in record.checks if c.kind == KIND), None)
    if mine is None:
        ids = {c.id for c in record.checks}
        cid = next(i for i in ("harness", "harness-run", "harness-errors") if i not in ids)
        entry = CheckResult(cid, KIND, Status.ERRORED, message, started=record.finished)
        return replace(record, checks=(*record.checks, entry))
    if message in mine.message.split("; "):
        return record
    entry = replace(mine, message=f"{mine.message}; {message}")
    return replace(record, checks=tuple(entry if c is mine else c for c in record.checks))


def errors_of(record: RunRecord) -> list[str]:
    """The messages of the record's errors outside the checks."""
    return [c.message for c in record.checks if c.kind == KIND]


def _guarded(record: RunRecord, doing: str, step: Callable[[RunRecord], RunRecord]) -> RunRecord:
    try:
        return step(record)
    except Exception as e:  # a bug outside the checks: recorded, and the outputs still written
        return with_error(record, internal_error(doing, e))


def render(record: RunRecord, run_dir: Path,
           renderers: Mapping[str, Renderer] | None = None) -> tuple[RunRecord, dict[str, str]]:
    """Every output rendered (file name -> text) and the record they show. A renderer that fails
    adds an error to the record and the others are rendered again, so they show it too."""
    if renderers is None:
        from harness.report.outputs import RENDERERS  # start-up: a run's helper may render instead

        renderers = RENDERERS
    texts: dict[str, str] = {}
    for _ in range(2):
        texts, failed = {}, []
        for name, fn in renderers.items():
            try:
                texts[name] = fn(record, run_dir)
            except Exception as e:  # a renderer bug: results.json and the other outputs still come
                failed.append(internal_error(f"rendering {name}", e))
        new = record
        for msg in failed:
            new = with_error(new, msg)
        if new == record:
            break
        record = new
    return record, texts


class Reports(Protocol):
    """What renders a run's reports: this process (InProcess) or the run's helper (run.helper)."""

    def prepare(self, output: Path) -> None: ...
    def render(self, record: RunRecord, run_dir: Path) -> tuple[RunRecord, dict[str, str]]: ...
    def release(self) -> None: ...  # nothing more will be asked: a render after it is done here


class InProcess:
    """The reports rendered here, the renderers loaded on first use."""

    def prepare(self, output: Path) -> None:
        """Load the renderers and the compiled template of a run directory in `output` ahead of
        the render (outputs.prepare: a failure is left to the render, which records it)."""
        from harness.report import outputs  # start-up: a run's helper may render instead

        outputs.prepare(output)

    def render(self, record: RunRecord, run_dir: Path) -> tuple[RunRecord, dict[str, str]]:
        return render(record, run_dir)

    def release(self) -> None:
        pass


def finish(record: RunRecord, run_dir: Path, history: History | None,
           reports: Reports | None = None) -> RunRecord:
    """Annotate, render, record in history, then write results.json and the reports once each;
    returns the record as written."""
    reports = reports or InProcess()
    try:
        if history is not None:
            record = _guarded(record, "reading history", history.annotate)
        record, texts = reports.render(record, run_dir)
        reports.release()  # a run's helper ends while the record is kept and written
        if history is not None:
            kept = record

            def keep(r: RunRecord) -> RunRecord:
                history.keep(r, run_dir)
                return r

            record = _guarded(record, "recording the run in history", keep)
            if record is not kept:
                record, texts = reports.render(record, run_dir)
    finally:
        if history is not None:
            history.close()
    results.write(run_dir, record)
    for name in NAMES:
        if name not in texts:  # an earlier attempt's file would contradict this record
            with suppress(OSError):
                (run_dir / name).unlink(missing_ok=True)
    write_rendered(run_dir, texts)
    return record
