"""scripts/setup.sh and packaging: a bounded wait for another apt's dpkg lock (scripts/apt-lock-wait.sh,
run against a real fcntl lock), what the runtime install holds (as README says), the SPDX license,
and the install hints for DCGM 4 and PyTorch on R535-R570 drivers."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest
from clihelp import ROOT, harness

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

SETUP = ROOT / "scripts" / "setup.sh"
WAIT = ROOT / "scripts" / "apt-lock-wait.sh"


def _held(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.lockf(fd, fcntl.LOCK_EX)  # as apt and dpkg hold theirs (fcntl write locks)
    return fd


def test_a_held_lock_is_waited_for_at_most_the_bound(tmp_path: Path):
    lock = tmp_path / "lock-frontend"
    fd = _held(lock)
    try:
        r = subprocess.run([str(WAIT), "1", str(tmp_path / "absent"), str(lock)], capture_output=True,
                           text=True, timeout=30)
    finally:
        os.close(fd)
    assert r.returncode == 1
    assert f"{lock} is still held by another apt or dpkg after 1 s" in r.stderr
    assert "waiting (at most 1 s)" in r.stderr


def test_the_wait_ends_when_the_other_apt_lets_go(tmp_path: Path):
    lock = tmp_path / "lock"
    fd = _held(lock)
    threading.Timer(1.5, os.close, (fd,)).start()
    r = subprocess.run([str(WAIT), "60", str(lock)], capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    assert "waiting (at most 60 s) for another apt or dpkg to release" in r.stderr


def test_setup_waits_before_apt_and_installs_what_readme_says():
    text = SETUP.read_text()
    assert re.search(r"apt_get\(\) \{ wait_for_apt && apt-get -o DPkg::Lock::Timeout=", text)
    assert "apt_get update" in text and "apt_get install" in text and "\n  apt-get " not in text
    runtime = {p for line in text.splitlines() if line.startswith("pkgs")
               for p in re.findall(r"[a-z0-9][a-z0-9.+-]+", line.split("=", 1)[1].split("#")[0])}
    assert {"fio", "stress-ng", "nvme-cli", "ethtool", "iperf3", "ipmitool"} <= runtime
    test_only = {p for line in text.splitlines() if line.startswith("[ $want_test = 1 ] && pkgs+=")
                 for p in re.findall(r"[a-z0-9][a-z0-9.+-]+", line.split("pkgs+=", 1)[1].split("#")[0])}
    assert {"buildah", "mmdebstrap"} <= test_only
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| fio, stress-ng, nvme-cli"))
    assert "iperf3 |" in row and "`scripts/setup.sh` installs them" in row


def test_license_is_an_spdx_expression_with_a_setuptools_that_reads_it():
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert doc["project"]["license"] == "Apache-2.0"
    (req,) = [r for r in doc["build-system"]["requires"] if r.startswith("setuptools")]
    assert tuple(int(x) for x in req.split(">=")[1].split(".")) >= (77,)  # PEP 639 license strings


def test_install_hints_name_dcgm_4_and_a_cuda_12_torch():
    r = harness("list", "--tools")
    assert r.returncode in (0, 3), r.stderr
    assert "datacenter-gpu-manager-4-cuda12" in r.stdout and "datacenter-gpu-manager-4-cuda13" in r.stdout
    assert "apt-get install datacenter-gpu-manager " not in r.stdout.replace("\n", " ")
    assert "R535-R570 install torch from PyTorch's cu126 index" in " ".join(r.stdout.split())
