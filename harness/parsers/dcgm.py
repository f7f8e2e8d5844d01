"""Parse `dcgmi diag` results: JSON (`-j`, DCGM 3.x and 4.x) and the text table.

Pure: text in, ParseResult out. Each test result becomes `dcgm.result` (1 Pass, 0 Fail or Warn)
labelled `test` and, where DCGM says which GPU, `gpu`; skipped tests are omitted, never counted
as failures. A failed test is a hardware verdict, not an invalid run: the run stays valid and
DCGM's own message is kept in `details["failures"]`. The run is invalid when the output is not a
complete diagnostic (no document root, a runtime error, a table without its closing border).
In the table every row of a test's cell belongs to that test: a row with an empty first column
continues it (`| | Fail - GPU: 1 |` is GPU 1's result, not a message), Warning/Error rows attach
to it, and a message that begins "GPU n" is that GPU's reason. DCGM 4.x puts the test's own result
on its first row and then one row per GPU (`GPU0: Pass`): the per-GPU rows replace a passing first
row, never a failing one. A non-pass that is DCGM's own internal error, or a deployment check about
the setup (persistence mode off, a service or library missing), is no `dcgm.result`: it is listed in
`details["environment"]` (an environment problem, not the GPU's).

JSON shapes: 3.x root "DCGM GPU Diagnostic", results carry "gpu_ids" ("0" or "0,1");
4.x root "DCGM Diagnostic", results carry "entity_group": "GPU" and "entity_id", "info" is a
list, and a failing "test_summary" is the test's own result (never hidden by passing GPUs).
Warnings are {"warning": text, "error_id": n, ...} objects in both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.model import Metric
from harness.parsers.base import ParseResult, invalid, json_objects
from harness.units import COUNT

KIND = "dcgmi-diag"
ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")
_WORSE = {"fail": 3, "warn": 2, "pass": 1, "skip": 0}
_ROW = re.compile(r"^\|(.*)\|(.*)\|\s*$")
_SECTION = re.compile(r"^[|+]-+\s+(\w[\w ]*?)\s+-+[+|]")
_RESULT = re.compile(r"^(pass|fail|warn|skip|not run)\b\s*(?:-\s*(.*))?$", re.IGNORECASE)
_PER_GPU = re.compile(r"^GPU\s*(\d{1,9})\s*:\s*(pass|fail|warn|skip)\b", re.IGNORECASE)
_IDS = re.compile(r"GPUs?\s*:\s*([\d,\s]+)", re.IGNORECASE)
# a result continued on the next row of the same test: "|   | Fail - GPU: 1 |"
_CONTINUED = re.compile(r"^(pass|fail|warn|skip)\s*-\s*(?:all|GPUs?\s*:\s*\d[\d,\s]*)$", re.IGNORECASE)
_NAMES_GPU = re.compile(r"^GPU\s*(\d{1,9})\b")  # bounded: int() refuses 4,301 digits


@dataclass
class _Results:
    """(test, gpu) -> status, in first-seen order, plus DCGM's messages for non-passes."""

    status: dict[tuple[str, int | None], str] = field(default_factory=dict)
    messages: dict[str, list[str]] = field(default_factory=dict)
    gpu_messages: dict[tuple[str, int], list[str]] = field(default_factory=dict)  # "GPU 1 ..." ones
    category: dict[str, str] = field(default_factory=dict)

    def add(self, test: str, gpu: int | None, status: str) -> None:
        s = "skip" if status.lower() == "not run" else status.lower()
        if s not in _WORSE:
            return
        key = (test, gpu)
        if key not in self.status or _WORSE[s] > _WORSE[self.status[key]]:
            self.status[key] = s

    def note(self, test: str, text: str) -> None:
        text = " ".join(text.split())
        if text and text not in self.messages.setdefault(test, []):
            self.messages[test].append(text)
            gpu = _NAMES_GPU.match(text)
            if gpu:
                self.gpu_messages.setdefault((test, int(gpu.group(1))), []).append(text)


def parse(text: str) -> ParseResult:
    """dcgm.result{test,gpu} from `dcgmi diag -j` JSON or its text table."""
    if "{" in text and any(f'"{k}"' in text for k in ("test_categories", "results", *ROOTS)):
        return _parse_json(text)
    if re.search(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|", text, re.MULTILINE):
        return _parse_table(text)
    return invalid(KIND, "not dcgmi diag output (no JSON results, no 'Diagnostic | Result' table)")


# ---------------------------------------------------------------- JSON

def _parse_json(text: str) -> ParseResult:
    problems: list[str] = []
    root: Mapping[str, Any] | None = None
    tests: list[tuple[str, Mapping[str, Any]]] = []
    version = None
    for obj in json_objects(text):
        for name in ROOTS:
            if isinstance(obj.get(name), Mapping):
                root, version = obj[name], ("4.x" if name == ROOTS[0] else "3.x")
                break
        if root is not None:
            break
        if "name" in obj and isinstance(obj.get("results"), list):
            tests.append(("", obj))  # a bare test object: a fragment of a document
    if root is not None:
        err = root.get("runtime_error")
        if err:
            problems.append(f"dcgmi diag runtime error: {' '.join(str(err).split())}")
        for cat in root.get("test_categories") or []:
            if isinstance(cat, Mapping):
                tests += [(str(cat.get("category") or ""), t) for t in cat.get("tests") or []
                          if isinstance(t, Mapping)]
    elif tests:
        problems.append("a fragment: test objects without the 'DCGM Diagnostic' document around "
                        "them, so the run cannot be shown complete")
    else:
        return invalid(KIND, "JSON without DCGM diagnostic results")
    res = _Results()
    for category, t in tests:
        name = str(t.get("name") or "?")
        res.category[name] = category
        for r in t.get("results") or []:
            if isinstance(r, Mapping):
                _json_result(res, name, r)
        summary = t.get("test_summary")  # 4.x: the test's own result beside its per-GPU ones
        if isinstance(summary, Mapping) and str(summary.get("status") or "").lower() in ("fail", "warn"):
            _json_result(res, name, {"status": summary.get("status"), "entity_group": "none",
                                     "warnings": summary.get("warnings")})
    if not res.status and not problems:
        problems.append("no test results in the diagnostic")
    return _finish(res, problems, {"format": f"json {version}" if version else "json fragment"})


def _json_result(res: _Results, name: str, r: Mapping[str, Any]) -> None:
    status = str(r.get("status") or "")
    gpus: list[int | None] = []
    if str(r.get("entity_group", "GPU")).upper() == "GPU" and isinstance(r.get("entity_id"), int):
        gpus = [r["entity_id"]]
    else:
        ids = r.get("gpu_ids", r.get("gpu_id"))
        if isinstance(ids, int):
            gpus = [ids]
        elif isinstance(ids, str):
            gpus = [int(x) for x in re.findall(r"(?<!\d)\d{1,9}(?!\d)", ids)]
    for g in gpus or [None]:
        res.add(name, g, status)
    if status.lower() in ("fail", "warn"):
        warnings = r.get("warnings")
        items = warnings if isinstance(warnings, list) else [r.get("warning")]
        for w in items:
            msg = w.get("warning") if isinstance(w, Mapping) else w
            if msg:
                res.note(name, str(msg))


# ---------------------------------------------------------------- text table

def _parse_table(text: str) -> ParseResult:
    res = _Results()
    meta: dict[str, str] = {}
    section = ""
    test: str | None = None
    message: list[str] | None = None  # cells of a wrapped Error/Warning row
    tables = closed = 0

    def flush() -> None:
        if test is not None and message:
            res.note(test, "".join(message))

    for line in text.splitlines():
        line = line.rstrip()
        if re.match(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|", line):
            tables += 1
            continue
        sec = _SECTION.match(line)
        if sec:
            flush()
            section, test, message = sec.group(1).strip(), None, None
            continue
        if re.fullmatch(r"\+[-=]+\+[-=]+\+", line):
            if "=" not in line and tables > closed and test is not None:
                closed += 1  # the bottom border of a table that has rows
            continue
        row = _ROW.match(line)
        if row is None:
            continue
        name, cell = row.group(1).strip(), row.group(2)
        value = cell.strip()
        if section.lower() == "metadata":
            meta[name] = value
            continue
        if name and (name.lower() in ("error", "warning", "info") or name.lower().startswith("warning")):
            flush()
            message = [cell[1:-2] if len(cell) > 3 else value]
            if name.lower() == "info":
                message = None
            elif test is None:  # an error before any test row: the section itself failed
                test = section or "Diagnostic"
                res.category[test] = section
                gpu = _NAMES_GPU.match(value)
                res.add(test, int(gpu.group(1)) if gpu else None,
                        "fail" if name.lower() == "error" else "warn")
            continue
        if not name:  # every row of a test's cell belongs to that test
            per_gpu = _PER_GPU.match(value)
            if test is not None and (per_gpu or _CONTINUED.match(value)):
                flush()
                message = None
                if per_gpu:
                    if res.status.get((test, None)) in ("pass", "skip"):
                        res.status.pop((test, None))  # per-GPU rows replace a passing aggregate
                    res.add(test, int(per_gpu.group(1)), per_gpu.group(2))
                else:
                    _add_result(res, test, value)
            elif message is not None:
                message.append(cell[1:-2] if len(cell) > 3 else value)
            continue
        flush()
        message = None
        test = name
        res.category[name] = section
        _add_result(res, test, value)
    flush()
    problems = []
    if closed < tables:
        problems.append("the results table is cut off (no closing border)")
    if not res.status:
        problems.append("no test results in the table")
    details: dict[str, Any] = {"format": "table", "tables": tables}
    if meta:
        details["metadata"] = meta
    return _finish(res, problems, details)


def _add_result(res: _Results, test: str, value: str) -> None:
    """`Pass`, `Pass - All`, `Fail - GPU: 1` or `Pass - GPUs: 0, 2, 3`: one status per GPU named."""
    m = _RESULT.match(value)
    if m is None:
        return
    ids = _IDS.search(m.group(2) or "")
    for g in [int(x) for x in re.findall(r"(?<!\d)\d{1,9}(?!\d)", ids.group(1))] if ids else [None]:
        res.add(test, g, m.group(1))


# ---------------------------------------------------------------- common

def environmental(category: str, messages: list[str]) -> bool:
    """Whether a non-pass is DCGM's or the deployment's own trouble, not the GPU's: an internal error of
    the test, or a deployment check about the setup (persistence mode, a service or library)."""
    text = " ".join(messages).lower()
    if "internal error" in text:
        return True
    return category.lower() in ("deployment", "software") and any(w in text for w in _SETUP_WORDS)


_SETUP_WORDS = ("persistence mode", "not running", "environment variable", "permission", "library",
                "libraries", "hostengine", "nv-hostengine", "fabric manager", "graphics process")


def _finish(res: _Results, problems: list[str], details: dict[str, Any]) -> ParseResult:
    metrics: list[Metric] = []
    failures: list[str] = []
    skipped: list[str] = []
    environment: list[str] = []
    for (test, gpu), status in res.status.items():
        labels: dict[str, str | int] = {"test": test}
        where = f"{test}" if gpu is None else f"{test} GPU {gpu}"
        if gpu is not None:
            labels["gpu"] = gpu
        if status == "skip":
            skipped.append(where)
            continue
        said = res.gpu_messages.get((test, gpu), []) if gpu is not None else []
        said = said or res.messages.get(test, [])
        if status in ("fail", "warn") and environmental(res.category.get(test, ""), said):
            environment.append(f"{where}: {status.capitalize()}: {'; '.join(said)}")
            continue
        metrics.append(Metric("dcgm.result", 1.0 if status == "pass" else 0.0, COUNT, labels))
        if status in ("fail", "warn"):
            failures.append(f"{where}: {status.capitalize()}: {'; '.join(said) or 'no message'}")
    ran: dict[str, int] = {}
    for (test, _gpu), status in res.status.items():
        if status != "skip":
            cat = res.category.get(test, "").lower() or "unknown"
            ran[cat] = ran.get(cat, 0) + 1
    details.update({"failures": failures, "skipped": skipped, "ran_by_category": ran,
                    "environment": environment})
    return ParseResult(KIND, not problems, tuple(problems), tuple(metrics), details)
