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

A suite or profile is trusted only when it and every directory above it are owned by root or this
user and writable by no one else (fsutil.untrusted); the shipped ones are as trusted as the code.
A file on the path that is not trusted is passed over (and named, `refused`); one given as a path
is refused. A bare word is always a name: `./smoke` is never the suite `smoke` (a file in the
current directory counts as a path only when given with its `.yaml`/`.yml` or a `/`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import harness
from harness.errors import ConfigError
from harness.fsutil import resolve, untrusted

_EXTS = (".yaml", ".yml")
SYSTEM_DIR = Path("/etc/harness")
SHIPPED = "data"  # harness/data/{suites,profiles} in a built wheel (setup.py copies them there)


# how a summary and a report say where a suite or profile came from
WHERE = {"env": "from $HARNESS_{WHAT}_PATH", "cwd": "from ./{what} of the current directory",
         "user": "from your configuration", "system": "from /etc/harness", "package": "shipped",
         "path": "given as a path"}


def where_text(what: str, where: str) -> str:
    """'shipped', 'from ./profiles of the current directory', ... for a Found.where."""
    return WHERE.get(where, where).format(what=what, WHAT=what.upper())


@dataclass(frozen=True)
class Place:
    """One directory on a search path and which kind of place it is (env, cwd, user, system, package)."""

    where: str
    path: Path


@dataclass(frozen=True)
class Found:
    """A suite or profile on the search path: the file that wins, those it hides, and the files of
    that name passed over because they are not trusted (path, why)."""

    name: str
    path: Path
    where: str
    shadows: tuple[Path, ...] = ()
    refused: tuple[tuple[Path, str], ...] = ()


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


def why_untrusted(path: Path, where: str) -> str:
    """Why a suite or profile file found in a place of kind `where` is not trusted ('' if it is)."""
    if where == "package":
        return ""  # the shipped files: whoever can change them can change the code that runs
    return untrusted(path)


def _as_path(name_or_path: str | Path) -> Path | None:
    """The path meant, or None for a name: a Path, text with a '/', or an existing FILE.yaml."""
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or os.sep in text or "/" in text:
        return Path(name_or_path)
    return Path(text) if text.endswith(_EXTS) and Path(text).is_file() else None


def locate(what: str, name_or_path: str | Path) -> Found:
    """The suite or profile meant: a path (where 'path', refused when not trusted), or the first
    trusted file of that name on the search path (files passed over for trust in `refused`)."""
    text = str(name_or_path)
    given = _as_path(name_or_path)
    if given is not None:
        if not given.exists():
            raise ConfigError(f"{what[:-1]} file {text!r} does not exist")
        inside_package = Path(os.path.realpath(given)).is_relative_to(package_dir(what).resolve())
        why = why_untrusted(given, "package" if inside_package else "path")
        if why:
            raise ConfigError(f"{what[:-1]} file {text!r} is not trusted: {why} (only files that no one but "
                              "root and you can change are run or judged by)")
        return Found(given.stem, resolve(given), "package" if inside_package else "path")
    if not text:
        raise ConfigError(f"{what[:-1]} file {text!r} does not exist")
    names = [text] if text.endswith(_EXTS) else [text + ext for ext in _EXTS]
    places = search_path(what)
    refused: list[tuple[Path, str]] = []
    for place in places:
        for n in names:
            candidate = place.path / n
            if candidate.is_file():
                why = why_untrusted(candidate, place.where)
                if why:
                    refused.append((candidate, why))
                    continue
                return Found(Path(n).stem, resolve(candidate), place.where, refused=tuple(refused))
    searched = ", ".join(str(p.path) for p in places)
    passed = "".join(f"; passed over {p}: not trusted: {why}" for p, why in refused)
    near = _near(text.removesuffix(".yaml").removesuffix(".yml"), [f.name for f in catalogue(what)])
    raise ConfigError(f"{what[:-1]} {text!r} not found{near}; searched: {searched}{passed}")


def _near(text: str, names: list[str]) -> str:
    """' (did you mean 'quick'?)' for a misspelt name, every name holding a short one ('h100': the
    H100 profiles), or '' when nothing is close."""
    import difflib  # start-up: only when a name was not found

    low = text.lower()
    hits = sorted((n for n in names if low and low in n.lower()),
                  key=lambda n: (not n.lower().startswith(low), n))[:3]
    hits = hits or difflib.get_close_matches(text, names, n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(h) for h in hits)}?)" if hits else ""


def _find(what: str, name_or_path: str | Path) -> Path:
    return locate(what, name_or_path).path


def _scan(what: str) -> tuple[dict[str, list[tuple[Path, str]]], dict[str, list[tuple[Path, str]]]]:
    """Every file on the search path by name: the trusted ones (path, where) and the others (path, why)."""
    hits: dict[str, list[tuple[Path, str]]] = {}
    refused: dict[str, list[tuple[Path, str]]] = {}
    for place in search_path(what):
        try:
            entries = sorted(place.path.iterdir()) if place.path.is_dir() else []
        except OSError:  # an unreadable directory on the path hides nothing and breaks nothing
            entries = []
        for p in entries:
            if p.suffix in _EXTS and p.is_file():
                why = why_untrusted(p, place.where)
                if why:
                    refused.setdefault(p.stem, []).append((p, why))
                else:
                    hits.setdefault(p.stem, []).append((p, place.where))
    return hits, refused


def catalogue(what: str) -> list[Found]:
    """Every trusted suite or profile on the search path by name: where the winner was found, what
    it hides, and the files of its name passed over as not trusted."""
    hits, refused = _scan(what)
    return [Found(name, resolve(h[0][0]), h[0][1], tuple(p for p, _ in h[1:]), tuple(refused.get(name, ())))
            for name, h in sorted(hits.items())]


def untrusted_files(what: str) -> list[tuple[Path, str]]:
    """Every suite or profile file on the search path passed over as not trusted, with why."""
    return [r for _, rs in sorted(_scan(what)[1].items()) for r in rs]


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
