"""Issue #17: a node's results.json is validated as the fleet reads it. A tampered value (a negative
GPU list, a metric that reads "hot", a NaN) makes that node ERRORED with one line naming the file and
the field, as an unreadable file does; `harness fleet report` neither crashes nor judges the node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clihelp import harness
from fleetdirs import Edit, make_fleet, node_run_dir

from harness.fleet.collect import load_record, load_run


def _gpus(doc: dict[str, Any]) -> None:
    doc["inventory"]["gpus"] = -1


def _hot(doc: dict[str, Any]) -> None:
    doc["checks"][1]["metrics"][0]["value"] = "hot"


def _gpu_names(doc: dict[str, Any]) -> None:
    doc["inventory"]["gpus"] = ["not a gpu"]


@pytest.mark.parametrize(("edit", "field", "message"), [
    (_gpus, "inventory.gpus", "should be a valid list"),
    (_gpu_names, "inventory.gpus.0", "should be a valid dictionary"),
    (_hot, "checks.1.metrics.0.value", "should be a valid number"),
])
def test_a_tampered_value_is_one_line_naming_file_and_field(tmp_path: Path, edit: Edit, field: str,
                                                            message: str):
    make_fleet(tmp_path, {"bad": edit})
    path = node_run_dir(tmp_path, "bad") / "results.json"
    for record_, why in (load_record(path.parent), load_run(path.parent)[::2]):
        assert record_ is None and why.startswith(f"{path}: {field}: {message}") and "\n" not in why
    assert load_run(path.parent)[1] == []  # nothing of it reaches the fleet statistics


def test_a_nan_is_named_by_its_field(tmp_path: Path):
    make_fleet(tmp_path, {"nan": lambda doc: None})
    path = node_run_dir(tmp_path, "nan") / "results.json"
    raw = path.read_text().replace('"value": 100.0', '"value": NaN', 1)
    assert "NaN" in raw
    path.write_text(raw)
    rec, why = load_record(path.parent)
    assert rec is None and why == f"{path}: checks.1.metrics.0.value: nan is not a finite number"


def _report(fleet: Path) -> tuple[int, str, dict[str, Any]]:
    r = harness("fleet", "report", str(fleet))
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    return r.returncode, r.stdout + r.stderr, json.loads((fleet / "fleet.json").read_text())


def test_fleet_report_treats_a_tampered_node_as_an_unreadable_one(tmp_path: Path):
    rc_unreadable, _, doc = _report(_fleet(tmp_path / "unreadable", {"bad": '{"format_version": 1, "run'}))
    assert doc["verdict"] == "ERRORED"
    rc, out, doc = _report(_fleet(tmp_path / "tampered", {"bad": _gpus, "hot": _hot}))
    assert rc == rc_unreadable == 3, out
    by_node = {n["node"]: n for n in doc["nodes"]}
    assert doc["verdict"] == "ERRORED" and doc["drain"] == []
    assert [n for n, o in by_node.items() if o["status"] != "ACCEPTED"] == ["bad", "hot"]
    assert "results.json: inventory.gpus: should be a valid list" in by_node["bad"]["reason"]
    assert "results.json: checks.1.metrics.0.value: should be a valid number" in by_node["hot"]["reason"]
    html = (tmp_path / "tampered" / "fleet.html").read_text()
    assert "Errored nodes (2)" in html and "inventory.gpus" in html


def _fleet(root: Path, bad: dict[str, Edit | str]) -> Path:
    make_fleet(root, bad)
    return root
