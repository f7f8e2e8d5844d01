"""No module writes labels by hand: `",".join(f"{k}={v}" ...)` copies are model.join_labels' job."""

from __future__ import annotations

import re
from pathlib import Path

HARNESS = Path(__file__).resolve().parent.parent / "harness"
INLINE = re.compile(r"""["'],["']\.join\(\s*f["']\{\w+\}=\{\w+\}["']""")
# model.join_labels itself; fleet/html.py is being rewritten with the rest of fleet/ (its copy goes then)
ALLOWED = {"model.py", "fleet/html.py"}


def inline_joins(root: Path) -> list[str]:
    """`path:line` of every hand-written 'k=v,k=v' join under root."""
    found = []
    for p in sorted(root.rglob("*.py")):
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if INLINE.search(line):
                found.append(f"{p.relative_to(root).as_posix()}:{n}")
    return found


def test_labels_are_joined_by_join_labels_only() -> None:
    found = [f for f in inline_joins(HARNESS) if f.rsplit(":", 1)[0] not in ALLOWED]
    assert not found, "use harness.model.join_labels:\n  " + "\n  ".join(found)


def test_a_planted_copy_is_found(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text('a = ",".join(f"{k}={v}" for k, v in d.items())\n'
                                   "b = ' '.join(f'{k}={v}' for k, v in env.items())  # env, not labels\n"
                                   "c = ','.join(f'{name}={value}' for name, value in pairs)\n")
    assert inline_joins(tmp_path) == ["x.py:1", "x.py:3"]
