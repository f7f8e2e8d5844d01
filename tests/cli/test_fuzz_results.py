"""Fuzz: any field of a real results.json, or of its saved series, set to any JSON value (or
deleted), then `harness report`, `history import` and `compare` on it: exit 0, or exit 2 with one
line naming the file; never a traceback or an internal error (hypothesis, bounded)."""

from __future__ import annotations

import copy
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import report_samples as samples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main as cli
from harness.run.sampler import save as save_telemetry
from harness.series import power, telemetry

HISTORY = {
    "store": "/var/lib/harness/history.sqlite",
    "node": {"id": 1, "name": "gpu-node-017", "system_serial": "S1", "gpus": 8, "runs_before": 1,
             "first_seen": "2024-04-01T10:00:00+00:00"},
    "golive": {"run_id": "r0", "started": "2024-04-01T10:00:00+00:00", "verdict": "ACCEPTED"},
    "previous": {"run_id": "r0", "started": "2024-04-01T10:00:00+00:00", "verdict": "ACCEPTED"},
    "changes": [{"run_id": "r1", "started": "2024-05-01", "kind": "gpu_swap", "detail": "GPU 3", "old": [],
                 "new": []}],
    "events": [{"run_id": "r1", "started": "2024-05-01", "kind": "software", "detail": "driver"}],
    "drifted": [{"metric": "nccl.busbw", "labels": {"op": "all_reduce"}, "outcome": "warn",
                 "message": "-6 %"}],
    "trends": [{"check": "nccl-allreduce", "metric": "nccl.busbw", "labels": {"op": "all_reduce"},
                "part": None, "unit": "GB/s", "better": "higher",
                "points": [{"run_id": "r0", "started": "2024-04-01", "verdict": "ACCEPTED", "value": 350.0},
                           {"run_id": "r1", "started": "2024-05-01", "verdict": "ACCEPTED", "value": 355.2}],
                "golive": {"run_id": "r0", "value": 350.0}, "previous": {"run_id": "r0", "value": 350.0},
                "current": 355.2, "low": 324.0, "high": None}],
}
EXTRA_CHECKS = [
    {"id": "audit", "kind": "config_audit", "status": "passed", "details": {"audit": {
        "facts": [{"name": "kernel.version", "labels": {"gpu": 0}, "value": "6.1", "source": "uname",
                   "reason": ""}],
        "outcomes": [{"fact": "kernel.version", "labels": {"gpu": 0}, "found": "6.1", "expected": "6.1",
                      "outcome": "pass", "message": "ok", "rule_source": "p", "note": "n"}]}}},
    {"id": "nvme", "kind": "nvme_health", "status": "passed", "details": {"controllers": [
        {"name": "nvme0", "model": "m", "serial": "s", "link": {"gen": 4, "width": 4, "downgraded": True}}]}},
    {"id": "power", "kind": "power_headroom", "status": "passed",
     "details": {"power": {"file": "raw/power/power.json"},
                 "psus": [{"psu": "PSU1", "before": True, "during": False, "peak_in_w": 1000.0}]}},
    {"id": "burn", "kind": "gpu_burn", "status": "passed",
     "details": {"telemetry": {"file": "raw/burn/telemetry.json"}}},
]
TELEMETRY = telemetry.Series(1.0, tuple(float(i) for i in range(6)), {
    g: {"temp": tuple(50 + i for i in range(6)), "power": tuple(300.0 + i for i in range(6)),
        "clocks_event_reasons": (0, 4, 4, 0, 0, 8)} for g in range(3)}, {1: (3.0, "gone")})
POWER = power.PowerSeries(1.0, (-1.0, 0.0, 1.0, 2.0), ("before", "load", "load", "cooldown"),
                          (500.0, 2000.0, 2100.0, 600.0), {0: (50.0, 300.0, 310.0, 60.0)},
                          {"PSU1": (True, True, False, None)}, {"PSU1": (250.0, 1000.0, 1050.0, 300.0)},
                          (True, True, False, None), (22.0, 23.0, 24.0, 25.0), False, None, 3000.0, "ipmi")


def base_files() -> dict[str, Any]:
    results = samples.record().to_dict()
    results["history"] = copy.deepcopy(HISTORY)
    results["checks"] += copy.deepcopy(EXTRA_CHECKS)
    return {"results.json": results, "raw/burn/telemetry.json": TELEMETRY.to_dict(),
            "raw/power/power.json": POWER.to_dict()}


def paths(node: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every field and element (the first two of a list), depth first."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield (*at, k)
            yield from paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:2]):
            yield (*at, i)
            yield from paths(v, (*at, i))


BASE = base_files()
TARGETS = [(name, p) for name, doc in BASE.items() for p in paths(doc)]
NASTY = [None, True, -1, 0, 2**64, 1e308, -1e308, float("nan"), float("inf"), "", "hot", "\x1b[2J\x00",
         " | FAILED gpu-burn: GPU 3 FAULTY", "../../etc/passwd", [], [1, "a"], {}, {"a": {"b": None}}]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)
DELETE = object()


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    old = sys.argv
    sys.argv = ["harness", *argv]
    try:
        cli.main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        sys.argv = old
    return code, capsys.readouterr().err


def _mutated(name: str, where: tuple[Any, ...], value: Any) -> dict[str, Any]:
    files = copy.deepcopy(BASE)
    node = files[name]
    for part in where[:-1]:
        node = node[part]
    if value is DELETE:
        del node[where[-1]]
    else:
        node[where[-1]] = value
    return files


def _write(run_dir: Path, files: dict[str, Any]) -> None:
    samples.write_raw(run_dir)
    for rel, doc in files.items():
        (run_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / rel).write_text(json.dumps(doc))


def test_the_unmutated_files_render_import_and_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    run_dir = tmp_path / "run"
    _write(run_dir, BASE)
    assert save_telemetry  # the sampler's writer writes the same shape as TELEMETRY.to_dict()
    for argv in (["report", str(run_dir)],
                 ["history", "import", str(run_dir), "--history", str(tmp_path / "h.sqlite")],
                 ["compare", str(run_dir), str(run_dir), "--history", str(tmp_path / "h.sqlite")]):
        code, err = _main(argv, capsys)
        assert code == 0, (argv, err)
    html = (run_dir / "report.html").read_text()
    assert "History and trends" in html and html.count("<svg") >= 3  # the series were drawn


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(target=st.sampled_from(TARGETS),
       value=st.sampled_from([*NASTY, DELETE]) | json_values)
def test_a_mutated_field_is_exit_0_or_one_error_line(capsys: pytest.CaptureFixture[str],
                                                      target: tuple[str, tuple[Any, ...]], value: Any):
    name, where = target
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        _write(run_dir, _mutated(name, where, value))
        store = str(Path(tmp) / "h.sqlite")
        for argv in (["report", str(run_dir)], ["history", "import", str(run_dir), "--history", store],
                     ["compare", str(run_dir), str(run_dir), "--history", store]):
            code, err = _main(argv, capsys)
            assert code in (0, 2), (argv, where, value, err)
            assert "Traceback" not in err and "internal error" not in err, err
            assert not any(ch in err for ch in "\x1b\x00")
            if code == 2:
                (line,) = err.splitlines()
                assert str(run_dir) in line, line
        shutil.rmtree(run_dir, ignore_errors=True)
