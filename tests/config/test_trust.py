"""What another local user writes is never run or judged by: suites, profiles and the output
directory are trusted only when owned by root or this user and writable by no one else, every
directory above them included (issue: trusted search paths).

The attacks run as root, with files planted by the unprivileged user 'nobody' in a world-writable
directory (as /tmp is), through the real `harness` command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from clihelp import ROOT, harness, run_dirs
from trusthelp import TINY, link, plant, shared_dir, uid, user

from harness.config import paths
from harness.config.loader import load_profile
from harness.errors import ConfigError
from harness.fsutil import untrusted

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="plants files as another user: needs root")

EVIL = """\
name: {name}
checks:
  - id: pwn
    kind: command
    params:
      argv: [sh, -c, "id > {proof}"]
"""


@pytest.fixture()
def shared() -> Iterator[Path]:
    """A world-writable, sticky directory anyone can reach (as /tmp is), removed afterwards."""
    with shared_dir() as d:
        yield d


def env_for(tmp_path: Path) -> dict[str, str]:
    """No search path of the caller's: an empty configuration directory, no $HARNESS_*_PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), PYTHONPATH=str(ROOT))
    return env


def cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=180)


@as_root
def test_a_planted_suite_and_profile_are_passed_over_and_named(shared: Path, tmp_path: Path) -> None:
    proof = shared / "proof"
    plant(shared, {"suites/smoke.yaml": EVIL.format(name="smoke", proof=proof),
                   "profiles/generic.yaml": "name: generic\nexpectations: []\n",
                   "profiles/broken.yaml": "name: [\n"})
    r = cli("run", "--dry-run", cwd=shared, env=env_for(tmp_path))
    assert r.returncode == 0, r.stderr
    shipped_smoke = paths.package_dir("suites") / "smoke.yaml"
    assert f"suite   smoke  (shipped: {shipped_smoke})" in r.stdout
    assert f"profile generic  (shipped: {paths.package_dir('profiles') / 'generic.yaml'}" in r.stdout
    for planted in ("suites/smoke.yaml", "profiles/generic.yaml", "profiles/broken.yaml"):
        assert (f"warning: passed over {shared / planted}: not trusted: {shared / planted} is owned by "
                f"uid {uid()} ({user()})") in r.stderr
    assert "pwn" not in r.stdout and not proof.exists()


@as_root
def test_a_planted_suite_never_runs_by_name_or_by_path(shared: Path, tmp_path: Path) -> None:
    proof = shared / "proof"
    plant(shared, {"suites/plant.yaml": EVIL.format(name="plant", proof=proof),
                   "mine.yaml": EVIL.format(name="mine", proof=proof)})
    env = env_for(tmp_path)
    r = cli("run", "plant", "--profile", "generic", "--output", str(tmp_path / "out"), cwd=shared, env=env)
    assert r.returncode == 2 and "suite 'plant' not found; searched: " in r.stderr
    assert f"passed over {shared / 'suites/plant.yaml'}: not trusted" in r.stderr
    r = cli("run", str(shared / "mine.yaml"), "--profile", "generic", "--output", str(tmp_path / "out"),
            cwd=tmp_path, env=env)
    assert r.returncode == 2 and f"suite file '{shared / 'mine.yaml'}' is not trusted: " in r.stderr
    assert not proof.exists()
    # --profile NAME takes no planted profile either, and one given as a path is refused
    plant(shared, {"profiles/h100-sxm-8x.yaml": "name: h100-sxm-8x\nexpectations: []\n"})
    r = cli("run", "--dry-run", "--profile", "h100-sxm-8x", cwd=shared, env=env)
    assert r.returncode == 0 and f"(shipped: {paths.package_dir('profiles') / 'h100-sxm-8x.yaml'}" in r.stdout
    r = cli("run", "--dry-run", "--profile", str(shared / "profiles/h100-sxm-8x.yaml"), cwd=shared, env=env)
    assert r.returncode == 2 and "is not trusted: " in r.stderr


def test_a_bare_file_is_never_taken_for_a_name(tmp_path: Path) -> None:
    """`./smoke` (even one's own) is not the default suite, nor `./generic` the profile generic."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "smoke").write_text(EVIL.format(name="smoke", proof=tmp_path / "proof"))
    (work / "generic").write_text("name: generic\nexpectations: []\n")
    r = cli("run", "--dry-run", "--profile", "generic", cwd=work, env=env_for(tmp_path))
    assert r.returncode == 0, r.stderr
    assert f"suite   smoke  (shipped: {paths.package_dir('suites') / 'smoke.yaml'})" in r.stdout
    assert f"(shipped: {paths.package_dir('profiles') / 'generic.yaml'}" in r.stdout
    # a file named with its extension is a path, as before
    (work / "tiny.yaml").write_text(TINY.format(python=sys.executable))
    r = cli("run", "--dry-run", "tiny.yaml", "--profile", "generic", cwd=work, env=env_for(tmp_path))
    assert r.returncode == 0 and "suite   tiny  (given as a path: tiny.yaml)" in r.stdout


def test_one_broken_profile_of_ones_own_does_not_stop_auto_selection(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "profiles").mkdir(parents=True)
    (work / "profiles" / "aaa.yaml").write_text("name: [\n")
    r = cli("run", "--dry-run", cwd=work, env=env_for(tmp_path))
    assert r.returncode == 0, r.stderr
    assert f"warning: profile {work / 'profiles/aaa.yaml'} left out of auto-selection: " in r.stderr
    assert "profile generic  (shipped: " in r.stdout


@as_root
def test_an_output_directory_someone_else_can_write_is_refused(shared: Path, tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY.format(python=sys.executable))
    plant(shared, {"reports/planted": ""})  # her `reports` in the shared directory
    env = env_for(tmp_path)
    r = cli("run", str(tmp_path / "tiny.yaml"), "--profile", "generic", cwd=shared, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"--output reports: not trusted: {shared / 'reports'} is owned by uid " in r.stderr
    assert os.listdir(shared / "reports") == ["planted"]  # no run in it
    # a directory anyone may write (even sticky) is no output directory either
    r = cli("run", str(tmp_path / "tiny.yaml"), "--profile", "generic", "--output", str(shared),
            cwd=tmp_path, env=env)
    assert r.returncode == 2 and "is writable by others (mode 1777)" in r.stderr
    # a history store in her directory would judge the run by her baselines
    plant(shared, {"hers/history.sqlite": ""})
    r = cli("run", str(tmp_path / "tiny.yaml"), "--profile", "generic", "--output", str(tmp_path / "out"),
            "--history", str(shared / "hers/history.sqlite"), cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"history store {shared / 'hers/history.sqlite'}: not trusted: " in r.stderr
    # in the shared (sticky) directory, a `reports` root makes itself is its own: the run goes on
    shutil.rmtree(shared / "reports")
    r = cli("run", str(tmp_path / "tiny.yaml"), "--profile", "generic", "--history", "off", cwd=shared,
            env=env)
    assert r.returncode == 0, r.stdout + r.stderr


@as_root
def test_another_users_symlink_steers_no_output_and_no_suite(shared: Path, tmp_path: Path) -> None:
    """Her `reports` -> a directory of root's, her `tiny.yaml` -> root's own suite: each target is
    root's, but the link is hers (she chooses where root writes, and could turn it
    elsewhere after the check): refused, naming the link, and nothing lands behind it."""
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY.format(python=sys.executable))
    roots = tmp_path / "roots-own"
    roots.mkdir()
    link(shared, "reports", roots)
    link(shared, "tiny.yaml", suite)
    env = env_for(tmp_path)
    r = cli("run", str(suite), "--profile", "generic", "--history", "off", cwd=shared, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert (f"--output reports: not trusted: {shared / 'reports'} is a symlink owned by uid {uid()} "
            f"({user()})") in r.stderr
    r = cli("run", str(shared / "tiny.yaml"), "--profile", "generic", "--output", str(tmp_path / "out"),
            "--history", "off", cwd=tmp_path, env=env)
    assert r.returncode == 2 and f"{shared / 'tiny.yaml'} is a symlink owned by uid {uid()}" in r.stderr
    assert os.listdir(roots) == []
    # root's own link to root's own directory is followed as before
    (tmp_path / "mine").symlink_to(roots)
    r = cli("run", str(suite), "--profile", "generic", "--output", str(tmp_path / "mine"), "--history", "off",
            cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(run_dirs(roots)) == 1


def test_the_summary_results_and_report_say_where_suite_and_profile_came_from(tmp_path: Path) -> None:
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY.format(python=sys.executable))
    out = tmp_path / "out"
    r = cli("run", str(suite), "--profile", "generic", "--output", str(out), "--history", "off",
            cwd=tmp_path, env=env_for(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    generic = paths.package_dir("profiles") / "generic.yaml"
    assert f"suite tiny: given as a path, {suite}" in r.stdout
    assert f"profile generic: shipped, {generic}" in r.stdout
    (run_dir,) = run_dirs(out)
    doc = json.loads((run_dir / "results.json").read_text())
    assert (doc["suite"]["from"], doc["profile"]["from"]) == ("given as a path", "shipped")
    html = (run_dir / "report.html").read_text()
    assert "(given as a path)" in html and "(shipped)" in html


def test_a_profile_extending_an_untrusted_parent_is_refused(tmp_path: Path) -> None:
    parent = tmp_path / "base.yaml"
    parent.write_text("name: base\nexpectations: []\n")
    parent.chmod(0o666)  # anyone may rewrite it
    child = tmp_path / "child.yaml"
    child.write_text("name: child\nextends: base\nexpectations: []\n")
    with pytest.raises(ConfigError, match=r"profile 'base' \(extended by 'child'\) is not trusted: .* is "
                                          r"writable by others \(mode 666\)"):
        load_profile(child)


def test_untrusted_names_the_first_bad_link_and_accepts_a_sticky_ancestor(tmp_path: Path) -> None:
    from harness.fsutil import untrusted

    d = tmp_path / "a" / "b"
    d.mkdir(parents=True)
    f = d / "x.yaml"
    f.write_text("")
    assert untrusted(f) == ""
    (tmp_path / "a").chmod(0o777)
    assert untrusted(f) == f"{tmp_path / 'a'} is writable by others (mode 777)"
    (tmp_path / "a").chmod(0o1777)
    assert untrusted(f) == ""  # sticky: no one else may replace b, which is this user's
    assert untrusted(tmp_path / "a") == f"{tmp_path / 'a'} is writable by others (mode 1777)"
    (tmp_path / "link.yaml").symlink_to(f)
    assert untrusted(tmp_path / "link.yaml") == ""  # judged where it leads
    f.chmod(0o620)
    assert untrusted(tmp_path / "link.yaml") == f"{f} is writable by others (mode 620)"


def test_the_shipped_suites_are_found_by_harness_from_anywhere() -> None:
    r = harness("run", "--dry-run", "quick", "--profile", "generic", cwd=Path("/"))
    assert r.returncode == 0 and "(shipped: " in r.stdout, r.stderr


@as_root
def test_harness_list_names_what_it_passes_over(shared: Path, tmp_path: Path) -> None:
    plant(shared, {"profiles/generic.yaml": "name: generic\nexpectations: []\n"})
    r = cli("list", cwd=shared, env=env_for(tmp_path))
    assert r.returncode == 0, r.stderr
    assert f"  passed over (not trusted): {shared / 'profiles/generic.yaml'}: " in r.stdout
    generic = next(line for line in r.stdout.splitlines() if line.strip().startswith("generic "))
    assert "package" in generic


@as_root
def test_a_foreign_link_anywhere_in_a_chain_of_links_is_found(tmp_path: Path) -> None:
    """root's link -> her link -> root's directory: the link in the middle is named; a link to
    itself ends after 40 hops."""
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "hers").symlink_to(tmp_path / "real" / "sub")
    os.lchown(tmp_path / "hers", uid(), -1)
    (tmp_path / "mine").symlink_to("hers")
    assert untrusted(tmp_path / "mine" / "x") == (f"{tmp_path / 'hers'} is a symlink owned by uid {uid()} "
                                                 f"({user()}), not by root or uid 0 (root)")
    os.lchown(tmp_path / "hers", 0, -1)
    assert untrusted(tmp_path / "mine") == ""
    (tmp_path / "loop").symlink_to("loop")
    assert "more than 40 symlinks" in untrusted(tmp_path / "loop")
