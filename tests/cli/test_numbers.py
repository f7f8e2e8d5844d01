"""Issue #16 (numbers and units) and #20 (absurd sizes) through the real command line: what a
person writes in a suite or profile means what fio and a reader would take it to mean, and what
cannot be read is one FILE:LINE:COL problem with exit 2, never a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write

SUITE = """\
name: nums
checks:
  - id: fio
    kind: fio
    params:
      jobs:
        - {name: r4k, rw: randread, bs: 4KB, iodepth: 4, size: 4M, runtime: 1s}
    expect:
      - {metric: fio.iops, labels: {job: r4k}, reference: 72000, lower: 15%, unit: IOPS}
      - {metric: fio.bw, labels: {job: r4k}, min: 1, unit: MB/s}
      - {metric: fio.clat_p99, labels: {job: r4k}, max: 2s, unit: ms}
"""

PROFILE = """\
name: nump
hardware:
  memory_min_bytes: 1GiB
config:
  - {fact: host.shm_bytes, min: 1M}
"""


def test_sizes_durations_percents_and_units_mean_what_they_say(tmp_path: Path) -> None:
    suite, profile = write(tmp_path / "s.yaml", SUITE), write(tmp_path / "p.yaml", PROFILE)
    r = harness("validate", str(suite), str(profile))
    assert r.returncode == 0, r.stderr
    r = harness("run", str(suite), "-p", str(profile), "--dry-run", "-o", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    assert "--bs=4096 " in r.stdout and "--runtime=1 " in r.stdout  # fio reads 4KB as 4096 too
    assert ">= 61,200 IOPS" in r.stdout  # 15% below 72,000, not a band that never fails
    assert ">= 1 MB/s" in r.stdout and "<= 2 s" in r.stdout  # 1 MB/s and 2 s kept their meaning


def test_a_real_run_with_4kb_blocks(tmp_path: Path) -> None:
    """`bs: 4KB` once became --bs=4000 and the run errored; now fio runs 4096-byte reads."""
    suite = write(tmp_path / "s.yaml", SUITE.replace("reference: 72000, lower: 15%", "min: 1"))
    r = harness("run", str(suite), "-p", str(write(tmp_path / "p.yaml", PROFILE)), "-o",
                str(tmp_path / "o"), "--history", "off")
    assert r.returncode in (0, 1), r.stderr  # judged either way; never errored
    (run_dir,) = run_dirs(tmp_path / "o")
    (check,) = results(run_dir)["checks"]
    assert check["status"] in ("passed", "failed"), check
    job = (run_dir / "raw").rglob("fio.json")
    assert any('"bs" : "4096"' in p.read_text() or '"bs": "4096"' in p.read_text() for p in job)


def _located(stderr: str, path: Path, line: int, words: str) -> bool:
    """Whether stderr has a FILE:LINE:COL problem at `line` of `path` saying `words`."""
    return bool(re.search(rf"^{re.escape(str(path))}:{line}:\d+: .*{re.escape(words)}", stderr, re.M))


BAD = [
    ("bs: 4k", 'bs: "inf"', "not a size: 'inf'"),
    ("size: 4M", 'size: "1e300P"', "not a size: '1e300P'"),
    ("runtime: 1s", "runtime: 10x", "not a duration: '10x'"),
    ("lower: 15%", "lower: 15", "write 15% for 15 percent, or 0.15 as a fraction"),
    ("min: 1, unit: MB/s", "min: 9 W, unit: MB/s", "'9 W' is in W, not GB/s"),
]


@pytest.mark.parametrize(("good", "bad", "words"), BAD)
def test_unreadable_numbers_in_a_suite_are_located(tmp_path: Path, good: str, bad: str, words: str) -> None:
    text = SUITE.replace("bs: 4KB", "bs: 4k")
    assert good in text
    suite = write(tmp_path / "s.yaml", text.replace(good, bad))
    line = next(i for i, ln in enumerate(suite.read_text().splitlines(), 1) if bad in ln)
    for args in (["validate", str(suite)], ["run", str(suite), "-o", str(tmp_path / "o")]):
        r = harness(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert _located(r.stderr, suite, line, words), r.stderr


@pytest.mark.parametrize(("good", "bad", "words"), [
    ("memory_min_bytes: 1GiB", "memory_min_bytes: infG", "not a size: 'infG'"),
    ("min: 1M}", 'min: "infG"}', "expected a number or a size such as '1GiB', got 'infG'"),
    ("min: 1M}", "one_of: [disabled, no]}", "'no' is the string 'no' in YAML 1.2 but false in YAML 1.1"),
    ("min: 1M}", "equals: off}", "'off' is the string 'off' in YAML 1.2 but false"),
    ("min: 1M}", "min: 010}", "'010' is 10 in YAML 1.2 but octal 8 in YAML 1.1"),
])
def test_unreadable_numbers_in_a_profile_are_located(tmp_path: Path, good: str, bad: str, words: str) -> None:
    assert good in PROFILE
    profile = write(tmp_path / "p.yaml", PROFILE.replace(good, bad))
    line = next(i for i, ln in enumerate(profile.read_text().splitlines(), 1) if bad in ln)
    r = harness("validate", str(profile))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert _located(r.stderr, profile, line, words), r.stderr
