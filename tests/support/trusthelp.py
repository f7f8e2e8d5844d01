"""Another local user's files, for the trust tests: a world-writable sticky directory (as /tmp is),
files and links planted in it as the unprivileged user 'nobody', and a tiny suite to run."""

from __future__ import annotations

import pwd
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TINY = """\
name: tiny
checks:
  - id: ok
    kind: command
    params:
      argv: [{python}, -c, "print('v: 1')"]
      metrics:
        - {{name: app.v, unit: count, better: higher, regex: 'v: (?P<value>[0-9]+)'}}
    expect:
      - {{metric: app.v, min: 1, unit: count}}
"""


def user() -> str:
    """The unprivileged user the files are planted as."""
    try:
        pwd.getpwnam("nobody")
        return "nobody"
    except KeyError:  # pragma: no cover - every Debian has nobody; make one otherwise
        subprocess.run(["useradd", "--system", "--no-create-home", "harness-test-user"], check=True)
        return "harness-test-user"


def uid() -> int:
    return pwd.getpwnam(user()).pw_uid


@contextmanager
def shared_dir(prefix: str = "harness-shared-") -> Iterator[Path]:
    """A world-writable, sticky directory anyone can reach (as /tmp is), removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    d.chmod(0o1777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def as_user(script: str, cwd: Path) -> None:
    """Run the shell `script` in `cwd` as the unprivileged user (set -e: any failure fails)."""
    subprocess.run(["sh", "-c", "set -e\n" + script], cwd=cwd, user=user(), check=True, timeout=30)


def plant(where: Path, files: dict[str, str]) -> None:
    """Write `files` (relative path -> text) under `where` as the unprivileged user."""
    q = shlex.quote
    as_user("".join(f"mkdir -p {q(str(Path(rel).parent))}\nprintf '%s' {q(text)} > {q(rel)}\n"
                    for rel, text in files.items()), where)


def link(where: Path, rel: str, target: Path) -> None:
    """A symlink `where/rel` -> `target`, made by the unprivileged user."""
    q = shlex.quote
    as_user(f"mkdir -p {q(str(Path(rel).parent))}\nln -s {q(str(target))} {q(rel)}\n", where)
