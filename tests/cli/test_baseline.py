"""`harness baseline capture` and `harness compare` through the CLI: tolerances capped with a
warning when golden runs disagree, latency tails as warnings, a command metric's declared
direction, and tool output that cannot become YAML keys."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from clihelp import harness
from historyhelp import derive, load, quick_runs

from harness.model import CheckResult, Metric, RunRecord, Status


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> RunRecord:
    (run_dir,) = quick_runs(tmp_path_factory.mktemp("bl"), 1)
    return load(run_dir)


def _save(rec: RunRecord, where: Path) -> Path:
    where.mkdir(parents=True)
    (where / "results.json").write_text(json.dumps(rec.to_dict()))
    return where


def _app(rec: RunRecord, score: float, labels: dict[str, str] | None = None) -> RunRecord:
    """The record with a command check `app` whose metric app.score is declared `better: higher`."""
    app = CheckResult("app", "command", Status.RECORDED,
                      metrics=(Metric("app.score", score, "GB/s", labels or {}),))
    suite = {**rec.suite, "declared": {"app": {"app.score": "higher"}}}
    return replace(rec, checks=(*rec.checks, app), suite=suite)


def test_noisy_golden_runs_are_warned_with_numbers_and_tails_only_warn(real: RunRecord, tmp_path: Path):
    # before: upper 8.6255 on a p99.9, lower 0.512 on IOPS, every rule fail-level, no warning
    runs = [derive(real, f"g{i}", f"2026-01-0{i + 1}T00:00:00Z",
                   scale={"fio.clat_p999": s999, "fio.iops": siops})
            for i, (s999, siops) in enumerate(((1.0, 1.0), (9.6, 0.49), (1.1, 1.0)))]
    dirs = [_save(r, tmp_path / r.run_id) for r in runs]
    out = tmp_path / "golden.yaml"
    r = harness("baseline", "capture", *map(str, dirs), "--name", "golden", "--output", str(out))
    assert r.returncode == 0, r.stderr
    warned = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: ")]
    assert any("fio/fio.clat_p999" in w and "cap of 200%" in w and " to " in w for w in warned), warned
    assert any("fio/fio.iops" in w and "cap of 50%" in w for w in warned), warned
    doc = yaml.safe_load(out.read_text())
    rules = doc["expectations"]
    assert not any(e["metric"] in ("fio.clat_p999", "fio.iops") for e in rules)  # noisy: not written
    assert all(e.get("lower", 0) <= 0.5 and e.get("upper", 0) <= 2.0 for e in rules)
    tails = [e for e in rules if e["metric"] == "fio.clat_p99"]
    assert tails and all(e["severity"] == "warn" for e in tails)
    assert all("severity" not in e for e in rules if e["metric"] == "fio.bw")
    assert harness("validate", str(out)).returncode == 0
    r = harness("baseline", "capture", *map(str, dirs), "--name", "strict", "--tails", "fail",
                "--output", str(tmp_path / "strict.yaml"))
    assert r.returncode == 0, r.stderr
    strict = yaml.safe_load((tmp_path / "strict.yaml").read_text())["expectations"]
    assert not any("severity" in e for e in strict if e["metric"] == "fio.clat_p99")


def test_a_declared_direction_is_baselined_and_compare_shows_it(real: RunRecord, tmp_path: Path):
    # before: "app.score: not in the metric catalogue"; compare showed no direction
    runs = [_app(derive(real, f"a{i}", f"2026-02-0{i + 1}T00:00:00Z"), v)
            for i, v in enumerate((100, 98, 101))]
    dirs = [_save(r, tmp_path / r.run_id) for r in runs]
    out = tmp_path / "app.yaml"
    r = harness("baseline", "capture", *map(str, dirs), "--name", "app-golden", "--output", str(out))
    assert r.returncode == 0, r.stderr
    (rule,) = [e for e in yaml.safe_load(out.read_text())["expectations"] if e["metric"] == "app.score"]
    assert rule["check"] == "app" and rule["reference"] == 100 and "lower" in rule and "upper" not in rule
    assert "app.score" not in "".join(ln for ln in out.read_text().splitlines() if ln.startswith("#"))
    assert harness("validate", str(out)).returncode == 0
    r = harness("compare", str(dirs[0]), str(dirs[1]), "--json")
    assert r.returncode == 0, r.stderr
    (row,) = [x for x in json.loads(r.stdout)["rows"] if x["metric"] == "app.score"]
    assert row["better"] == "higher" and row["regression_pct"] == pytest.approx(2.0)
    r = harness("compare", str(dirs[0]), str(dirs[1]))
    assert any("app/app.score" in ln and "↑ higher" in ln for ln in r.stdout.splitlines()), r.stdout


def test_tool_output_never_becomes_a_yaml_key(real: RunRecord, tmp_path: Path):
    # before: a JSON key with newlines landed in a label, and skipped series written into the
    # comment header became top-level keys (hardware:, config:) of a file that passed validation
    evil = "x\nhardware:\n  gpu: {count: 99}\nconfig:\n- {fact: host.nproc, min: 1}\n#"
    runs = [_app(derive(real, f"e{i}", f"2026-03-0{i + 1}T00:00:00Z"), 50.0 + i, {evil: evil})
            for i in range(3)]
    odd = CheckResult(evil, "command", Status.RECORDED, metrics=(Metric("other.thing", 1.0, "W", {}),))
    runs = [replace(r, checks=(*r.checks, odd)) for r in runs]
    dirs = [_save(r, tmp_path / r.run_id) for r in runs]
    out = tmp_path / "evil.yaml"
    r = harness("baseline", "capture", *map(str, dirs), "--name", "evil", "--output", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    doc = yaml.safe_load(text)
    assert set(doc) <= {"name", "description", "sources", "hardware", "expectations"}
    assert "hardware" not in doc or doc["hardware"].get("gpu", {}).get("count") != 99
    (rule,) = [e for e in doc["expectations"] if e["metric"] == "app.score"]
    assert rule["labels"] == {evil: evil}  # a string key and value, exactly as the tool wrote them
    header = next(ln for ln in text.splitlines() if not ln.startswith("#"))
    assert header.startswith("name:")  # the comment header ended before the first real line
    assert "not baselined" in text and "x\\nhardware:" in text  # escaped in the comment
    assert harness("validate", str(out)).returncode == 0
