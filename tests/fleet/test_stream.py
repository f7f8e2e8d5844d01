"""A fleet report streams its nodes: each results.json is read once, no run outlives its node, and the
outputs are the very ones the whole records give (fleet.json, junit.xml, fleet.html, Prometheus)."""

from __future__ import annotations

import json
import math
import statistics
import weakref
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamfleet import full_load_run, make_fleet, report_outputs

from harness.fleet import collect, commands, dispatch
from harness.fleet import report as fleet_report
from harness.fleet.columns import SeriesBuilder
from harness.fleet.stats import MAD_TO_SIGMA, MEANAD_TO_SIGMA, SeriesKey, find_outliers, group
from harness.fsutil import atomic_write_chunks
from harness.model import RunRecord

KEY = SeriesKey("8x H100", "nccl", "nccl.busbw", "GB/s")


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(dispatch, "utcnow", lambda: "2026-11-30T00:00:00Z")
    root = tmp_path / "fleet"
    make_fleet(root, 24)
    return root


def test_streamed_outputs_are_those_of_whole_records(fleet: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    streamed = report_outputs(fleet, tmp_path / "streamed")
    monkeypatch.setattr(collect, "load_run", full_load_run)
    whole = report_outputs(fleet, tmp_path / "whole")
    for name in ("json", "junit", "html", "prom"):
        assert streamed[name] == whole[name], name
    doc = json.loads(streamed["json"])
    by_node = {n["node"]: n for n in doc["nodes"]}
    assert doc["verdict"] == "REJECTED" and [d["node"] for d in doc["drain"]] == ["n007"]
    assert by_node["broken"]["status"] == "ERRORED" and \
        "results.json: run_id: Field required (and 11 more)" in by_node["broken"]["reason"]
    assert by_node["waiting"]["status"] == "PENDING" and by_node["gone"]["status"] == "ERRORED"
    assert by_node["odd"]["status"] == "ERRORED"  # the schema refuses what results.load refuses
    assert "results.json: checks.1.metrics.0.labels: should be a valid dictionary" in by_node["odd"]["reason"]
    assert "results.json: checks.1.metrics.0.unit: Field required" in by_node["nounit"]["reason"]
    flagged = {(o["node"], o["metric"]) for o in doc["outliers"]}
    assert {("n003", "app.bw"), ("n007", "app.bw")} <= flagged
    assert "RECORDED, not judged: 4 metric(s) measured" in streamed["junit"]  # counted, though streamed
    assert 'harness_run_verdict{node="n005",suite="fleet-test",verdict="ACCEPTED"} 1.0' in streamed["prom"]
    assert 'harness_fleet_node_status{node="waiting",status="PENDING"} 1.0' in streamed["prom"]


def test_repeats_fold_into_one_series_value(fleet: Path):
    rep = commands.analyse_dir(fleet, poll=False)
    (key,) = [k for k in rep.series if k.metric == "app.lat"]
    assert key.labels == (("size", "4096"),)
    assert rep.series[key]["n001"] == pytest.approx(10.0 + 1 + 0.5) and len(rep.series[key]) == 24


def test_no_run_outlives_its_node_and_each_is_read_once(fleet: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    loaded: list[weakref.ref[RunRecord]] = []
    most_alive = 0
    real = collect.load_run

    def counting(run_dir: Path) -> tuple[RunRecord | None, list[Any], str]:
        nonlocal most_alive
        got = real(run_dir)
        if got[0] is not None:
            loaded.append(weakref.ref(got[0]))
        most_alive = max(most_alive, sum(r() is not None for r in loaded))
        return got

    monkeypatch.setattr(collect, "load_run", counting)
    rep = commands.analyse_dir(fleet, poll=False)
    fleet_report.write(tmp_path, rep)
    assert len(loaded) == 24  # every valid run once; broken, odd and nounit yield none
    assert most_alive <= 2  # the node being read, and the one before it at most
    assert sum(r() is not None for r in loaded) == 0  # the report holds none
    assert all(n.record is None for n in rep.nodes)
    assert rep.record_of(next(n for n in rep.nodes if n.node == "n005")) is not None  # read again on demand
    assert rep.record_of(next(n for n in rep.nodes if n.node == "waiting")) is None


def test_a_report_without_junit_suites_renders_the_same_junit(fleet: Path):
    full = commands.analyse_dir(fleet, poll=False)
    bare = commands.analyse_dir(fleet, poll=False, junit=False)
    assert bare.junit == () and len(full.junit) == len(full.nodes)
    assert fleet_report.render_junit(bare) == fleet_report.render_junit(full)


# ------------------------------------------------------------------ columns vs the plain algorithm


def reference_outliers(key: SeriesKey, values: dict[str, float], better: str, threshold: float = 3.5,
                       min_nodes: int = 4, min_rel: float = 0.05) -> list[tuple[Any, ...]]:
    """The outlier rule in plain Python (statistics.median, sum): what the columns must give exactly."""
    finite = {n: v for n, v in values.items() if math.isfinite(v)}
    if len(finite) < min_nodes:
        return []
    med = statistics.median(finite.values())
    dev = [abs(v - med) for v in finite.values()]
    mad = statistics.median(dev)
    sigma = MAD_TO_SIGMA * mad if mad > 0 else MEANAD_TO_SIGMA * (sum(dev) / len(dev))
    out = []
    for node, v in finite.items():
        z = 0.0 if sigma == 0 or not math.isfinite(sigma) else (v - med) / sigma
        far = med == 0 or abs(v - med) >= min_rel * abs(med)
        bad = {"higher": z <= -threshold, "lower": z >= threshold}.get(better, abs(z) >= threshold)
        if far and bad:
            out.append((node, key, v, med, sigma, z, better, len(finite)))
    return sorted(out, key=lambda o: (-abs(o[5]), o[0]))


values = st.one_of(st.floats(min_value=-1e6, max_value=1e6),
                   st.sampled_from([0.0, 100.0, math.nan, math.inf]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), values), min_size=1, max_size=80),
       st.sampled_from(["higher", "lower", "none"]))
def test_columns_give_the_very_floats_of_the_plain_rule(samples, better):
    """Repeats average as stats.group does; medians, sigma and z match to the last bit."""
    builder = SeriesBuilder()
    for node, v in samples:  # nodes arrive one after another, a node's repeats together
        builder.start_node(f"n{node}")
        builder.add(KEY, v)
    table = builder.table()
    plain = group((KEY, f"n{node}", v) for node, v in samples)
    assert table[KEY] == pytest.approx(plain[KEY], nan_ok=True) and list(table[KEY]) == list(plain[KEY])
    got = [(o.node, o.key, o.value, o.median, o.sigma, o.z, o.better, o.n)
           for o in table.outliers(lambda k: better)]
    assert got == reference_outliers(KEY, plain[KEY], better)
    assert got == [(o.node, o.key, o.value, o.median, o.sigma, o.z, o.better, o.n)
                   for o in find_outliers(plain, lambda k: better)]


def test_repeats_and_a_node_seen_twice_average_in_arrival_order():
    b = SeriesBuilder()
    b.add_samples("a", [(KEY, 1.0), (KEY, 2.0), (KEY, 6.0)])
    b.add_samples("b", [(KEY, 5.0)])
    b.add_samples("a", [(KEY, 3.0)])  # the same name again, later: still one value of node a
    assert b.table()[KEY] == {"a": 3.0, "b": 5.0}
    assert b.table()[KEY] == group([(KEY, "a", 1.0), (KEY, "a", 2.0), (KEY, "a", 6.0), (KEY, "b", 5.0),
                                    (KEY, "a", 3.0)])[KEY]


def test_fleet_html_is_written_in_pieces_and_a_failure_keeps_the_old_file(tmp_path: Path):
    path = tmp_path / "fleet.html"
    atomic_write_chunks(path, iter(["<p>", "ü" * 3, "</p>"]))
    assert path.read_text() == "<p>üüü</p>" and oct(path.stat().st_mode & 0o777) != "0o600"

    def broken() -> Any:
        yield "<p>half"
        raise RuntimeError("template failed")

    with pytest.raises(RuntimeError):
        atomic_write_chunks(path, broken())
    assert path.read_text() == "<p>üüü</p>" and [p.name for p in tmp_path.iterdir()] == ["fleet.html"]
