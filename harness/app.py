"""What the CLI commands do, as plain functions: load, plan, run, print the verdict."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, ConfigProblem, UsageError


def run(*, suite: str | None, profile: str | None, output: Path, only: Sequence[str] = (),
        skip: Sequence[str] = (), dry_run: bool = False, allow_destructive: bool = False,
        argv: tuple[str, ...] = (), inventory_probe: Callable[[], Mapping[str, Any]] | None = None,
        ) -> int:
    """`harness run`: returns the exit code."""
    from harness import config, plan, progress
    from harness.platform import sysinfo
    from harness.runner import RunContext, Runner, exit_code, make_run_dir

    loaded = config.load_suite(config.find_suite(suite or "smoke"))
    checks = plan.select_checks(loaded, only, skip)  # argument errors before any work
    inventory = dict(inventory_probe() if inventory_probe else sysinfo.collect())
    if profile:
        prof = config.load_profile(profile)
        reason = "given with --profile"
    else:
        candidates = [config.load_profile(p) for p in config.list_profiles()]
        name, reason = plan.select_profile(inventory, candidates)
        prof = next((c for c in candidates if c.profile.name == name), None) or config.load_profile(name)
    planned = plan.build(loaded, prof, only, skip)
    assert len(planned) == len(checks)
    if dry_run:
        print(plan.render_dry_run(loaded, prof, reason, planned, inventory, allow_destructive))
        return 0
    host = str(inventory.get("host", {}).get("hostname") or "host")
    run_dir = make_run_dir(output, host)
    ctx = RunContext(
        run_dir=run_dir,
        suite_info={"name": loaded.suite.name, "path": str(loaded.path),
                    "description": loaded.suite.description},
        profile_info={"name": prof.profile.name, "path": str(prof.path), "reason": reason,
                      "chain": list(prof.chain)},
        inventory=inventory, gpu_expectation=plan.gpu_expectation_text(prof.profile),
        allow_destructive=allow_destructive, argv=argv, progress=progress.choose(),
    )
    runner = Runner(planned, ctx)
    record = runner.run()
    c = record.counts
    print(f"{record.verdict}: {c['passed']} passed, {c['warned']} warned, {c['failed']} failed, "
          f"{c['errored']} errored, {c['skipped']} skipped, {c['not_run']} not run")
    for chk in record.checks:
        if chk.status.value in ("failed", "errored"):
            print(f"  {chk.status.value.upper()} {chk.id}: {chk.message}")
            for ev in chk.evaluations:
                if ev.outcome.value in ("fail", "error"):
                    labels = ",".join(f"{k}={v}" for k, v in ev.labels.items())
                    print(f"    {ev.metric}{{{labels}}}: {ev.message}")
    print(f"report: {run_dir / 'report.html'}")
    return exit_code(record, runner.signum)


def parse_file(kind: str, file: Path) -> dict[str, Any]:
    """`harness parse KIND FILE` as a dict."""
    from harness.parsers.registry import parsers

    table = parsers()
    if kind not in table:
        import difflib

        near = difflib.get_close_matches(kind, table, n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise UsageError(f"unknown parse kind '{kind}'{hint}; known: {', '.join(sorted(table))}")
    try:
        text = file.read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        raise ConfigError([ConfigProblem(str(file), 1, 1, f"cannot read: {e.strerror}")]) from e
    return table[kind](text).to_dict()


def listing() -> str:
    """`harness list`: check kinds, parse kinds, suites and profiles."""
    from harness import config
    from harness.checks.registry import kinds
    from harness.parsers.registry import parsers

    lines = ["check kinds:"]
    lines += [f"  {k.name:12} {k.description}" for k in kinds().values()]
    lines += ["parse kinds:", "  " + ", ".join(sorted(parsers()))]
    lines += ["suites:"] + [f"  {p.stem:20} {p}" for p in config.list_suites()]
    lines += ["profiles:"] + [f"  {p.stem:20} {p}" for p in config.list_profiles()]
    return "\n".join(lines)


