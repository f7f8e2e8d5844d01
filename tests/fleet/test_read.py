"""Issue #30: a node's results.json is read for the fleet in one compiled pass from bytes, bounded.

A clean file is parsed and validated by msgspec straight from its bytes (no json.loads, no walk of
its values in Python); a refused one is read again the slow way, so its one ERRORED line
names the file and field as before. A 6 GB (sparse) results.json is one ERRORED node, not a
MemoryError, and a results.json that is a symlink is not followed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect
import pytest
from clihelp import harness
from fleet_samples import record
from fleetdirs import make_fleet, node_run_dir
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import results
from harness.fleet import collect
from harness.fleet import record as record_doc
from harness.fleet.collect import load_record, load_run
from harness.fleet.columns import rows_of
from harness.model import CheckResult, Metric, RunRecord, Status, ToolRun


def test_a_clean_file_is_read_in_one_compiled_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    make_fleet(tmp_path, {})
    run_dir = node_run_dir(tmp_path, "n0")

    def refused(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a clean results.json is read in Python")

    monkeypatch.setattr(collect.json, "loads", refused)
    monkeypatch.setattr(results, "validate", refused)
    monkeypatch.setattr(results, "finite", refused)
    rec, metrics, why = load_run(run_dir)
    whole = record("n0", 100.0)
    assert why == "" and rec is not None and list(rows_of(metrics)) == collect.metric_rows(whole)
    assert rec.verdict == whole.verdict and rec.inventory == whole.inventory
    assert all(c.metrics == () for c in rec.checks if c.status is not Status.RECORDED)
    assert load_record(run_dir) == (whole, "")  # the whole run, compiled too


@pytest.mark.parametrize(("raw", "why"), [
    # a number spelt as text: the lax schema takes it, the compiled pass refuses it, from_dict names it
    (lambda d: d["checks"][1]["metrics"][0].update(value="1e3"), "unreadable: TypeError: value '1e3'"),
    (lambda d: d.update(format_version=99), "format_version: 99 is not supported"),
    (lambda d: d.pop("format_version"), "format_version: None is not supported"),
    (lambda d: d["checks"][0].update(details={"audit": {"facts": 3}}), "checks.0.details.audit.facts: "),
])
def test_a_refused_file_is_named_as_the_slow_read_names_it(tmp_path: Path, raw: Any, why: str):
    make_fleet(tmp_path, {"bad": raw})
    path = node_run_dir(tmp_path, "bad") / "results.json"
    rec, rows, got = load_run(path.parent)
    assert rec is None and rows == [] and got.startswith(f"{path}: {why}") and "\n" not in got
    assert load_record(path.parent)[1] == got


def test_a_6_gb_results_json_is_one_errored_node(tmp_path: Path):
    make_fleet(tmp_path, {"huge": lambda d: None})
    path = node_run_dir(tmp_path, "huge") / "results.json"
    with path.open("r+b") as f:  # sparse: 6 GB long, a few kB on disk
        f.seek(6 * 10**9)
        f.write(b"}")
    assert path.stat().st_size > 6 * 10**9
    rec, rows, why = load_run(path.parent)
    assert rec is None and rows == [] and why == f"{path}: larger than 64 MiB: not a run's results"
    r = harness("fleet", "report", str(tmp_path))
    assert r.returncode == 3 and "Traceback" not in r.stdout + r.stderr and "MemoryError" not in r.stderr
    doc = json.loads((tmp_path / "fleet.json").read_text())
    bad = [n for n in doc["nodes"] if n["status"] != "ACCEPTED"]
    assert [(n["node"], n["status"]) for n in bad] == [("huge", "ERRORED")]
    assert "larger than 64 MiB" in bad[0]["reason"]


def test_a_symlinked_results_json_is_not_followed(tmp_path: Path):
    make_fleet(tmp_path, {})
    path = node_run_dir(tmp_path, "n1") / "results.json"
    elsewhere = tmp_path / "elsewhere.json"
    path.rename(elsewhere)
    path.symlink_to(elsewhere)
    rec, _, why = load_run(path.parent)
    assert rec is None and why.startswith(f"{path}: unreadable: OSError")


@pytest.mark.parametrize(("doc", "cls"), [(record_doc.RunDoc, RunRecord), (record_doc.CheckDoc, CheckResult),
                                          (record_doc.MetricDoc, Metric)])
def test_the_compiled_schema_has_the_record_s_fields(doc: Any, cls: Any):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    assert set(doc.__annotations__) == set(fields)
    needed = {n for n, f in fields.items()
              if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    info = msgspec.inspect.type_info(doc)  # the fields as the compiled pass reads them
    assert {f.name for f in info.fields if f.required} - {"format_version"} == needed


def test_the_compiled_read_gives_the_run_and_metrics_of_the_whole_record(tmp_path: Path):
    whole = record("n0", 100.0)
    recorded = CheckResult("power", "command", Status.RECORDED, "", "2026-11-29T10:00:02Z", 1.0,
                           (Metric("power.avg", 300.0, "W", {"gpu": 1, "b": "x"}),),
                           tool_runs=(ToolRun(("nvidia-smi",), 0, 1.0, "o.txt", "e.txt"),),
                           details={"telemetry": {"file": "t.json"}})
    whole = dataclasses.replace(whole, checks=(*whole.checks, recorded), argv=("run",))
    results.write(tmp_path, whole)
    text = (tmp_path / "results.json").read_text().replace('"value": 100.0', '"value": 100', 1)
    (tmp_path / "results.json").write_text(text)  # an integer where a float belongs: JSON allows it
    assert record_doc.from_json(text.encode()) is not None
    rec, metrics, why = load_run(tmp_path)
    rows = list(rows_of(metrics))
    assert why == "" and rows == collect.metric_rows(whole)
    assert all(type(r[4]) is float for r in rows)
    stripped = tuple(c if c.status is Status.RECORDED else dataclasses.replace(c, metrics=())
                     for c in whole.checks)
    assert rec == dataclasses.replace(whole, checks=stripped)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([b"N", b"a", b"NaN", b"I", b"n", b"f", b"Inf", b"Infinity", b"inity", b"x",
                                 b'"', b"-", b"1"]), max_size=12))
def test_the_vector_scan_for_nan_and_infinity_answers_as_a_substring_search(pieces: list[bytes]):
    raw = b"".join(pieces)
    assert record_doc.spells_non_finite(raw) == (b"NaN" in raw or b"Infinity" in raw)
