"""`harness audit capture`: thin like cli.py; the work is in harness.audit.capture."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def audit() -> None:
    """Software and configuration audit (golden config)."""


@audit.command("capture")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="profile file to write, e.g. profiles/site-golden.yaml")
@click.option("--extends", help="profile the golden config extends, e.g. generic or h100-sxm-8x")
@click.option("--name", help="profile name (default: the output file's name without .yaml)")
@click.option("--force", is_flag=True, help="replace the output file if it exists")
def capture(output: Path, extends: str | None, name: str | None, force: bool) -> None:
    """Write this node's facts as a profile whose config: rules it passes.

    Exit status 1 when the node fails a fail-level rule of the --extends profile (it stays in force:
    the node is not golden); the file is still written, its header naming those rules.
    """
    from harness.audit.capture import capture_to  # start-up: the audit loads only for this command

    path, n, refused, failing = capture_to(output, name=name, extends=extends, force=force)
    for why in refused:
        click.echo(f"warning: not captured: {why}", err=True)
    for why in failing:
        click.echo(f"error: this node fails {extends}'s rule, which stays in force: {why}", err=True)
    if failing:  # exit 1, as the config audit of a run with this profile would REJECT this node
        click.echo(f"{path}: {n} config rules, but NOT a golden node: it fails {len(failing)} rule(s) of "
                   f"{extends} that stay in force; fix the node, then capture again")
        raise SystemExit(1)
    also = f", as does every fail-level rule of {extends}" if extends else ""
    click.echo(f"{path}: {n} config rules, every one passes here{also}; check another node with: "
               f"harness run quick --profile {path}")
