"""--dry-run names, under each check the profile expects a measurement from, the rule that expects it."""

from __future__ import annotations

from pathlib import Path

from clihelp import harness, write

SUITE = """\
name: s
checks:
  - {id: inventory, kind: inventory}
  - {id: nvme-health, kind: nvme_health}
  - {id: scratch, kind: fio, params: {jobs: [{name: r, rw: read, size: 1M, runtime: 1}]},
     expect: [{metric: fio.bw, min: 0.001, unit: GB/s}]}
"""
PROFILE = """\
name: sku
hardware: {nvme_count: 4}
expectations:
  - {metric: fio.bw, check: scratch, labels: {job: r}, min: 0.01, unit: GB/s}
  - {metric: nvme.media_errors, check: nvme-health, max: 0, unit: count, if_measured: true}
"""
LINE = "   expected by the profile: "


def sections(out: str) -> dict[str, list[str]]:
    """The dry run's lines under each numbered check header, by check id."""
    got: dict[str, list[str]] = {}
    current: list[str] = []
    for line in out.splitlines():
        if line[:1].isdigit() and ". " in line:
            current = got.setdefault(line.split(". ", 1)[1].split()[0], [])
        else:
            current.append(line)
    return got


def test_each_expected_check_shows_the_rule_and_what_a_skip_means(tmp_path: Path) -> None:
    suite, profile = write(tmp_path / "s.yaml", SUITE), write(tmp_path / "p.yaml", PROFILE)
    r = harness("run", str(suite), "--profile", str(profile), "--dry-run", "--output", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    got = sections(r.stdout)
    assert set(got) == {"inventory", "nvme-health", "scratch"}
    expected = {k: [ln for ln in v if ln.startswith(LINE)] for k, v in got.items()}
    assert expected["nvme-health"] == [
        f"{LINE}nvme.count >= 4  [sku (hardware)]; if it is skipped or left out, the run is UNTESTED"]
    assert expected["inventory"] == [
        f"{LINE}host.nvme_count >= 4  [sku (hardware)]; if it is skipped or left out, the run is UNTESTED"]
    assert expected["scratch"] == [
        f"{LINE}fio.bw{{job=r}} >= 10 MB/s  [sku]; if it is skipped or left out, the run is UNTESTED"]
    assert got["scratch"][0].startswith(LINE)  # right under the check's header
    assert not (tmp_path / "o").exists()  # a dry run writes nothing


def test_no_line_where_the_profile_expects_nothing(tmp_path: Path) -> None:
    """Metric-only and if_measured rules expect nothing: no line, as plan.expected_by is ''."""
    suite = write(tmp_path / "s.yaml", SUITE)
    profile = write(tmp_path / "p.yaml", "name: loose\nexpectations:\n"
                    "  - {metric: nvme.media_errors, max: 0, unit: count}\n"
                    "  - {metric: fio.bw, check: scratch, min: 0.01, unit: GB/s, if_measured: true}\n")
    r = harness("run", str(suite), "--profile", str(profile), "--dry-run", "--output", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    assert "expected by the profile" not in r.stdout and "fio.bw" in r.stdout
