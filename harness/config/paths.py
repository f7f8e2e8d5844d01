"""Finding suites and profiles by name or path.

A path that exists is used as it is. A bare name (with or without `.yaml`) is searched in the
directories of $HARNESS_SUITES_PATH / $HARNESS_PROFILES_PATH (os.pathsep-separated), then in
./suites or ./profiles, then in the repository's own suites/ and profiles/.
"""

from __future__ import annotations

import os
from pathlib import Path

import harness
from harness.errors import ConfigError

_EXTS = (".yaml", ".yml")


def _repo_root() -> Path:
    return Path(harness.__file__).resolve().parent.parent


def search_dirs(what: str) -> list[Path]:
    """Directories searched for `what` ("suites" or "profiles"), in order, without repeats."""
    env = os.environ.get(f"HARNESS_{what.upper()}_PATH", "")
    dirs = [Path(p) for p in env.split(os.pathsep) if p]
    dirs += [Path.cwd() / what, _repo_root() / what]
    out: list[Path] = []
    seen: set[Path] = set()
    for d in dirs:
        key = d.resolve() if d.exists() else d.absolute()
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _find(what: str, name_or_path: str | Path) -> Path:
    given = Path(name_or_path)
    text = str(name_or_path)
    looks_like_path = isinstance(name_or_path, Path) or os.sep in text or "/" in text
    if given.is_file() or (looks_like_path and given.exists()):
        return given
    if looks_like_path or not text:
        raise ConfigError(f"{what[:-1]} file {text!r} does not exist")
    names = [text] if text.endswith(_EXTS) else [text + ext for ext in _EXTS]
    dirs = search_dirs(what)
    for d in dirs:
        for n in names:
            candidate = d / n
            if candidate.is_file():
                return candidate
    searched = ", ".join(str(d) for d in dirs)
    raise ConfigError(f"{what[:-1]} {text!r} not found; searched: {searched}")


def _list(what: str) -> list[Path]:
    found: dict[str, Path] = {}
    for d in search_dirs(what):
        if not d.is_dir():
            continue
        for p in sorted(d.iterdir()):
            if p.suffix in _EXTS and p.is_file():
                found.setdefault(p.stem, p)
    return [found[k] for k in sorted(found)]


def find_suite(name_or_path: str | Path) -> Path:
    """The suite file for a name or path; ConfigError naming the searched places if none."""
    return _find("suites", name_or_path)


def find_profile(name_or_path: str | Path) -> Path:
    """The profile file for a name or path; ConfigError naming the searched places if none."""
    return _find("profiles", name_or_path)


def list_suites() -> list[Path]:
    """Every suite file on the search path, one per name (the first found wins), by name."""
    return _list("suites")


def list_profiles() -> list[Path]:
    """Every profile file on the search path, one per name (the first found wins), by name."""
    return _list("profiles")
