"""Finding suites and profiles by name or path.

A path that exists is used as it is. A bare name (with or without `.yaml`) is searched, first
found wins, in:

  env      the directories of $HARNESS_SUITES_PATH / $HARNESS_PROFILES_PATH (os.pathsep-separated)
  cwd      ./suites or ./profiles
  user     $XDG_CONFIG_HOME/harness/suites (default ~/.config/harness/suites)
  system   /etc/harness/suites
  package  the suites and profiles shipped with the harness: inside the installed package
           (harness/data/, copied there when the wheel is built), or a clone's own suites/

The user's directory comes before the system's, as with git's and pip's configuration: a
person's own copy of a suite overrides the site-wide one, which overrides the shipped one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import harness
from harness.errors import ConfigError

_EXTS = (".yaml", ".yml")
SYSTEM_DIR = Path("/etc/harness")
SHIPPED = "data"  # harness/data/{suites,profiles} in a built wheel (setup.py copies them there)


@dataclass(frozen=True)
class Place:
    """One directory on a search path and which kind of place it is (env, cwd, user, system, package)."""

    where: str
    path: Path


@dataclass(frozen=True)
class Found:
    """A suite or profile on the search path: the file that wins and those it hides."""

    name: str
    path: Path
    where: str
    shadows: tuple[Path, ...] = ()


def user_dir() -> Path:
    """$XDG_CONFIG_HOME/harness, or ~/.config/harness (an unset or relative XDG value is ignored)."""
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"
    return base / "harness"


def package_dir(what: str) -> Path:
    """The shipped suites or profiles: the installed package's data, else a clone's top-level folder."""
    shipped = resources.files(harness) / SHIPPED / what
    if isinstance(shipped, Path) and shipped.is_dir():
        return shipped
    return Path(harness.__file__).resolve().parent.parent / what


def search_path(what: str) -> list[Place]:
    """Places searched for `what` ("suites" or "profiles"), in order, without repeats."""
    env = os.environ.get(f"HARNESS_{what.upper()}_PATH", "")
    places = [Place("env", Path(p)) for p in env.split(os.pathsep) if p]
    places += [Place("cwd", Path.cwd() / what), Place("user", user_dir() / what),
               Place("system", SYSTEM_DIR / what), Place("package", package_dir(what))]
    out: list[Place] = []
    seen: set[Path] = set()
    for place in places:
        d = place.path
        key = d.resolve() if d.exists() else d.absolute()
        if key not in seen:
            seen.add(key)
            out.append(place)
    return out


def search_dirs(what: str) -> list[Path]:
    """Directories searched for `what` ("suites" or "profiles"), in order, without repeats."""
    return [p.path for p in search_path(what)]


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
    near = _near(text.removesuffix(".yaml").removesuffix(".yml"), [f.name for f in catalogue(what)])
    raise ConfigError(f"{what[:-1]} {text!r} not found{near}; searched: {searched}")


def _near(text: str, names: list[str]) -> str:
    """' (did you mean 'quick'?)' for a misspelt name, every name holding a short one ('h100': the
    H100 profiles), or '' when nothing is close."""
    import difflib  # start-up: only when a name was not found

    low = text.lower()
    hits = sorted((n for n in names if low and low in n.lower()),
                  key=lambda n: (not n.lower().startswith(low), n))[:3]
    hits = hits or difflib.get_close_matches(text, names, n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(h) for h in hits)}?)" if hits else ""


def catalogue(what: str) -> list[Found]:
    """Every suite or profile on the search path by name: where the winner was found, what it hides."""
    hits: dict[str, list[tuple[Path, str]]] = {}
    for place in search_path(what):
        try:
            entries = sorted(place.path.iterdir()) if place.path.is_dir() else []
        except OSError:  # an unreadable directory on the path hides nothing and breaks nothing
            entries = []
        for p in entries:
            if p.suffix in _EXTS and p.is_file():
                hits.setdefault(p.stem, []).append((p, place.where))
    return [Found(name, h[0][0], h[0][1], tuple(p for p, _ in h[1:])) for name, h in sorted(hits.items())]


def find_suite(name_or_path: str | Path) -> Path:
    """The suite file for a name or path; ConfigError naming the searched places if none."""
    return _find("suites", name_or_path)


def find_profile(name_or_path: str | Path) -> Path:
    """The profile file for a name or path; ConfigError naming the searched places if none."""
    return _find("profiles", name_or_path)


def list_suites() -> list[Path]:
    """Every suite file on the search path, one per name (the first found wins), by name."""
    return [f.path for f in catalogue("suites")]


def list_profiles() -> list[Path]:
    """Every profile file on the search path, one per name (the first found wins), by name."""
    return [f.path for f in catalogue("profiles")]
