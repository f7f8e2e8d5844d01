"""tests/support/samples.py: the real samples of a folder, and the one-line coverage test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from samples import DATA, covers, real_samples, sample_names, uncovered

# mdstat's expectations are keyed by these names (test_mdstat covers the real folder with them)
MDSTAT = dict.fromkeys(sample_names("mdstat"), "expected")


def _copy(tmp_path: Path, folder: str) -> Path:
    shutil.copytree(DATA / folder, tmp_path / folder)
    return tmp_path


def test_real_samples_are_sorted_files_without_provenance() -> None:
    got = real_samples("mdstat")
    assert got and got == sorted(got)
    assert all(p.is_file() and p.parent == DATA / "mdstat" for p in got)
    assert "SOURCES.md" not in {p.name for p in got} and (DATA / "mdstat" / "SOURCES.md").exists()
    assert sample_names("mdstat") == [p.name for p in got]


def test_a_pattern_picks_some_files_and_subfolders_are_not_samples(tmp_path: Path) -> None:
    root = _copy(tmp_path, "nvidia-smi")
    (root / "nvidia-smi" / "dmon_folder.txt").mkdir()
    names = sample_names("nvidia-smi", "dmon_*.txt", root)
    assert names and all(n.startswith("dmon_") for n in names) and "dmon_folder.txt" not in names
    assert len(names) < len(sample_names("nvidia-smi", root=root))


def test_a_folder_that_matches_passes() -> None:
    assert covers(real_samples("mdstat"), MDSTAT)() is None
    assert uncovered(real_samples("mdstat"), MDSTAT) == ""


def test_a_planted_sample_without_expectations_is_named(tmp_path: Path) -> None:
    root = _copy(tmp_path, "mdstat")
    (root / "mdstat" / "mdstat_new_capture.txt").write_text("Personalities : [raid1]\n")
    test = covers(real_samples("mdstat", root=root), MDSTAT)
    with pytest.raises(AssertionError) as e:
        test()
    assert str(e.value) == ("1 sample(s) without expectations (add them to this test):\n"
                            "  mdstat_new_capture.txt")


def test_an_expectation_whose_file_is_gone_is_named(tmp_path: Path) -> None:
    root = _copy(tmp_path, "mdstat")
    gone = sorted(MDSTAT)[0]
    (root / "mdstat" / gone).rename(root / "mdstat" / "renamed.txt")
    problem = uncovered(real_samples("mdstat", root=root), MDSTAT)
    assert problem.splitlines() == [
        "1 sample(s) without expectations (add them to this test):", "  renamed.txt",
        "1 expectation(s) without a sample (file renamed or deleted?):", f"  {gone}"]


def test_several_expectation_tables_are_one_union() -> None:
    assert uncovered(["a.txt", "b.txt"], {"a.txt": 1}, {"b.txt"}) == ""
    assert "b.txt" in uncovered(["a.txt", "b.txt"], {"a.txt": 1})


def test_a_folder_or_pattern_that_finds_nothing_fails(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "SOURCES.md").write_text("only provenance\n")
    assert uncovered(real_samples("empty", root=tmp_path)) == "no samples found (wrong folder or pattern?)"
    with pytest.raises(AssertionError, match="no samples found"):
        covers(sample_names("mdstat", "*.nothing"))()


def test_expectations_are_read_when_the_test_runs() -> None:
    table: dict[str, int] = {}
    test = covers(["x.txt"], table)
    table["x.txt"] = 1  # filled after the declaration, as a module may do
    test()
