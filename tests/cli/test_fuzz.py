"""Bad command lines: unknown check ids, missing, unreadable, empty or binary files, a directory
given as a file. Always exit 2 with a message, never a traceback.

In-process through the real entry point (hypothesis, fast) and a few through a subprocess.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clihelp import QUICK_FIO, ROOT, harness, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main as cli

KNOWN_IDS = ("inventory", "fio")
COUNTS = {"argv": 0}


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    old = sys.argv
    sys.argv = ["harness", *argv]
    try:
        cli.main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = old
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cli")
    made = {"suite": write(d / "quick.yaml", QUICK_FIO), "dir": d / "a-directory", "missing": d / "nope.yaml",
            "empty": write(d / "empty.yaml", ""), "binary": d / "bin.yaml", "run-dir": d / "not-a-run"}
    made["dir"].mkdir()
    made["run-dir"].mkdir()
    made["binary"].write_bytes(bytes(range(256)) * 4)
    return made


ids = st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
               .filter(lambda s: s.strip() and "," not in s and s.strip() not in KNOWN_IDS),
               min_size=1, max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(only=ids, which=st.sampled_from(["--only", "--skip"]))
def test_unknown_check_ids(files: dict[str, Path], capsys: pytest.CaptureFixture[str], only: list[str],
                           which: str) -> None:
    COUNTS["argv"] += 1
    code, err = _main(["run", str(files["suite"]), "--profile", "generic", "--dry-run", which,
                       ",".join(only)], capsys)
    assert code == 2, err
    assert "unknown check id(s)" in err and "has: inventory, fio" in err


BAD_FILES = ["dir", "missing", "empty", "binary"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cmd=st.sampled_from(["run-suite", "run-profile", "validate", "parse", "report", "resume"]),
       bad=st.sampled_from(BAD_FILES), extra=st.sampled_from([[], ["--bogus"], ["--only"]]))
def test_bad_files_and_options(files: dict[str, Path], capsys: pytest.CaptureFixture[str], cmd: str,
                               bad: str, extra: list[str]) -> None:
    COUNTS["argv"] += 1
    path = str(files[bad])
    argv = {
        "run-suite": ["run", path, "--dry-run"],
        "run-profile": ["run", str(files["suite"]), "--profile", path, "--dry-run"],
        "validate": ["validate", path],
        "parse": ["parse", "fio", path],
        "report": ["report", str(files["run-dir"]) if bad != "missing" else path],
        "resume": ["run", "--resume", path if bad in ("dir", "missing") else str(files["run-dir"])],
    }[cmd]
    code, err = _main([*argv, *extra], capsys)
    if cmd == "parse" and bad in ("empty", "binary") and not extra:
        assert code == 2 and "not a valid fio output" in err  # valid=false is bad input, said once
        return
    assert code == 2, (argv, extra, err)
    assert err.strip() and "Traceback" not in err


def _without_dac_override() -> list[str]:
    """Run as root without the DAC capabilities, so a mode-000 file really cannot be read."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("setpriv not found (apt-get install util-linux)")
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]


def test_real_cli_bad_arguments(tmp_path: Path) -> None:
    suite = write(tmp_path / "quick.yaml", QUICK_FIO)
    locked = write(tmp_path / "locked.yaml", QUICK_FIO)
    locked.chmod(0)
    cases = [
        (["run", str(suite), "--only", "fio,nope", "--dry-run"], "unknown check id(s) nope"),
        (["run", str(tmp_path / "missing.yaml")], "missing.yaml"),
        (["run", str(tmp_path)], "is a directory, not a YAML file"),
        (["validate", str(tmp_path)], "is a directory, not a YAML file"),
        (["parse", "fio", str(tmp_path)], "is a directory"),
        (["run", "--resume", str(suite)], "is a file"),
        (["run", str(locked), "--dry-run"], "cannot read: Permission denied"),
    ]
    for argv, expect in cases:
        prefix = _without_dac_override() if "locked" in argv[1] else []
        r = subprocess.run([*prefix, sys.executable, "-m", "harness", *argv], cwd=ROOT, text=True,
                           capture_output=True, timeout=120)
        assert r.returncode == 2, (argv, r.stderr)
        assert expect in r.stderr and "Traceback" not in r.stderr, (argv, r.stderr)
    assert harness("run", str(suite), "--dry-run").returncode == 0  # the same file, readable


def test_counts_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(f"\nCLI argument fuzz inputs: {COUNTS['argv']} (+7 through a subprocess)", file=sys.stderr)
