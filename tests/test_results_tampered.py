"""Run files edited by hand or by a hostile user: results.json and checks/ID.json are validated on
read, and a bad value is one error naming the file and the field (RecordError, exit 2)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import report_samples as samples

from harness import results
from harness.errors import RecordError

HISTORY = {
    "store": "/var/lib/harness/history.sqlite",
    "node": {"id": 1, "name": "gpu-node-017", "system_serial": "S1", "gpus": 8, "runs_before": 1,
             "first_seen": "2024-04-01T10:00:00+00:00"},
    "golive": {"run_id": "r0", "started": "2024-04-01T10:00:00+00:00", "verdict": "ACCEPTED"},
    "previous": None, "changes": [], "events": [], "drifted": [],
    "trends": [{"check": "nccl-allreduce", "metric": "nccl.busbw", "labels": {"op": "all_reduce"},
                "part": None, "unit": "GB/s", "better": "higher",
                "points": [{"run_id": "r0", "started": "2024-04-01", "verdict": "ACCEPTED", "value": 350.0}],
                "golive": {"run_id": "r0", "value": 350.0}, "previous": None, "current": 355.2,
                "low": 324.0, "high": None}],
}


def doc() -> dict[str, Any]:
    d = samples.record().to_dict()
    d["history"] = copy.deepcopy(HISTORY)
    return d


def written(tmp_path: Path, d: dict[str, Any]) -> Path:
    (tmp_path / "results.json").write_text(json.dumps(d))
    return tmp_path


def test_the_sample_with_a_history_snapshot_is_valid(tmp_path: Path):
    assert results.validate(doc()) == []
    assert results.load(written(tmp_path, doc())).history["trends"][0]["current"] == 355.2


@pytest.mark.parametrize(("where", "value", "field", "why"), [
    (("inventory", "gpus"), -1, "inventory.gpus", "valid list"),
    (("inventory", "gpus", 0, "index"), "3", "inventory.gpus.0.index", "valid integer"),
    (("inventory", "block_devices", 0), "nvme0n1", "inventory.block_devices.0", "valid dictionary"),
    (("history", "trends", 0, "points", 0, "value"), "hot", "history.trends.0.points.0.value",
     "valid number"),
    (("history", "trends", 0, "labels"), "hot", "history.trends.0.labels", "valid dictionary"),
    (("history", "node"), -1, "history.node", "valid dictionary"),
    (("history", "events"), -1, "history.events", "valid list"),
    (("history", "golive", "run_id"), 7, "history.golive.run_id", "valid string"),
    (("checks", 0, "duration_s"), "soon", "checks.0.duration_s", "valid number"),
    (("checks", 0, "metrics", 0, "labels", "op"), None, "checks.0.metrics.0.labels.op",
     "valid string or a valid integer"),
    (("checks", 0, "metrics", 0, "value"), float("nan"), "checks.0.metrics.0.value", "not a finite number"),
    (("checks", 2, "evaluations", 0, "reference"), float("inf"), "checks.2.evaluations.0.reference",
     "not a finite number"),
    (("checks", 0, "details"), {"psus": [{"psu": "PSU1", "peak_in_w": "lots"}]},
     "checks.0.details.psus.0.peak_in_w", "valid number"),
    (("checks", 0, "details"), {"audit": {"facts": [{"name": "x", "value": {"a": 1}}]}},
     "checks.0.details.audit.facts.0.value", "valid string"),
    (("checks", 0, "details"), {"telemetry": {"file": ["raw/x"]}}, "checks.0.details.telemetry.file",
     "valid string"),
    (("checks", 0, "id"), None, "checks.0.id", "valid string"),
    # every section of harness/sections.py, not only those above: the observe window, settle, power
    (("checks", 0, "details"), {"findings": [{"resource": "cpu", "share": "most"}]},
     "checks.0.details.findings.0.share", "valid number"),
    (("checks", 0, "details"), {"findings": [{"resource": "io", "processes": [{"pid": "1"}]}]},
     "checks.0.details.findings.0.processes.0.pid", "valid integer"),
    (("checks", 0, "details"), {"series": {"file": 7}}, "checks.0.details.series.file", "valid string"),
    (("checks", 0, "details"), {"primary": ["gpu"]}, "checks.0.details.primary", "valid string"),
    (("checks", 0, "details"), {"settle": {"waited_s": "long"}}, "checks.0.details.settle.waited_s",
     "valid number"),
    (("checks", 0, "details"), {"settle": {"gpus": [{"gpu": 0, "settled": "yes"}]}},
     "checks.0.details.settle.gpus.0.settled", "valid boolean"),
    (("checks", 0, "details"), {"power": {"file": "raw/p/power.json", "samples": "many"}},
     "checks.0.details.power.samples", "valid integer"),
    (("checks", 0, "details"), {"notes": "one"}, "checks.0.details.notes", "valid list"),
    (("checks", 0, "details"), {"controllers": [{"name": "nvme0", "serial": 5}]},
     "checks.0.details.controllers.0.serial", "valid string"),
    (("checks", 0, "details"), {"contention": {"before": {"steal": "high"}}},
     "checks.0.details.contention.before.steal", "valid number"),
    (("checks", 0, "details"), {"contention": {"during": {"gpu_processes": "GPU 2: pid 4242"}}},
     "checks.0.details.contention.during.gpu_processes", "valid list"),
])
def test_a_bad_value_is_one_line_naming_file_and_field(tmp_path: Path, where: tuple, value: Any,
                                                        field: str, why: str):
    d = doc()
    node = d
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    with pytest.raises(RecordError) as e:
        results.load(written(tmp_path, d))
    text = str(e.value)
    assert e.value.field == field, text
    assert why in text and text.startswith(f"{tmp_path / 'results.json'}: {field}: ")
    assert len(text.splitlines()) == 1


def test_a_missing_field_is_named(tmp_path: Path):
    d = doc()
    del d["checks"][1]["status"]
    with pytest.raises(RecordError) as e:
        results.load(written(tmp_path, d))
    assert e.value.field == "checks.1.status" and "Field required" in str(e.value)


def test_a_hostile_key_is_escaped_in_the_error(tmp_path: Path):
    d = doc()
    d["checks"][0]["metrics"][0]["labels"] = {"\x1b[2J\nFAKE": None}
    with pytest.raises(RecordError) as e:
        results.load(written(tmp_path, d))
    text = str(e.value)
    assert "\x1b" not in text and "\n" not in text and "\\x1b[2J\\nFAKE" in text


def test_a_nested_bomb_is_an_error_not_a_recursion_crash(tmp_path: Path):
    (tmp_path / "results.json").write_text('{"format_version": 1, "host": ' + "[" * 100_000 + "]" * 100_000
                                           + "}")
    with pytest.raises(RecordError, match="nested too deeply"):
        results.load(tmp_path)


def test_check_files_are_validated_too(tmp_path: Path):
    check = samples.record().checks[0].to_dict()
    path = tmp_path / "c.json"
    path.write_text(json.dumps(check))
    assert results.load_check(path).id == check["id"]
    path.write_text(json.dumps({**check, "metrics": [{"name": "x", "value": "fast", "unit": "GB/s"}]}))
    with pytest.raises(RecordError, match=r"c\.json: metrics\.0\.value: "):
        results.load_check(path)
    path.write_text(json.dumps({**check, "details": {"controllers": [{"name": "nvme0", "link": 4}]}}))
    with pytest.raises(RecordError, match=r"details\.controllers\.0\.link"):
        results.load_check(path)
    path.write_text("[")
    with pytest.raises(RecordError, match="cannot read"):
        results.load_check(path)


def test_the_schema_describes_the_sections():
    schema = results.json_schema()
    props = schema["properties"]
    assert props["history"]["properties"]["trends"]["type"] == "array"
    assert props["inventory"]["properties"]["gpus"]["type"] == "array"
    details = schema["$defs"]["CheckResult"]["properties"]["details"]
    assert set(details["properties"]) >= {"audit", "psus", "telemetry", "power", "controllers", "contention"}


@pytest.mark.parametrize("field", ["reference", "measured", "low", "high"])
def test_a_number_written_as_text_is_one_error_not_a_crash(tmp_path: Path, field: str):
    """A reference of "NaN" (text: the schema's lax float took it) made `harness report` crash."""
    import subprocess
    import sys

    d = doc()
    ev = next(e for c in d["checks"] for e in c.get("evaluations", []))
    ev[field] = "NaN"
    run = written(tmp_path, d)
    with pytest.raises(RecordError, match=f"{field} 'NaN' is not a number"):
        results.load(run)
    r = subprocess.run([sys.executable, "-m", "harness", "report", str(run)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "internal error" not in r.stderr
    assert f"results.json: not a run record: TypeError: {field} 'NaN' is not a number" in r.stderr
