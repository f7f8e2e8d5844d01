"""The suite/profile search path: env, ./, the user's and the system's directories, then the package."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.config import paths
from harness.config.paths import catalogue, find_suite, search_path, user_dir


@pytest.fixture()
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Five places, each with a smoke.yaml, and the cwd elsewhere."""
    d = {w: tmp_path / w for w in ("env", "cwd", "xdg", "etc")}
    (d["env"] / "suites").mkdir(parents=True)
    for w in ("cwd", "etc"):
        (d[w] / "suites").mkdir(parents=True)
    (d["xdg"] / "harness" / "suites").mkdir(parents=True)
    for w, sub in (("env", "suites"), ("cwd", "suites"), ("xdg", "harness/suites"), ("etc", "suites")):
        (d[w] / sub / "smoke.yaml").write_text(f"# {w}\n")
    monkeypatch.setenv("HARNESS_SUITES_PATH", str(d["env"] / "suites"))
    monkeypatch.chdir(d["cwd"])
    monkeypatch.setenv("XDG_CONFIG_HOME", str(d["xdg"]))
    monkeypatch.setattr(paths, "SYSTEM_DIR", d["etc"])
    return d


def test_the_order_is_env_cwd_user_system_package(places: dict[str, Path]) -> None:
    assert [p.where for p in search_path("suites")] == ["env", "cwd", "user", "system", "package"]
    assert find_suite("smoke") == places["env"] / "suites" / "smoke.yaml"
    (smoke,) = [f for f in catalogue("suites") if f.name == "smoke"]
    assert smoke.where == "env"
    # it hides the four others, the shipped one last
    assert [p.parent.parent.name for p in smoke.shadows[:3]] == ["cwd", "harness", "etc"]
    assert smoke.shadows[3] == paths.package_dir("suites") / "smoke.yaml"


@pytest.mark.parametrize(("drop", "winner"), [("env", "cwd"), ("cwd", "xdg"), ("xdg", "etc")])
def test_each_place_wins_when_the_ones_before_it_lack_the_name(places, drop, winner) -> None:
    order = ["env", "cwd", "xdg", "etc"]
    for w in order[: order.index(drop) + 1]:
        sub = "harness/suites" if w == "xdg" else "suites"
        (places[w] / sub / "smoke.yaml").unlink()
    assert f"# {winner}" in find_suite("smoke").read_text()


def test_the_shipped_suites_come_last(places: dict[str, Path]) -> None:
    for w, sub in (("env", "suites"), ("cwd", "suites"), ("xdg", "harness/suites"), ("etc", "suites")):
        (places[w] / sub / "smoke.yaml").unlink()
    found = find_suite("smoke")
    assert found == paths.package_dir("suites") / "smoke.yaml" and "checks:" in found.read_text()
    assert {f.where for f in catalogue("suites")} == {"package"}


def test_user_dir_follows_xdg_and_ignores_a_relative_value(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert user_dir() == tmp_path / "harness"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")  # the XDG spec: relative values are invalid
    assert user_dir() == Path.home() / ".config" / "harness"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert user_dir() == Path.home() / ".config" / "harness"


def test_the_package_dir_prefers_the_installed_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """In a wheel the suites live in harness/data/; a clone has none there and uses its own suites/."""
    assert paths.package_dir("suites") == Path(paths.harness.__file__).resolve().parent.parent / "suites"
    fake_pkg = tmp_path / "site" / "harness"
    (fake_pkg / "data" / "suites").mkdir(parents=True)
    (fake_pkg / "__init__.py").write_text("")
    import harness

    monkeypatch.setattr(harness, "__file__", str(fake_pkg / "__init__.py"))
    monkeypatch.setattr(paths.resources, "files", lambda _pkg: fake_pkg)
    assert paths.package_dir("suites") == fake_pkg / "data" / "suites"
    # profiles were not shipped in this fake: the clone-style fallback is beside the package
    assert paths.package_dir("profiles") == tmp_path / "site" / "profiles"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any directory")
def test_an_unreadable_directory_on_the_path_breaks_nothing(places: dict[str, Path]) -> None:
    (places["cwd"] / "suites").chmod(0)
    try:
        assert catalogue("suites")[0].where in ("env", "package")
    finally:
        (places["cwd"] / "suites").chmod(0o755)


def test_a_directory_named_like_a_suite_is_not_a_suite(places: dict[str, Path]) -> None:
    (places["env"] / "suites" / "smoke.yaml").unlink()
    (places["env"] / "suites" / "smoke.yaml").mkdir()
    assert find_suite("smoke") == places["cwd"] / "suites" / "smoke.yaml"
    assert next(f for f in catalogue("suites") if f.name == "smoke").where == "cwd"


def test_an_empty_env_entry_and_repeats_are_dropped(places: dict[str, Path],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cwd_suites = str(places["cwd"] / "suites")
    monkeypatch.setenv("HARNESS_SUITES_PATH", os.pathsep.join(["", cwd_suites, cwd_suites]))
    assert [p.where for p in search_path("suites")] == ["env", "user", "system", "package"]


def test_a_misspelt_or_short_name_gets_a_did_you_mean(tmp_path: Path) -> None:
    """`harness run quik`, `--profile h100`: the names that were meant, as `harness list` shows them."""
    from clihelp import harness

    r = harness("run", "quik", "--dry-run", cwd=tmp_path)
    assert r.returncode == 2 and "suite 'quik' not found (did you mean 'quick'?); searched:" in r.stderr
    r = harness("run", "smoke", "--profile", "h100", "--dry-run", cwd=tmp_path)
    assert r.returncode == 2
    assert "profile 'h100' not found (did you mean 'h100-sxm-8x' or 'dgx-h100'?)" in r.stderr
    r = harness("run", "zzzz", "--dry-run", cwd=tmp_path)
    assert r.returncode == 2 and "did you mean" not in r.stderr and "suite 'zzzz' not found" in r.stderr
