"""What the `harness fleet` commands do, as plain functions returning exit codes.

The codes are model.EXIT_CODES of the fleet's verdict: 0 every node accepted (for --no-wait: every
job submitted); 1 a node was rejected (its hardware measured badly); 3 no node was rejected but one
errored or has no verdict yet, or a submission failed; 4 every node finished, none failed or
errored, but one is UNTESTED (it judged nothing, or skipped a check its profile expects).
Invalid input raises ConfigError/UsageError (2).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from harness import results
from harness.errors import UsageError, printable
from harness.fleet import analysis, collect, dispatch, drain, layout, pool, progress
from harness.fleet import report as fleet_report
from harness.fleet.analysis import FleetReport, OutlierSettings
from harness.fleet.collect import NodeOutcome, NodeStatus
from harness.model import EXIT_CODES, RunRecord
from harness.numfmt import fmt_value
from harness.platform.slurm import SlurmError


@dataclass(frozen=True)
class Exports:
    """Where the Prometheus exposition goes, if anywhere."""

    textfile: Path | None = None
    pushgateway: str | None = None


def run(*, suite: str, nodes: str, output: Path, profile: str | None = None,
        partition: str | None = None, account: str | None = None, time_limit: str | None = None,
        wait: bool = True, drain_failed: bool = False, start_timeout_s: float = 1800.0,
        poll_s: float = 10.0, exports: Exports = Exports(),
        settings: OutlierSettings | None = None, stream: TextIO | None = None,
        history: str | None = None, drain_unfit: bool = False) -> int:
    """`harness fleet run`: validate, submit a job per node, then (unless --no-wait) follow and report.
    `history` is every node's store (an absolute path on a shared file system, or 'off'); by default
    each node records into its own."""
    from harness import config  # start-up: a report, status or drain never loads a suite
    from harness.checks.registry import kinds  # start-up: nor the check kinds

    found = config.locate("suites", suite)  # only trusted files are sent to every node
    loaded = config.load_suite(found.path, kinds())
    history = fleet_history(history)
    sent = [("suite", loaded.suite.name, found)]
    prof = None
    if profile:
        pfound = config.locate("profiles", profile)
        lp = config.load_profile(pfound.path)
        prof = str(lp.path.resolve())
        sent.append(("profile", lp.profile.name, pfound))
    for what, name, f in sent:
        for path, why in f.refused:
            print(printable(f"warning: passed over {path}: not trusted: {why}"), file=sys.stderr)
        print(printable(f"{what} {name}: {config.where_text(what + 's', f.where)}, {f.path.resolve()}"))
    names = dispatch.expand_nodes(nodes)
    fleet_dir = output.resolve()
    opts = dispatch.JobOptions(str(loaded.path.resolve()), prof, partition, account, time_limit,
                               history=history)
    manifest = dispatch.submit(fleet_dir, loaded.suite.name, names, opts,
                               {"start_timeout_s": start_timeout_s, "drain_failed": drain_failed,
                                "drain_unfit": drain_unfit})
    ok = [n for n, j in manifest.jobs.items() if j.job_id]
    print(f"submitted {len(ok)} of {len(names)} job(s) for {dispatch.fold_nodes(names)} -> {fleet_dir}")
    for n, j in manifest.jobs.items():
        if not j.job_id:
            print(f"  ERRORED {n}: {j.submit_error}")
    if not wait:
        print(f"follow with: harness fleet status {fleet_dir}; then: harness fleet report {fleet_dir}")
        return 0 if len(ok) == len(names) else EXIT_CODES["ERRORED"]
    prog = progress.choose(len(ok), stream)
    try:
        dispatch.wait(fleet_dir, manifest, poll_s=poll_s, start_timeout_s=start_timeout_s,
                      on_poll=prog.update, on_error=lambda m: prog.note(f"slurm query failed: {m}"))
    except KeyboardInterrupt:
        prog.close()
        return _interrupted(fleet_dir, manifest, _drain_what(drain_failed, drain_unfit), exports, settings)
    finally:
        prog.close()
    return _report(fleet_dir, _drain_what(drain_failed, drain_unfit), exports, settings, poll=False)


def _drain_what(failed: bool, unfit: bool) -> str:
    return "unfit" if unfit else "failed" if failed else ""


def _interrupted(fleet_dir: Path, manifest: layout.Manifest, drain_what: str, exports: Exports,
                 settings: OutlierSettings | None) -> int:
    """Ctrl-C while following the jobs: cancel what was submitted and has not ended, say which jobs
    were cancelled or left, and report the fleet as it stands (exit 130, like a single run)."""
    print("interrupted: cancelling the fleet's jobs that have not ended (scancel by job id)", file=sys.stderr)
    done = dispatch.cancel_open(fleet_dir, manifest, "interrupted (SIGINT)")
    for n, job_id in done.cancelled.items():
        print(f"  cancelled {n}: job {job_id}", file=sys.stderr)
    for n, why in done.left.items():
        print(f"  left {n}: {why}", file=sys.stderr)
    if done.cancelled and not dispatch.await_ended(fleet_dir, manifest, list(done.cancelled)):
        print("  (some cancelled jobs had not ended yet: `harness fleet report` later shows their end)",
              file=sys.stderr)
    _report(fleet_dir, drain_what, exports, settings, poll=False)
    print(f"fleet run interrupted: {len(done.cancelled)} job(s) cancelled, {len(done.left)} left; "
          f"see {fleet_dir}", file=sys.stderr)
    return 130


def fleet_history(value: str | None) -> str | None:
    """--history for every node: 'off', or the store as an absolute path (the jobs start elsewhere)
    whose folder exists here; it should be on a file system every node mounts at the same path."""
    if value is None or not value.strip():
        return None
    if value.strip().lower() in ("off", "none", "no", "false", "0"):
        return "off"
    path = Path(value).expanduser().resolve()
    if path.is_dir():
        raise UsageError(f"--history {value}: a directory; give the store's file, e.g. {path}/history.sqlite")
    if not path.parent.is_dir():
        raise UsageError(f"--history {value}: folder {path.parent} does not exist (it must be on a file "
                         "system every node mounts at the same path)")
    return str(path)


def analyse_dir(fleet_dir: Path, poll: bool, settings: OutlierSettings | None = None,
                junit: bool = True) -> FleetReport:
    """The fleet report of a directory; with `poll`, ask Slurm for fresh job states first
    (when Slurm cannot be asked, the states saved last are used and a warning says so).

    The nodes stream: each results.json is read once and let go; what an output needs of a
    run later (the Prometheus export) is read again. Without `junit`, no junit suites are built."""
    settings = settings or OutlierSettings()
    manifest = layout.load_manifest(fleet_dir)
    seen = None
    if poll and not layout.is_volume(manifest):  # a volume's jobs are Kubernetes'
        try:
            seen = dispatch.refresh(fleet_dir, manifest)
        except SlurmError as e:
            print(f"warning: cannot ask Slurm ({e}); using the job states saved last", file=sys.stderr)
    if seen is None:
        seen = layout.load_jobs(fleet_dir)
    builder = pool.build(fleet_dir, manifest, seen, junit)
    held = frozenset(builder.with_record)

    def reload(o: NodeOutcome) -> RunRecord | None:
        return collect.reload(fleet_dir, o) if o.node in held else None

    return builder.report(suite=manifest.suite_name, profile=manifest.profile or "",
                          submitted=manifest.submitted, generated=dispatch.utcnow(), settings=settings,
                          reload=reload)


def _print_summary(rep: FleetReport) -> None:
    c = rep.counts
    parts = ", ".join(f"{v} {k.lower()}" for k, v in c.items() if v)
    print(f"{rep.verdict}: {len(rep.nodes)} node(s): {parts}; {len(rep.outlier_nodes)} outlier node(s)")
    for n in rep.nodes:
        if n.status is not NodeStatus.ACCEPTED:
            print(f"  {n.status.value:10} {n.node}: {n.reason}")
    for o in rep.outliers:
        dev = o.deviation_pct
        print(f"  {'OUTLIER':10} {o.node}: {o.key.text()} {fmt_value(o.value, o.key.unit)} vs fleet median "
              f"{fmt_value(o.median, o.key.unit)} ({'' if dev is None else f'{dev:+.1f} %, '}z {o.z:+.1f})")


def _export(fleet_dir: Path, rep: FleetReport, exports: Exports) -> None:
    if not exports.textfile and not exports.pushgateway:
        return
    from harness.platform.pushgateway import push, redact  # start-up: only when exporting
    from harness.report import prometheus as prom

    if exports.textfile is not None:
        samples = [s for n in rep.nodes for s in fleet_report.fleet_samples(rep, n.node)]
        path = prom.write_textfile(exports.textfile, samples)
        print(f"prometheus: {path}")
    if exports.pushgateway:
        for n in rep.nodes:
            samples = fleet_report.fleet_samples(rep, n.node)
            push(exports.pushgateway, prom.registry(samples), {"node": n.node})
        print(f"pushed {len(rep.nodes)} node group(s) to {redact(exports.pushgateway)}")


def _report(fleet_dir: Path, drain_what: str, exports: Exports, settings: OutlierSettings | None,
            poll: bool) -> int:
    """`drain_what`: '' drains nothing, 'failed' the rejected nodes, 'unfit' those and the errored
    and untested ones (each drain reason says which)."""
    if drain_what and not (fleet_dir / layout.MANIFEST).exists():
        raise UsageError(f"--drain-{drain_what} drains Slurm nodes; {fleet_dir} is no Slurm fleet directory "
                         "(on Kubernetes: kubectl cordon the nodes fleet.json lists under drain)")
    rep = analyse_dir(fleet_dir, poll, settings or OutlierSettings())
    paths = fleet_report.write(fleet_dir, rep)
    _print_summary(rep)
    if drain_what:
        for a in drain.drain(fleet_dir, rep.unfit if drain_what == "unfit" else rep.to_drain):
            print(f"  drained {a.node}: {a.reason}" if a.done else f"  DRAIN FAILED {a.node}: {a.message}")
    _export(fleet_dir, rep, exports)
    print(f"report: {paths['html']}")
    return EXIT_CODES[rep.verdict]


def report(fleet_dir: Path, *, drain_failed: bool = False, exports: Exports = Exports(),
           settings: OutlierSettings | None = None, drain_unfit: bool = False) -> int:
    """`harness fleet report`: poll once, then write fleet.html, fleet.json and junit.xml."""
    return _report(fleet_dir, _drain_what(drain_failed, drain_unfit), exports, settings, poll=True)


def status(fleet_dir: Path) -> int:
    """`harness fleet status`: poll once and print each node's job and state."""
    rep = analyse_dir(fleet_dir, True, OutlierSettings(), junit=False)
    for n in sorted(rep.nodes, key=lambda o: analysis.natural(o.node)):
        print(f"{n.node:16} {n.job_id or '-':>8} {n.status.value:10} {n.reason}")
    c = rep.counts
    print(", ".join(f"{v} {k.lower()}" for k, v in c.items() if v) or "no nodes")
    return EXIT_CODES[rep.verdict]


def resume(fleet_dir: Path) -> int:
    """`harness fleet resume`: resume the fleet's nodes the harness drained, and no other."""
    manifest = layout.load_manifest(fleet_dir)
    if layout.is_volume(manifest):
        raise UsageError(f"{fleet_dir} is a results volume, not a Slurm fleet: nothing was drained "
                         "(on Kubernetes: kubectl uncordon)")
    failed = 0
    for a in drain.resume(fleet_dir, list(manifest.nodes)):
        if a.action == "resume":
            print(f"resumed {a.node} (was: {a.reason})" if a.done else f"RESUME FAILED {a.node}: {a.message}")
            failed += 0 if a.done else 1
        else:
            print(f"kept {a.node}: {a.reason}")
    return EXIT_CODES["ERRORED"] if failed else 0


def export(target: Path, exports: Exports) -> int:
    """`harness fleet export`: a fleet directory or a single run directory to Prometheus."""
    if not exports.textfile and not exports.pushgateway:
        raise UsageError("give --prom-textfile PATH and/or --pushgateway URL")
    if (target / layout.MANIFEST).exists() or layout.volume_nodes(target):
        _export(target, analyse_dir(target, False, OutlierSettings()), exports)
        return 0
    from harness.platform.pushgateway import push, redact  # start-up: only when exporting
    from harness.report import prometheus as prom

    record = results.load(target)
    node = str(record.host)
    samples = prom.run_samples(record, node)
    if exports.textfile is not None:
        print(f"prometheus: {prom.write_textfile(exports.textfile, samples)}")
    if exports.pushgateway:
        push(exports.pushgateway, prom.registry(samples), {"node": node})
        print(f"pushed node {node} to {redact(exports.pushgateway)}")
    return 0
