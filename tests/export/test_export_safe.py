"""`harness export` and `harness audit capture` write through a new temporary file (O_EXCL|
O_NOFOLLOW): symlinks sprayed for the coming pids in a user's directory never redirect root's write;
CSV cells that start like a formula are neutralised; one node's many label keys cannot blow the
table up for every row."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from clihelp import harness
from report_samples import record as sample_record

from harness import results
from harness.export import write
from harness.export.rows import record_rows
from harness.model import CheckResult, Metric, Status

SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "python3"  # one she may run
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="plants files as another user: needs root")


@pytest.fixture()
def her_dir() -> Iterator[Path]:
    """A directory of the unprivileged user's, reachable by all (where root was asked to write)."""
    d = Path(tempfile.mkdtemp(prefix="harness-her-", dir="/tmp"))
    d.chmod(0o755)
    shutil.chown(d, "nobody")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def spray(d: Path, name: str, pattern: str, target: Path, n: int = 4000) -> None:
    """Her symlinks to root's file for the next `n` pids, as the temporary names used to be made
    (one process of hers makes them all, so the pids stay free for the harness)."""
    code = ("import os, sys; last = int(open('/proc/sys/kernel/ns_last_pid').read())\n"
            "for p in range(last + 1, last + int(sys.argv[1])):\n"
            "    os.symlink(sys.argv[2], sys.argv[3].format(name=sys.argv[4], pid=p))")
    subprocess.run([SYSTEM_PYTHON, "-c", code, str(n), str(target), pattern, name], cwd=d, user="nobody",
                   check=True, timeout=120)


def _secret(tmp_path: Path) -> Path:
    s = tmp_path / "shadow"
    s.write_text("root:secret\n")
    s.chmod(0o600)
    return s


@as_root
def test_export_never_writes_through_a_planted_symlink(tmp_path: Path, her_dir: Path) -> None:
    secret = _secret(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    results.write(run, sample_record())
    spray(her_dir, "out.csv", ".{name}.{pid}.tmp", secret)
    r = harness("export", str(run), "-o", str(her_dir / "out.csv"))
    assert r.returncode == 0, r.stderr
    assert secret.read_text() == "root:secret\n" and (secret.stat().st_mode & 0o777) == 0o600
    assert (her_dir / "out.csv").read_text().startswith("node,serial,run,")


@as_root
def test_audit_capture_never_writes_through_a_planted_symlink(tmp_path: Path, her_dir: Path) -> None:
    secret = _secret(tmp_path)
    spray(her_dir, "golden.yaml", ".{name}.tmp{pid}", secret)
    r = harness("audit", "capture", "-o", str(her_dir / "golden.yaml"), timeout=300)
    assert secret.read_text() == "root:secret\n" and (secret.stat().st_mode & 0o777) == 0o600
    # the profile is refused by the loader when it lies in her directory: never judged by
    assert r.returncode == 2 and "not trusted" in r.stderr, r.stdout + r.stderr
    assert not (her_dir / "golden.yaml").exists()


def test_csv_cells_that_start_like_a_formula_are_neutralised() -> None:
    rec = sample_record()
    evil = CheckResult("evil", "command", Status.PASSED, metrics=tuple(
        Metric("x", float(i), "count", {"tag": text}) for i, text in enumerate(
            ["=cmd|' /C calc'!A0", "@SUM(A1)", "+1+cmd", "-2+3", "\tTAB", "\rCR", "-5", "+7", "plain"])))
    rows = list(record_rows(replace(rec, checks=(evil,), host="=HYPERLINK(\"x\")")))
    out = io.StringIO()
    write.write_csv(lambda: iter(rows), out)
    back = list(csv.DictReader(io.StringIO(out.getvalue(), newline="")))
    got = [r["tag"] for r in back]
    assert got == ["'=cmd|' /C calc'!A0", "'@SUM(A1)", "'+1+cmd", "'-2+3", "'\tTAB", "'\rCR", "-5", "+7",
                   "plain"]
    assert {r["node"] for r in back} == {"'=HYPERLINK(\"x\")"}
    assert [r["value"] for r in back][:2] == ["0.0", "1.0"]  # numbers are not text cells


def test_one_node_with_thousands_of_label_keys_does_not_widen_every_row() -> None:
    from harness.export.rows import MAX_LABEL_COLUMNS, MORE_LABELS

    rec = sample_record()
    wide = CheckResult("wide", "command", Status.PASSED, metrics=(
        Metric("w", 1.0, "count", {f"k{i:05d}": "v" for i in range(20_000)}),))
    many = CheckResult("many", "command", Status.PASSED, metrics=tuple(
        Metric("m", float(i), "count", {"gpu": str(i % 8)}) for i in range(2000)))
    rows = list(record_rows(replace(rec, checks=(wide, many))))
    out = io.StringIO()
    assert write.write_csv(lambda: iter(rows), out) == 2001
    text = out.getvalue()
    header = text.splitlines()[0].split(",")
    assert len(header) <= 14 + MAX_LABEL_COLUMNS + 1 and MORE_LABELS in header
    assert len(text) < 2_000_000  # every row with 20,000 cells would be some 40 MB
    (w,) = [r for r in csv.DictReader(io.StringIO(text, newline="")) if r["metric"] == "w"]
    kept = [k for k in header if k.startswith("k0")]
    more = w[MORE_LABELS]
    assert len(more) < 33_000 and more.startswith("k00127=v,k00128=v,")  # gpu has a column too
    told = int(more.rsplit("(", 1)[1].split()[0])
    assert len(kept) + more.count("=") + told == 20_000  # what is left out is counted
