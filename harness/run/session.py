"""What the CLI commands do, as plain functions: load, plan, run, print the verdict."""

from __future__ import annotations

import gc
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import config
from harness.checks.registry import kinds
from harness.errors import ConfigError, HarnessError, UsageError, printable
from harness.fsutil import output_dir_problem, untrusted
from harness.history import record as hist
from harness.history.series import params_digest
from harness.model import LeftOut, RunRecord, join_labels
from harness.platform import ledger
from harness.platform.runlock import RunLock
from harness.report.fmt import fmt_status
from harness.run import nodeload, plan, progress, resume, retention
from harness.run.finish import InProcess, Reports, errors_of
from harness.run.helper import Helper, inventory_of
from harness.run.resume import digest
from harness.run.runner import RunContext, Runner, exit_code, iso, make_run_dir, utcnow

DEFAULT_KEEP = 20  # quiet runs kept in an output directory (--keep)

if TYPE_CHECKING:
    from harness.config import Found, LoadedProfile, LoadedSuite
    from harness.model import CheckResult
    from harness.run.plan import PlannedCheck


@dataclass(frozen=True)
class Finished:
    """How `harness run` ended: the exit code, and the record and run directory when it ran."""

    code: int
    record: RunRecord | None = None
    run_dir: Path | None = None


@dataclass(frozen=True)
class RunOptions:
    """What `harness run` was asked, as the CLI parsed it.

    `history` is --history ('off', a path, or None for OUTPUT/history.sqlite); `quiet` prints
    nothing and keeps the newest `keep` quiet runs in `output`; `resume` finishes RUN_DIR instead.
    """

    suite: str | None = None
    profile: str | None = None
    output: Path = Path("reports")
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()  # --tags: only the checks carrying one of them
    dry_run: bool = False
    allow_destructive: bool = False
    argv: tuple[str, ...] = ()
    resume: Path | None = None
    history: str | Path | None = None
    quiet: bool = False
    keep: int = DEFAULT_KEEP
    node: str | None = None  # --node: the node's name (node_name() reads the environment too)
    prom_textfile: Path | None = None  # --prom-textfile: the textfile collector's directory

    def __post_init__(self) -> None:
        object.__setattr__(self, "only", tuple(self.only))  # a list given by a caller stays frozen
        object.__setattr__(self, "skip", tuple(self.skip))


@dataclass(frozen=True)
class _Prepared:
    """A run ready to start: its plan, config and inventory, and what a resumed run keeps."""

    planned: tuple[PlannedCheck, ...]
    loaded: LoadedSuite
    prof: LoadedProfile
    suite_info: Mapping[str, Any]
    profile_info: Mapping[str, Any]
    inventory: Mapping[str, Any]
    output: Path
    argv: tuple[str, ...]
    run_dir: Path | None = None  # a resumed run's own directory
    previous: Mapping[str, CheckResult] = field(default_factory=dict)
    started: datetime | None = None
    resumed: tuple[str, ...] = ()
    left_out: tuple[LeftOut, ...] = ()  # the suite's checks --only/--skip left out


InventoryProbe = Callable[[], Mapping[str, Any]]
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


def node_name(given: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The node's own name: --node, else $HARNESS_NODE, else $NODE_NAME (a pod's node from the
    downward API), else None (the hostname). Inside a pod the hostname is the pod's name."""
    for value, what in ((given, "--node"), (environ.get("HARNESS_NODE"), "HARNESS_NODE"),
                        (environ.get("NODE_NAME"), "NODE_NAME")):
        if value is not None and value.strip():
            if not _NODE.fullmatch(value.strip()):
                raise UsageError(f"{what} {value!r}: not a node name (letters, digits, '.', '-', '_')")
            return value.strip()
    return None


def as_node(inventory: Mapping[str, Any], node: str | None) -> dict[str, Any]:
    """The inventory with the node's name as its hostname (what the OS said kept as os_hostname):
    results, history and fleet reports name the node by it; serials still identify the machine."""
    inv = dict(inventory)
    host = dict(inv.get("host") or {})
    if node and host.get("hostname") != node:
        host["os_hostname"] = host.get("hostname")
        host["hostname"] = node
        inv["host"] = host
    return inv


def _options(options: RunOptions | None, fields: Mapping[str, Any]) -> RunOptions:
    return replace(options, **fields) if options is not None else RunOptions(**fields)


def run(options: RunOptions | None = None, *, inventory_probe: InventoryProbe | None = None,
        **fields: Any) -> int:
    """`harness run` (or `harness run --resume RUN_DIR`): returns the exit code.

    `fields` set RunOptions' fields by name (over `options`, if given); `inventory_probe` replaces
    the machine's inventory (tests).
    """
    return execute(_options(options, fields), inventory_probe=inventory_probe).code


def execute(options: RunOptions | None = None, *, inventory_probe: InventoryProbe | None = None,
            first_look: nodeload.Snapshot | None = None, helper: Helper | None = None,
            **fields: Any) -> Finished:
    """`run`, returning the record as written too. `first_look`: the start of the contention gate's
    first look, taken by the caller before this module loaded (else taken now): loading, checking
    and planning the run fill it. `helper`: the run's helper process (run.helper), forked by the
    caller as the process started, which reads the inventory and renders the reports; without
    one, this process does."""
    opts = _options(options, fields)
    start = None if opts.dry_run else first_look or nodeload.first_look()
    try:
        with _start_up():
            prepared = _prepare(opts, inventory_probe, helper)
        return Finished(0) if prepared is None else _launch(prepared, opts, start, helper or InProcess())
    finally:
        if helper is not None:
            helper.close()
        gc.unfreeze()  # for callers that go on (tests); the CLI exits here


@contextmanager
def _start_up() -> Iterator[None]:
    """Start-up without garbage-collector passes, its objects then kept out of later passes.

    Imports, config models and the inventory make some 40,000 objects that live as long as the
    run: the collector's hundred-odd passes meanwhile reclaim next to nothing (~20 ms), and once
    frozen (gc.freeze) the run's own passes do not walk them again.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        gc.enable()


def _prepare(opts: RunOptions, inventory_probe: InventoryProbe | None,
             helper: Helper | None) -> _Prepared | None:
    """Load, check and plan the run (or the resumed one); None after printing a --dry-run plan.
    The inventory is the helper's, read while this process loaded; without one, its lsblk is
    begun first, so its wait overlaps loading the suite and profile."""
    if inventory_probe is not None:
        return _prepare_with(opts, inventory_probe)
    with inventory_of(helper) as read:
        return _prepare_with(opts, read)


def _prepare_with(opts: RunOptions, read_inventory: InventoryProbe) -> _Prepared | None:
    node = node_name(opts.node)
    if opts.prom_textfile is not None and not opts.prom_textfile.is_dir():
        raise UsageError(f"--prom-textfile {opts.prom_textfile}: not a directory (give the node "
                         "exporter's textfile directory)")
    if opts.resume is not None:
        given = [n for n, v in (("SUITE", opts.suite), ("--profile", opts.profile), ("--only", opts.only),
                                ("--skip", opts.skip), ("--tags", opts.tags), ("--dry-run", opts.dry_run))
                 if v]
        if given:
            raise UsageError(f"--resume takes the suite, profile and checks from RUN_DIR/results.json; "
                             f"drop {', '.join(given)}")
        return _resume(opts.resume, read_inventory, node)
    suite_found = config.locate("suites", opts.suite or "smoke")
    _warn_refused(suite_found.refused)
    loaded = config.load_suite(suite_found.path, kinds())
    checks = plan.select_checks(loaded, opts.only, opts.skip, opts.tags)  # bad arguments: before any work
    bad_output = output_dir_problem(opts.output)
    if bad_output is not None:
        raise UsageError(f"--output {opts.output}: {bad_output}")
    inventory = as_node(read_inventory(), node)
    if opts.profile:
        prof_found = config.locate("profiles", opts.profile)
        _warn_refused(prof_found.refused)
        prof = config.load_profile(prof_found.path)
        reason = "given with --profile"
    else:
        candidates, found_as = _candidates()
        name, reason = plan.select_profile(inventory, candidates)
        prof = next((c for c in candidates if c.profile.name == name), None) or config.load_profile(name)
        prof_found = found_as.get(prof.path) or config.locate("profiles", prof.path)
    suite_from = config.where_text("suites", suite_found.where)
    prof_from = config.where_text("profiles", prof_found.where)
    planned = plan.build(loaded, prof, opts.only, opts.skip, opts.tags)
    assert len(planned) == len(checks)
    left = plan.left_out(loaded, prof, plan.selectors(opts.only, opts.skip, opts.tags))
    if opts.dry_run:
        print(plan.render_dry_run(loaded, prof, reason, planned, inventory, opts.allow_destructive,
                                  (suite_from, prof_from), left))
        return None
    suite_info = {"name": loaded.suite.name, "path": str(loaded.path),
                  "description": loaded.suite.description, "digest": digest(loaded.suite),
                  "file": str(loaded.path.resolve()), "from": suite_from,
                  "selected": [pc.id for pc in planned],
                  **({"tags_selected": list(opts.tags)} if opts.tags else {}),
                  "tags": list(loaded.suite.tags),
                  "params": {pc.id: params_digest(pc.check.spec.kind, pc.check.params.model_dump(mode="json"),
                                                  pc.check.repeat) for pc in planned},
                  "declared": declared_directions(planned)}
    profile_info = {"name": prof.profile.name, "path": str(prof.path), "reason": reason,
                    "chain": list(prof.chain), "digest": digest(prof.profile),
                    "file": str(prof.path.resolve()), "from": prof_from}
    return _Prepared(tuple(planned), loaded, prof, suite_info, profile_info, inventory,
                     output=opts.output, argv=opts.argv, left_out=left)


def _warn_refused(refused: Sequence[tuple[Path, str]]) -> None:
    for path, why in refused:
        print(printable(f"warning: passed over {path}: not trusted: {why}"), file=sys.stderr)


def _candidates() -> tuple[list[LoadedProfile], dict[Path, Found]]:
    """The trusted profiles on the search path that load, for auto-selection, with where each was
    found; a file not trusted, or one that does not load, is a warning and no candidate: one bad
    file cannot stop every run, nor can a planted one be chosen."""
    _warn_refused(config.untrusted_files("profiles"))
    candidates: list[LoadedProfile] = []
    found_as: dict[Path, Found] = {}
    for found in config.catalogue("profiles"):
        try:
            lp = config.load_profile(found.path)
        except ConfigError as e:
            what = str(e.problems[0]) if e.problems else str(e)
            print(printable(f"warning: profile {found.path} left out of auto-selection: {what}"),
                  file=sys.stderr)
            continue
        candidates.append(lp)
        found_as[lp.path] = found
    return candidates, found_as


def declared_directions(planned: Sequence[PlannedCheck]) -> dict[str, dict[str, str]]:
    """check id -> metric -> better, for metrics a check declares itself (a command check's
    `better: higher`): what baselines, trends and `compare` read beside the catalogue."""
    out: dict[str, dict[str, str]] = {}
    for pc in planned:
        declared = pc.check.kind.hooks.declared_metrics
        if declared is not None:
            mine = {n: s.better for n, s in declared(pc.check.params).items()}
            if mine:
                out[pc.id] = mine
    return out


def _resume(run_dir: Path, read_inventory: InventoryProbe, node: str | None) -> _Prepared:
    """Finish RUN_DIR: same suite, profile and checks; finished checks are kept."""
    r = resume.prepare(run_dir)
    inventory = as_node(read_inventory(), node)
    host = str(inventory.get("host", {}).get("hostname") or "host")
    if r.record.host != host:
        raise UsageError(f"{run_dir} was started on host {r.record.host}, this is {host}; "
                         "resume it on its own node")
    planned = plan.build(r.suite, r.profile, r.selected)
    started = datetime.fromisoformat(r.record.started.replace("Z", "+00:00"))
    return _Prepared(tuple(planned), r.suite, r.profile, dict(r.record.suite), dict(r.record.profile),
                     inventory, output=run_dir.parent, argv=r.record.argv, run_dir=run_dir,
                     previous=r.finished, started=started, resumed=(*r.record.resumed, iso(utcnow())),
                     left_out=r.record.left_out)


def _launch(p: _Prepared, opts: RunOptions, first_look: nodeload.Snapshot | None,
            reports: Reports) -> Finished:
    """Take the node's run lock, clean up after a crashed run, run the plan, print the verdict;
    `first_look` starts the first check's first contention window; `reports` renders the reports."""
    output, planned, prof, run_dir = p.output, p.planned, p.prof, p.run_dir
    os.umask(os.umask(0o022) | 0o022)  # nothing the run writes is group- or world-writable
    _trusted_output(output)
    _trusted_store(hist.store_path(output, opts.history))
    # read-only runs (a Slurm prolog) share the lock; one loading check makes it exclusive
    with RunLock(shared=not any(pc.check.kind.loads(pc.check.params) for pc in planned)) as lock:
        notes: list[str] = []
        crashed = lock.acquire(iso(utcnow()))
        if crashed is not None and crashed.run_dir:
            notes += ledger.reap_stale(Path(crashed.run_dir), busy_ok=True)
        if run_dir is None:
            run_dir = make_run_dir(output, str(p.inventory.get("host", {}).get("hostname") or "host"))
            if opts.quiet:
                retention.mark(run_dir)
        else:
            notes += ledger.reap_stale(run_dir)
            resume.clear_partial(run_dir, [pc.id for pc in planned if pc.id not in p.previous])
        lock.set_run_dir(run_dir)
        reports.prepare(run_dir.parent)  # inside the first look, which would otherwise sleep
        for n in notes:
            print(f"note: {printable(n)}", file=sys.stderr)
        ctx = RunContext(
            run_dir=run_dir, suite_info=p.suite_info, profile_info=p.profile_info, inventory=p.inventory,
            gpu_expectation=plan.gpu_expectation_text(prof.profile),
            allow_destructive=opts.allow_destructive, argv=p.argv,
            progress=progress.choose(),
            previous=p.previous, started=p.started, resumed=p.resumed, notes=tuple(notes),
            left_out=p.left_out, first_look=first_look, reports=reports,
            hardware=prof.profile.hardware.model_dump(),
            config=tuple((r, prof.profile.name) for r in prof.profile.config),
            history=hist.RunHistory(hist.store_path(output, opts.history),
                                    hist.rules_of(p.loaded.suite, prof.profile)),
        )
        runner = Runner(list(planned), ctx)
        with runner.signals():  # to the end: a late signal cannot make the exit code disagree
            record = runner.run()
            if opts.quiet:
                for warning in retention.prune(output, opts.keep, current=run_dir):
                    print(f"warning: {printable(warning)}", file=sys.stderr)
            for err in errors_of(record):
                print(f"error: {printable(err.replace('harness.log', str(run_dir / 'harness.log')))}",
                      file=sys.stderr)
            if opts.prom_textfile is not None:
                _textfile(record, opts.prom_textfile)
            if not opts.quiet:
                print("\n".join(summary(record, run_dir)))
            return Finished(exit_code(record, runner.signum), record, run_dir)


def _textfile(record: RunRecord, directory: Path) -> None:
    """The run's Prometheus exposition as DIR/harness.prom (written atomically); a failure is a
    warning: the verdict stands."""
    from harness.report import prometheus as prom  # start-up: prometheus_client loads only for this

    try:
        prom.write_textfile(directory, prom.run_samples(record, record.host))
    except HarnessError as e:
        print(f"warning: prometheus textfile not written: {printable(str(e))}", file=sys.stderr)


def _trusted_store(store: Path | None) -> None:
    """UsageError when the history store (or its directory) stands where someone else can write:
    its baselines and drift rules judge the run."""
    for p in () if store is None else (store, store.parent):
        why = untrusted(p) if p.exists() else ""
        if why:
            raise UsageError(f"history store {store}: not trusted: {why}; its baselines would judge this "
                             "run: give --history off, or a store only root and you can write")


def _trusted_output(output: Path) -> None:
    """UsageError unless the output directory (made if missing) is one no one else can write: the
    run's records live there, and report, compare, export and --resume read them later
    (`--output reports` is relative to the current directory, which may be anyone's)."""
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError:
        return  # make_run_dir says why it cannot be made
    why = untrusted(output)
    if why:
        raise UsageError(f"--output {output}: not trusted: {why}; the run's results must be where no one "
                         "but root and you can write: give --output DIR")


def summary(record: RunRecord, run_dir: Path) -> list[str]:
    """The verdict, each failed or errored check with its failing rules, and the report's path; a
    tool's text in them escaped (harness.errors.printable), so it cannot repaint the verdict line."""
    c = record.counts
    lines = [f"{record.verdict}: {c['passed']} passed, {c['recorded']} recorded, {c['warned']} warned, "
             f"{c['failed']} failed, {c['errored']} errored, {c['skipped']} skipped, {c['not_run']} not run"]
    if record.verdict == "UNTESTED":
        lines += [f"  UNTESTED {why}" for why in record.untested]
    lines += [f"  {lo.text}" for lo in record.left_out if not lo.expected_by]
    for chk in record.checks:
        if chk.status.value in ("failed", "errored"):
            lines.append(f"  {fmt_status(chk.status.value)} {chk.id}: {chk.message}")
            for ev in chk.evaluations:
                if ev.outcome.value in ("fail", "error"):
                    lines.append(f"    {ev.metric}{{{join_labels(ev.labels)}}}: {ev.message}")
    lines += [f"{what} {info.get('name', '?')}: {info['from']}, {info.get('file') or info.get('path')}"
              for what, info in (("suite", record.suite), ("profile", record.profile)) if info.get("from")]
    return [printable(line) for line in (*lines, f"report: {run_dir / 'report.html'}")]
