"""Issue #30: the fleet's compiled read (msgspec) takes nothing that `harness report`'s read refuses.

A document the compiled pass accepts must be one results.load accepts, read as the same RunRecord;
anything else is read again the slow way, which names the field. Held on a rich record (every
dataclass of a run, every section) tampered at random: a value replaced by any JSON value, a key
dropped or added, a value respelt in another type (a number as text, an
integer as a float, a bool as a number), a number spelt out of range or as NaN.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import results
from harness.errors import ConfigError, RecordError
from harness.fleet import collect
from harness.fleet import record as record_doc
from harness.model import (
    CheckResult,
    Evaluation,
    LeftOut,
    Metric,
    Outcome,
    RunRecord,
    Status,
    ToolRun,
)


def rich() -> RunRecord:
    """A run with every kind of part the schema names: evaluations, tool runs, left-out checks,
    history, inventory and details sections."""
    ev = Evaluation(metric="fio.bw", labels={"job": "seqread", "disk": 0}, outcome=Outcome.FAIL,
                    severity="fail", measured=0.5, unit="GB/s", reference=2.0, low=1.8, high=None,
                    reduce="min", message="below", xfail=None, source="profile h100")
    fio = CheckResult("fio", "fio", Status.FAILED, "1 failed", "2026-11-29T10:00:01Z", 12.5,
                      (Metric("fio.bw", 0.5, "GB/s", {"job": "seqread", "disk": 0}),
                       Metric("fio.iops", 120000.0, "IOPS", {"job": "randread"})),
                      (ev,), ("short run",), (ToolRun(("fio", "--output-format=json"), 0, 12.4, "fio.out",
                                                      "fio.err", False),),
                      {"telemetry": {"file": "t.json", "period_s": 1.0, "samples": 12, "gpus": 0},
                       "contention": {"before": {"runnable_per_cpu": 0.1, "disks": ["sda"]},
                                      "waited_s": 0.0, "window_s": 0.2, "gated": True,
                                      "limits": {"steal": 0.05}},
                       "audit": {"facts": [{"name": "kernel", "labels": {"x": 1}, "value": "6.1",
                                            "source": "uname", "reason": None}], "outcomes": []},
                       "note_of_the_kind": {"anything": [1, "two", None]}})
    rec = CheckResult("power", "command", Status.RECORDED, "", "2026-11-29T10:00:02Z", 1.0,
                      (Metric("power.avg", 300.0, "W", {"gpu": 1}),),
                      details={"psus": [{"psu": "PSU1", "before": True, "peak_in_w": 900.0}]})
    skipped = CheckResult("nvme", "nvme_health", Status.SKIPPED, "no NVMe", expected_by="nvme_count")
    return RunRecord("n1-20261129T100000Z", "n1", {"name": "quick", "path": "/s.yaml"},
                     {"name": "h100", "reason": "matched"}, "2026-11-29T10:00:00Z", "2026-11-29T10:00:30Z",
                     30.0, {"host": {"hostname": "n1", "cores": 8}, "gpus": [{"index": 0, "name": "H100",
                                                                            "serial": "1"}],
                            "block_devices": [{"name": "nvme0n1", "size_bytes": 10**12}]},
                     (fio, rec, skipped), "0.1.0", argv=("run", "quick"),
                     history={"store": "/var/lib/h.sqlite", "node": {"id": 3, "gpus": 8},
                              "trends": [{"check": "fio", "metric": "fio.bw", "labels": {"job": "x"},
                                          "unit": "GB/s", "points": [{"run_id": "r", "value": 2.0}],
                                          "current": 0.5, "low": None}]},
                     resumed=("2026-11-29T10:00:10Z",),
                     left_out=(LeftOut("burn", "gpu_burn", "--skip", "gpu_count"),))


def _base(tmp: Path) -> Any:
    results.write(tmp, rich(), durable=False)
    return json.loads((tmp / results.RESULTS).read_text())


def _paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        out += _paths(v, (*at, k))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path[:-1]:
        doc = doc[k]
    return doc


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6)
    | st.sampled_from(["1e3", "NaN", "PASSED", "passed", "FAIL", "fail", "", "nvme0n1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)


def _respelt(v: Any) -> list[Any]:
    """The same value in another JSON type: what a lax reader would coerce back."""
    out: list[Any] = [str(v), [v], {"value": v}, None]
    if isinstance(v, bool):
        out += [int(v), str(v).lower()]
    elif isinstance(v, (int, float)):
        out += [True, float(v), int(v), f"{v:g}"]
    elif isinstance(v, str):
        out += [1, 1.5, True]
    return out


def _slow(path: Path) -> RunRecord | None:
    """What `harness report` reads of the file, or None when it refuses it."""
    try:
        return results.load(path.parent)
    except (ConfigError, RecordError):
        return None


def _assert_fast_only_where_slow(path: Path, raw: bytes) -> None:
    path.write_bytes(raw)
    fast = record_doc.from_json(raw)
    slow = _slow(path)
    if fast is not None:
        assert slow is not None, "the compiled read took a file harness report refuses"
        assert collect.load_record(path.parent) == (slow, "")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _base(tmp_path_factory.mktemp("base"))


def test_the_rich_record_is_read_by_the_compiled_pass(tmp_path: Path, base: Any):
    raw = json.dumps(base).encode()
    assert record_doc.from_json(raw) is not None
    (tmp_path / "results.json").write_bytes(raw)
    assert collect.load_record(tmp_path) == (rich(), "")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_tampered_value_is_taken_only_where_harness_report_takes_it(tmp_path: Path, base: Any,
                                                                      data: st.DataObject):
    doc = json.loads(json.dumps(base))
    for _ in range(data.draw(st.integers(1, 2))):
        paths = [p for p in _paths(doc) if p]
        where = data.draw(st.sampled_from(paths))
        parent = _parent(doc, where)
        action = data.draw(st.sampled_from(["replace", "drop", "add"]))
        if action == "drop" and isinstance(parent, dict):
            del parent[where[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[data.draw(st.text(max_size=8))] = data.draw(JSON)
        else:
            parent[where[-1]] = data.draw(JSON)
    _assert_fast_only_where_slow(tmp_path / "results.json", json.dumps(doc).encode())


def test_every_value_respelt_in_another_type_is_taken_only_where_harness_report_takes_it(
        tmp_path: Path, base: Any):
    path = tmp_path / "results.json"
    leaves = [p for p in _paths(base) if p and not isinstance(_parent(base, p)[p[-1]], (dict, list))]
    assert len(leaves) > 80
    taken = 0
    for where in leaves:
        for value in _respelt(_parent(base, where)[where[-1]]):
            doc = json.loads(json.dumps(base))
            _parent(doc, where)[where[-1]] = value
            raw = json.dumps(doc).encode()
            _assert_fast_only_where_slow(path, raw)
            taken += record_doc.from_json(raw) is not None
    assert taken > 50  # the compiled read is no refuse-all: an int where a float belongs is JSON's own


def test_every_key_dropped_is_taken_only_where_harness_report_takes_it(tmp_path: Path, base: Any):
    keys = [p for p in _paths(base) if p and isinstance(_parent(base, p), dict)]
    assert len(keys) > 80
    for where in keys:
        doc = json.loads(json.dumps(base))
        del _parent(doc, where)[where[-1]]
        _assert_fast_only_where_slow(tmp_path / "results.json", json.dumps(doc).encode())


@pytest.mark.parametrize("spelt", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1E309"])
@pytest.mark.parametrize("number", ["0.5", "120000.0", "300.0", "30.0", "12.4"])
def test_a_number_out_of_range_or_not_finite_is_refused(tmp_path: Path, base: Any, spelt: str,
                                                        number: str):
    raw = json.dumps(base).replace(f": {number}", f": {spelt}", 1)
    assert spelt in raw
    _assert_fast_only_where_slow(tmp_path / "results.json", raw.encode())
    assert record_doc.from_json(raw.encode()) is None


def test_nesting_too_deep_or_a_document_cut_short_is_refused_not_a_crash(tmp_path: Path, base: Any):
    text = json.dumps(base)
    deep = text[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}"
    for raw in (deep, text[:-1], text[: len(text) // 2]):
        _assert_fast_only_where_slow(tmp_path / "results.json", raw.encode())
        assert record_doc.from_json(raw.encode()) is None
