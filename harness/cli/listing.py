"""`harness list`: check kinds, parse kinds, suites and profiles with where each was found; with
--tools, each kind's tools and Python packages, found here or not, with the install hint.

Formatting only: the search path is config/paths', the readiness checks/readiness'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from harness.errors import printable

if TYPE_CHECKING:  # the modules themselves are imported in the command: `harness --help` stays fast
    from harness.checks.readiness import KindReadiness, NeedState
    from harness.config.paths import Found


def _found_lines(items: Sequence[Found]) -> list[str]:
    width = max((len(f.name) for f in items), default=0)
    lines = []
    for f in items:
        line = f"  {f.name:{width}}  {f.where:7}  {f.path}"
        if f.shadows:
            line += "  (hides " + ", ".join(str(p) for p in f.shadows) + ")"
        lines.append(line)
    return lines


def listing() -> str:
    """Kinds, parse kinds, then suites and profiles by name with their place and the search path."""
    # start-up: check kinds and config load only for `harness list`, not for `harness --help`
    from harness.checks.registry import kinds
    from harness.config.paths import catalogue, search_path, untrusted_files
    from harness.parsers.registry import parsers

    lines = ["check kinds:"]
    width = max(len(name) for name in kinds())
    lines += [f"  {k.name:{width}} {k.description}" for k in kinds().values()]
    lines += ["parse kinds:", "  " + ", ".join(sorted(parsers()))]
    for what in ("suites", "profiles"):
        lines += [f"{what}:", *_found_lines(catalogue(what))]
        lines += [printable(f"  passed over (not trusted): {p}: {why}") for p, why in untrusted_files(what)]
    for what in ("suites", "profiles"):
        lines += [f"{what[:-1]} search path (first found wins):"]
        lines += [f"  {p.where:7}  {p.path}" + ("" if p.path.is_dir() else "  (absent)")
                  for p in search_path(what)]
    return "\n".join(lines)


def _state(s: NeedState) -> str:
    p = s.presence
    if not p.found:
        return "missing"
    return "found " + (p.version or "(version unknown)")


def tools_listing(report: Sequence[KindReadiness]) -> str:
    """Per kind: READY or NOT READY, then each need: found (version) or missing, when used, how to install."""
    names = [s.need.name for r in report for s in r.needs]
    width = max((len(n) for n in names), default=8)
    lines = []
    for r in report:
        verdict = "ready" if r.ready else "NOT READY"
        lines.append(f"{r.kind}: {verdict}" + ("" if r.needs else " (runs no tool of its own)"))
        for s in r.needs:
            use = s.need.use or "always"
            if s.need.group:
                use += f"; one {s.need.group} is enough"
            line = f"  {s.need.name:{width}}  {_state(s):26}  {use}"
            lines.append(line)
            if s.presence.note and s.presence.found:
                lines.append(f"  {'':{width}}  {s.presence.note}")
            if not s.presence.found:
                lines.append(f"  {'':{width}}  install: {s.need.hint}")
    ready = sum(r.ready for r in report)
    lines.append(f"{ready} of {len(report)} check kinds ready on this machine")
    return "\n".join(lines)


@click.command("list")
@click.option("--tools", is_flag=True,
              help="for each check kind: the tools and Python packages it needs, found here (version) "
                   "or missing, and how to install them")
def list_cmd(tools: bool) -> None:
    """List check kinds, parse kinds, suites and profiles (and where each was found)."""
    if tools:
        # start-up: check kinds load only for `harness list`, not for `harness --help`
        from harness.checks.readiness import readiness
        from harness.checks.registry import kinds

        click.echo(tools_listing(readiness(kinds())))
        return
    click.echo(listing())
