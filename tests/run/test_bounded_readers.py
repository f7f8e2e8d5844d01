"""Readers with limits (issue #26.7): a 6 GB sparse results.json is refused by `report`, `export`
and `history import` in one line naming it (the others are still imported), never read into
memory; a tool's output is held only as its last MAX_OUTPUT_BYTES, a tool that prints more than
MAX_RAW_BYTES is stopped, and a check whose output was cut where its parser needed it is
ERRORED saying so."""

from __future__ import annotations

import logging
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clihelp import QUICK_FIO, ROOT, harness, results, run_dirs, write

from harness import results as run_files
from harness.checks.base import CheckContext
from harness.errors import ToolError
from harness.platform import proc

SPARSE = 6 * 10 ** 9
MEMORY = 3 << 30  # the address space the harness gets here: far below what reading 6 GB takes


def _limited(*args: str) -> subprocess.CompletedProcess[str]:
    """`harness ARGS` with at most MEMORY of address space (the old readers died of MemoryError)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))

    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=180, preexec_fn=limit,
                          env={"PATH": "/usr/bin:/bin", "HARNESS_HISTORY": "off"})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a real run directory, a copy of it whose results.json is a 6 GB sparse file)."""
    tmp = tmp_path_factory.mktemp("bounded")
    suite = write(tmp / "quick.yaml", QUICK_FIO)
    r = harness("run", str(suite), "--profile", "generic", "--output", str(tmp / "out"), "--only",
                "inventory", env={"HARNESS_HISTORY": "off", "HARNESS_LOCK_FILE": str(tmp / "lock")})
    assert r.returncode == 0, r.stdout + r.stderr
    (good,) = run_dirs(tmp / "out")
    huge = tmp / "huge-run"
    shutil.copytree(good, huge)
    with open(huge / "results.json", "r+b") as f:
        f.truncate(SPARSE)
    return good, huge


def test_report_and_export_refuse_a_6_gb_results_json_in_one_line(runs, tmp_path: Path) -> None:
    _, huge = runs
    for args in (["report", str(huge)], ["export", str(huge), "-o", str(tmp_path / "x.csv")]):
        r = _limited(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.strip().splitlines() == [
            f"{huge / 'results.json'}:1:1: larger than 64 MiB ({SPARSE} bytes): not read"], r.stderr
    assert not (tmp_path / "x.csv").exists()


def test_history_import_names_the_huge_run_and_imports_the_others(runs, tmp_path: Path) -> None:
    good, huge = runs
    store = tmp_path / "h.sqlite"
    r = _limited("history", "import", str(huge), str(good), "--history", str(store))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "imported 1 run(s)" in r.stdout and f"{good.name}: node " in r.stdout
    assert r.stderr.strip().splitlines() == [
        f"{huge / 'results.json'}:1:1: larger than 64 MiB ({SPARSE} bytes): not read"], r.stderr


def test_every_reader_holds_to_the_one_rule_no_symlinked_results_json(runs, tmp_path: Path) -> None:
    """Issue #30: `report`, `export` and `history import` read results.json as the fleet does: a
    regular file of at most results.MAX_BYTES, not reached through a symlink (it could be one to
    a file of the reading host's)."""
    good, _ = runs
    linked = tmp_path / "linked-run"
    shutil.copytree(good, linked)
    (linked / "results.json").unlink()
    (linked / "results.json").symlink_to(good / "results.json")
    for args in (["report", str(linked)], ["export", str(linked), "-o", str(tmp_path / "x.csv")],
                 ["history", "import", str(linked), "--history", str(tmp_path / "h.sqlite")]):
        r = _limited(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.strip().splitlines() == [
            f"{linked / 'results.json'}:1:1: a symlink: not followed (a run file is read only as a "
            "regular file)"], (args, r.stderr)
    assert run_files.MAX_BYTES == 64 * 2**20  # the one cap, the fleet's too (tests/fleet/test_fleet_read.py)


def _writer(total_mib: int, pause_s: float = 0.0) -> list[str]:
    """A real tool that prints a first line, then `total_mib` MiB of text in 1 MiB writes."""
    code = ("import sys, time; out = sys.stdout.buffer; out.write(b'result 42\\n'); "
            f"[(out.write(b'x' * 1048575 + b'\\n'), out.flush(), time.sleep({pause_s})) "
            f"for _ in range({total_mib})]")
    return [sys.executable, "-c", code]


def test_only_the_tail_of_a_large_output_is_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proc, "MAX_OUTPUT_BYTES", 1 << 20)
    res = proc.run(_writer(3), tmp_path / "o", tmp_path / "e", timeout=60)
    assert res.rc == 0 and (tmp_path / "o").stat().st_size == 3 * (1 << 20) + 10  # all of it on disk
    text = res.stdout()
    assert len(text) == 1 << 20 and "result 42" not in text and text.endswith("x\n")
    assert res.cut() == [f"{tmp_path / 'o'} ({3 * (1 << 20) + 10} bytes)"]
    rc, out, _ = proc.capture_rc(_writer(3))
    assert rc == 0 and len(out) == 1 << 20


def test_a_tool_that_prints_without_end_is_stopped_at_the_raw_limit(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proc, "MAX_RAW_BYTES", 8 << 20)
    ctx = CheckContext("chatty", tmp_path, 120, False, False, {}, logging.getLogger("t"))
    with pytest.raises(ToolError, match=r"printed more than 8 MiB; stopped, process group killed"):
        ctx.run_tool(_writer(100_000, pause_s=0.005), name="chatty")
    (out,) = (tmp_path / "raw" / "chatty").glob("*.stdout")
    assert (8 << 20) < out.stat().st_size < (40 << 20)  # bounded: the limit and a tenth of a second


def test_a_value_cut_off_with_the_head_of_the_output_is_errored(tmp_path: Path) -> None:
    """80 MiB after the line the rule needs: only the last 64 MiB are read, so the check is
    ERRORED naming the cut, never judged on what was not read (and the harness stays small)."""
    suite = write(tmp_path / "chatty.yaml", f"""\
name: chatty
checks:
  - id: chatty
    kind: command
    params:
      argv: {_writer(80)!r}
      metrics:
        - {{name: app.result, unit: count, regex: "^result (?P<value>[0-9]+)"}}
""")
    r = harness("run", str(suite), "--profile", "generic", "--output", str(tmp_path / "out"),
                env={"HARNESS_HISTORY": "off"})
    assert r.returncode == 3, r.stdout + r.stderr
    doc = results(run_dirs(tmp_path / "out")[0])
    (check,) = doc["checks"]
    assert check["status"] == "errored"
    message = check["message"]
    assert message.startswith("invalid run: tool output cut: only the last 64 MiB of raw/chatty/01-"), message
    assert ".stdout (83886090 bytes) were parsed" in message


def test_a_bounded_read_takes_what_is_there_past_the_size_it_was_opened_with(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    """The read is sized by the file (not by the limit), and still whole when the file grew after
    it was opened or its size says nothing (/proc); over the limit it is refused as before."""
    from harness import fsutil

    assert fsutil.read_bounded(Path("/proc/self/cmdline"), 1 << 20) == Path("/proc/self/cmdline").read_bytes()
    path = tmp_path / "growing.json"
    path.write_bytes(b"x" * 1000)
    real = fsutil.os.fstat

    def smaller(fd: int) -> os.stat_result:  # what fstat said before the writer added 990 bytes
        st = list(real(fd))
        st[6] = 10
        return os.stat_result(st)

    monkeypatch.setattr(fsutil.os, "fstat", smaller)
    assert fsutil.read_bounded(path, 4096) == b"x" * 1000
    with pytest.raises(fsutil.TooLarge, match="larger than"):
        fsutil.read_bounded(path, 500)
