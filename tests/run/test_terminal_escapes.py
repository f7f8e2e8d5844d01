"""A hostile tool's ESC, NUL and fake verdict text reach no terminal raw: the summary, the progress
lines and the --quiet line escape them (harness.errors.printable), and '|' in a tool's text cannot
add a part of its own to the --quiet line."""

from __future__ import annotations

import io
from pathlib import Path

from clihelp import harness, write

from harness.errors import printable
from harness.model import CheckResult, Status
from harness.run.progress import PlainProgress

HOSTILE = r"\033[2J\033[H\033[32mACCEPTED\000 | FAILED gpu-burn: GPU 3 FAULTY\n"
SUITE = f"""\
name: hostile
checks:
  - id: liar
    kind: command
    params:
      argv: [sh, -c, 'printf "{HOSTILE}" >&2; exit 1']
"""


def _run(tmp_path: Path, *extra: str):
    suite = write(tmp_path / "hostile.yaml", SUITE)
    return harness("run", str(suite), "--profile", "generic", "--output", str(tmp_path / "out"), *extra,
                   env={"HARNESS_HISTORY": "off", "HARNESS_LOCK_FILE": str(tmp_path / "lock")})


def test_the_summary_and_progress_escape_control_characters(tmp_path: Path):
    r = _run(tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    for stream in (r.stdout, r.stderr):
        assert "\x1b" not in stream and "\x00" not in stream
    assert r.stdout.splitlines()[0].startswith("ERRORED: 0 passed")
    errored = next(ln for ln in r.stdout.splitlines() if ln.startswith("  ERRORED liar:"))
    assert "\\x1b[2J\\x1b[H\\x1b[32mACCEPTED\\x00 | FAILED gpu-burn" in errored
    assert "\\x1b[2J" in r.stderr  # the progress line of the check, escaped too


def test_the_quiet_line_cannot_gain_a_fake_part(tmp_path: Path):
    r = _run(tmp_path, "--quiet")
    assert r.returncode == 3, r.stdout + r.stderr
    (line,) = r.stdout.splitlines()
    assert "\x1b" not in line and "\x00" not in line
    parts = line.split(" | ")
    assert parts[0] == "harness: ERRORED: 0 passed, 1 errored"
    assert parts[1].startswith("ERRORED liar: ") and "\\| FAILED gpu-burn: GPU 3 FAULTY" in parts[1]
    assert not any(p.startswith("FAILED") for p in parts)  # the tool's text added no part
    assert parts[2].startswith("report ")


def test_plain_progress_escapes_a_check_message_and_a_note():
    out = io.StringIO()
    p = PlainProgress(out)
    p.start("s", "p", 1, "/r")
    p.note("tool says \x1b]0;pwned\x07 hi")
    p.check_finished(CheckResult("c", "command", Status.ERRORED, "bad\rACCEPTED\x00\x9b2J"))
    text = out.getvalue()
    assert not any(ch in text for ch in "\x1b\x07\r\x00\x9b")
    assert "tool says \\x1b]0;pwned\\x07 hi" in text and "bad\\rACCEPTED\\x00\\x9b2J" in text


def test_printable_keeps_text_and_escapes_the_rest():
    assert printable("GPU 3: 71 °C, µs, 日本") == "GPU 3: 71 °C, µs, 日本"
    assert printable("a\nb\tc\x1b[0m\x00\u202eevil\U000e0001") == \
        "a\\nb\\tc\\x1b[0m\\x00\\u202eevil\\U000e0001"
