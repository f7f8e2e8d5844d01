"""Is a tool or Python package here, and which version? (`harness list --tools`.)

A tool is looked up on PATH and asked for its version with the arguments its kind gives, no
shell, stdin closed, a few seconds at most; a Python package is looked up without importing it
(importing PyTorch takes seconds), its version read from the installed distribution's metadata.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata, util

from harness.platform.proc import tool_environ

TIMEOUT_S = 5.0
_VERSION = re.compile(r"(?<![\w.])v?(\d+(?:\.\d+)+(?:[-.]\w+)?)")


@dataclass(frozen=True)
class Presence:
    """What the probe found: where (a path or a distribution), the version, or why it is unknown."""

    found: bool
    where: str = ""
    version: str = ""
    note: str = ""


def version_in(text: str) -> str:
    """The first dotted version number in a tool's version output ('fio-3.33' -> '3.33'), or ''."""
    m = _VERSION.search(text)
    return m.group(1) if m else ""


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:120]


def probe_tool(name: str, version_args: Sequence[str]) -> Presence:
    """Find `name` on PATH and run it with `version_args` (nothing is run when they are empty)."""
    path = shutil.which(name)
    if path is None:
        return Presence(False, note="not on PATH")
    if not version_args:
        return Presence(True, path)
    try:
        res = subprocess.run([path, *version_args], capture_output=True, timeout=TIMEOUT_S,
                             stdin=subprocess.DEVNULL, check=False, env=tool_environ())
    except subprocess.TimeoutExpired:
        return Presence(True, path, note=f"no version: no answer in {TIMEOUT_S:g} s")
    except OSError as e:
        return Presence(True, path, note=f"cannot run: {e.strerror or e}")
    text = (res.stdout + b"\n" + res.stderr).decode("utf-8", errors="replace")
    version = version_in(text)
    if res.returncode != 0 and not version:
        return Presence(True, path, note=f"exit {res.returncode}: {_first_line(text)}")
    return Presence(True, path, version)


def probe_python(module: str) -> Presence:
    """Find a top-level Python module without importing it; its distribution's version."""
    try:
        spec = util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return Presence(False, note="not importable")
    dists = metadata.packages_distributions().get(module, [])
    for dist in dists:
        try:
            return Presence(True, dist, metadata.version(dist))
        except metadata.PackageNotFoundError:
            continue
    return Presence(True, spec.origin or module)
