"""Hostile suites and profiles (hypothesis): only ConfigError with FILE:LINE:COL, in bounded time.

Valid documents are mutated structurally (wrong types, unknown keys, missing keys, deep
nesting, huge numbers, NaN/inf, unicode, hostile `extends`) and then textually (tabs,
duplicate keys, anchors and alias bombs, merge keys, BOM, control characters, extra
documents), and fed to the loader, to planning and to the real `harness validate`.
"""

from __future__ import annotations

import copy
import re
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from clihelp import harness
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harness.checks.registry import kinds
from harness.config import load_profile, load_suite, validate_paths
from harness.errors import ConfigError, ConfigProblem
from harness.run import plan

SUITE: dict[str, Any] = {
    "name": "fuzz", "description": "fuzzed suite",
    "defaults": {"timeout": "10m", "repeat": 1, "tags": ["a"]},
    "checks": [
        {"id": "fio-a", "kind": "fio", "timeout": 60, "needs": ["root"],
         "params": {"target": "/tmp", "jobs": [{"name": "j", "rw": "randread", "bs": "4k", "iodepth": 4,
                                                "runtime": 1, "size": "16M"}]},
         "expect": [{"metric": "fio.bw", "unit": "GB/s", "min": 1, "labels": {"job": "j"}}]},
        {"id": "cmd", "kind": "command",
         "params": {"argv": ["true"], "env": {"A": "b"}, "expect_rc": [0],
                    "metrics": [{"name": "app.x", "unit": "GB/s", "regex": "(?P<value>\\d+)"}]}},
        {"id": "inv", "kind": "inventory", "tags": ["x"]},
    ],
}
PROFILE: dict[str, Any] = {
    "name": "p", "description": "x", "sources": ["datasheet"],
    "hardware": {"gpu": {"models": ["NVIDIA H100 80GB HBM3"], "count": 8}, "memory_min_bytes": 1000,
                 "nvme_count": 2, "psu": {"count": 4, "rating_w": 3000, "redundancy": "N+1"}},
    "expectations": [{"metric": "fio.bw", "labels": {"job": "j"}, "reference": 6.5, "lower": 0.1,
                      "unit": "GB/s", "reduce": "min", "severity": "warn"},
                     {"metric": "gpu.count", "min": 8, "max": 8, "unit": "count", "xfail": "ticket 1"}],
}
NASTY = ["", " ", "\t", "\x00", "\u202e", "💥", "<script>alert(1)</script>", "9" * 500, "${HOME}",
         "!!python/object:os.system", "10 m", "-1", "1e999", "../../../../etc/passwd", "/dev/zero",
         "/proc/self/mem", "generic", "p", "NaN", ".inf", "~", "0x1F", "0o17", "1_000", "yes", "null"]
KEYS = ["tmeout", "kindd", "<<", "params", "id", "name", "checks", "extends", "expectations", "x" * 300,
        "ключ", "", " ", "1", "true"]

scalar = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**30, max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20), st.sampled_from(NASTY))
value = st.recursive(scalar, lambda kids: st.lists(kids, max_size=3)
                     | st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)), kids,
                                       max_size=3), max_leaves=6)

COUNTS: dict[str, int] = {}


def _paths(doc: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*here, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*here, i))
    return out


def _mutate(doc: Any, data: st.DataObject) -> Any:
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        paths = _paths(doc)
        path = data.draw(st.sampled_from(paths), label="path")
        if not path:
            if data.draw(st.booleans()):
                return data.draw(value, label="whole document")
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        key = path[-1]
        op = data.draw(st.sampled_from(["set", "delete", "unknown", "deep", "wrap"]), label="op")
        if op == "set":
            parent[key] = data.draw(value, label="value")
        elif op == "delete":
            del parent[key]
        elif op == "unknown" and isinstance(parent, dict):
            parent[data.draw(st.sampled_from(KEYS) | st.text(max_size=10), label="key")] = \
                data.draw(value, label="value")
        elif op == "deep":
            deep: Any = data.draw(scalar, label="leaf")
            for _ in range(data.draw(st.integers(20, 160), label="depth")):
                deep = [deep] if data.draw(st.booleans()) else {"k": deep}
            parent[key] = deep
        else:
            parent[key] = [parent[key]]
    return doc


def _textual(text: str, data: st.DataObject) -> str:
    lines = text.splitlines(keepends=True) or ["\n"]
    op = data.draw(st.sampled_from(["none", "tab", "dup", "bomb", "anchor", "merge", "bom", "ctrl",
                                    "second-doc", "cut"]), label="text op")
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    event(f"text op {op}")
    if op == "tab":
        lines[i] = "\t" + lines[i]
    elif op == "dup":
        lines.insert(i, lines[i])
    elif op == "bomb":
        bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
        for n in range(1, 9):
            bomb += f"{'bcdefghij'[n - 1]}: &{'bcdefghij'[n - 1]} [" + ",".join(
                [f"*{'abcdefghij'[n - 1]}"] * 9) + "]\n"
        lines.insert(0, bomb)
    elif op == "anchor":
        lines[i] = re.sub(r":( |$)", r": &anc\1", lines[i], count=1)
        lines.append("extra: *anc\n")
    elif op == "merge":
        lines.append("<<: [*nope, {a: 1}]\n")
    elif op == "bom":
        lines.insert(0, "\ufeff")
    elif op == "ctrl":
        pos = data.draw(st.integers(0, max(0, len(lines[i]) - 1)), label="col")
        lines[i] = lines[i][:pos] + data.draw(st.sampled_from(["\x00", "\x1b", "\ufffe", "\x85", "\u2028"]),
                                              label="char") + lines[i][pos:]
    elif op == "second-doc":
        lines.append("---\nname: two\n")
    elif op == "cut":
        return "".join(lines)[: data.draw(st.integers(0, len(text)), label="cut at")]
    return "".join(lines)


def _render(doc: Any, data: st.DataObject) -> str:
    try:
        text = yaml.safe_dump(doc, allow_unicode=data.draw(st.booleans(), label="unicode"),
                              default_flow_style=data.draw(st.sampled_from([False, None, True]),
                                                           label="flow"), sort_keys=False)
    except (yaml.YAMLError, RecursionError):
        text = repr(doc)
    return _textual(text, data)


def _judge(path: Path, text: str) -> list[ConfigProblem]:
    t0 = time.monotonic()
    problems = validate_paths([path], kinds())
    assert time.monotonic() - t0 < 10, "validation must be bounded in time"
    n_lines = text.count("\n") + 1
    for p in problems:
        assert isinstance(p, ConfigProblem) and p.file and p.message, p
        assert p.line >= 1 and p.col >= 1, p
        if p.file == str(path):
            assert p.line <= n_lines + 1, (p, n_lines)
        assert re.match(r"^.+:\d+:\d+: .+", str(p), re.S), str(p)
    return problems


def _fuzz(tmp_path: Path, base: dict[str, Any], data: st.DataObject, what: str) -> None:
    doc = _mutate(base, data)
    text = _render(doc, data)
    path = tmp_path / f"{what}.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    problems = _judge(path, text)
    COUNTS[what] = COUNTS.get(what, 0) + 1
    try:
        loaded = load_suite(path, kinds()) if what == "suite" else load_profile(path)
    except ConfigError as e:
        assert e.problems, "a ConfigError always says what is wrong"
        event(f"{what}: ConfigError")
        return
    event(f"{what}: loaded")
    if what == "suite" and "checks" in (doc if isinstance(doc, dict) else {}):
        assert problems == [], problems  # validate and load agree
        planned = plan.build(loaded, load_profile("generic"))  # type: ignore[arg-type]
        plan.render_dry_run(loaded, load_profile("generic"), "fuzz", planned, {}, False)  # type: ignore[arg-type]


@settings(max_examples=250, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_hostile_suites(tmp_path: Path, data: st.DataObject) -> None:
    _fuzz(tmp_path, SUITE, data, "suite")


@settings(max_examples=250, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_hostile_profiles(tmp_path: Path, data: st.DataObject) -> None:
    _fuzz(tmp_path, PROFILE, data, "profile")


def test_bases_are_valid(tmp_path: Path) -> None:
    """The fuzzers start from valid documents, so every problem they see is one they made."""
    for what, base in (("suite", SUITE), ("profile", PROFILE)):
        p = tmp_path / f"{what}.yaml"
        p.write_text(yaml.safe_dump(base))
        assert validate_paths([p], kinds()) == []


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_hostile_files_through_the_real_cli(tmp_path: Path, data: st.DataObject) -> None:
    """`harness validate` on 25 hostile files at once: exit 0/2, every line FILE:LINE:COL, no traceback."""
    files = []
    for n in range(25):
        base, what = (SUITE, "suite") if n % 2 else (PROFILE, "profile")
        path = tmp_path / f"{what}-{n}.yaml"
        path.write_text(_render(_mutate(base, data), data), encoding="utf-8", errors="surrogatepass")
        files.append(str(path))
    COUNTS["cli-files"] = COUNTS.get("cli-files", 0) + len(files)
    r = harness("validate", *files, timeout=120)
    assert r.returncode in (0, 2), r.stderr
    assert "Traceback" not in r.stderr
    for line in r.stderr.splitlines():
        assert re.match(r"^(.+):(\d+):(\d+): \S", line), line
    assert r.returncode == 0 or r.stderr


def test_counts_are_reported(capsys) -> None:
    """Prints how many inputs the fuzzers above fed in this session (shown with -s)."""
    with capsys.disabled():
        print(f"\nconfig fuzz inputs: {COUNTS}", file=sys.stderr)
