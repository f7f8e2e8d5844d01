"""The wheel, installed into a fresh venv (and with pipx), runs its own suites from /.

Slow: it builds the wheel, creates a venv and installs the dependencies from the package index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from clihelp import ROOT

pytestmark = pytest.mark.slow


def _run(argv: list[str | Path], cwd: Path = Path("/"), timeout: float = 600,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARNESS_SUITES_PATH",
                                                               "HARNESS_PROFILES_PATH", "VIRTUAL_ENV")}
    return subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**clean, **(env or {})})


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out, src = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("src") / "harness"
    # from a copy: a build in the clone would leave (and reuse) build/ there
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "reports", "tests", "*.egg-info", "__pycache__", ".*_cache"))
    # pip builds it in isolation, with setuptools and wheel from the package index
    r = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out,
              src])
    assert r.returncode == 0, r.stderr
    (whl,) = out.glob("gpu_acceptance_harness-*.whl")
    return whl


def _install(pip: list[str | Path], what: list[str | Path]) -> None:
    r = _run([*pip, "install", "-q", "--disable-pip-version-check", *what])
    if r.returncode != 0 and ("NewConnectionError" in r.stderr or "No matching distribution" in r.stderr):
        pytest.skip(f"the package index cannot be reached: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr


def _check_installed(harness: Path, tmp_path: Path, site: str) -> None:
    listing = _run([harness, "list"])
    assert listing.returncode == 0, listing.stderr
    smoke = next(ln.split() for ln in listing.stdout.splitlines() if ln.split()[:1] == ["smoke"])
    assert smoke[1] == "package" and smoke[2].startswith(site), smoke
    assert smoke[2].endswith("harness/data/suites/smoke.yaml") and str(ROOT) not in listing.stdout
    generic = next(ln.split() for ln in listing.stdout.splitlines() if ln.split()[:1] == ["generic"])
    assert generic[1] == "package" and generic[2].endswith("harness/data/profiles/generic.yaml")
    dry = _run([harness, "run", "smoke", "--dry-run"])
    assert dry.returncode == 0, dry.stderr
    assert "fio-quick" in dry.stdout and "generic" in dry.stdout
    out = tmp_path / "reports"
    real = _run([harness, "run", "smoke", "-o", out, "--history", "off"])
    assert real.returncode in (0, 1), real.stdout + real.stderr  # a slow disk may reject; never errored
    (run_dir,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    doc = json.loads((run_dir / "results.json").read_text())
    assert doc["suite"]["name"] == "smoke" and doc["suite"]["path"].startswith(site)
    fio = next(c for c in doc["checks"] if c["id"] == "fio-quick")
    assert fio["status"] in ("passed", "warned", "failed") and fio["metrics"], fio["status"]
    assert (run_dir / "report.html").is_file() and (run_dir / "junit.xml").is_file()


def test_the_wheel_in_a_fresh_venv_runs_smoke_from_root(wheel: Path, tmp_path: Path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    _install([py, "-m", "pip"], [wheel])
    site = _run([py, "-c", "import harness, pathlib; print(pathlib.Path(harness.__file__).parent)"])
    assert site.stdout.strip().startswith(str(env_dir)), site.stdout
    _check_installed(env_dir / "bin" / "harness", tmp_path, str(env_dir))
    tools = _run([env_dir / "bin" / "harness", "list", "--tools"])
    assert tools.returncode == 0 and "fio: " in tools.stdout, tools.stderr


@pytest.mark.skipif(shutil.which("pipx") is None, reason="pipx not installed (apt-get install pipx)")
def test_pipx_install_of_the_wheel_runs_smoke_from_root(wheel: Path, tmp_path: Path):
    home, bin_dir = tmp_path / "pipx-home", tmp_path / "pipx-bin"
    env = {"PIPX_HOME": str(home), "PIPX_BIN_DIR": str(bin_dir)}
    r = _run(["pipx", "install", "--python", sys.executable, wheel], env=env)
    if r.returncode != 0 and ("NewConnectionError" in r.stderr + r.stdout):
        pytest.skip("the package index cannot be reached")
    assert r.returncode == 0, r.stdout + r.stderr
    _check_installed(bin_dir / "harness", tmp_path, str(home))
