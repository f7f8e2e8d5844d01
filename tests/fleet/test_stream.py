"""A fleet report streams its nodes: each results.json is read once, no run outlives its node, and the
outputs are the very ones the whole records give (fleet.json, junit.xml, fleet.html, Prometheus)."""

from __future__ import annotations

import json
import math
import statistics
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fleet_samples import record
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import results
from harness.fleet import collect, commands, dispatch, layout
from harness.fleet import report as fleet_report
from harness.fleet.columns import SeriesBuilder
from harness.fleet.layout import Manifest, NodeJob, SeenJob
from harness.fleet.slurmtext import JobInfo
from harness.fleet.stats import MAD_TO_SIGMA, MEANAD_TO_SIGMA, SeriesKey, find_outliers, group
from harness.fsutil import atomic_write_chunks
from harness.model import CheckResult, Metric, RunRecord, Status
from harness.report import prometheus as prom

KEY = SeriesKey("8x H100", "nccl", "nccl.busbw", "GB/s")


def _extra(rec: RunRecord, i: int) -> RunRecord:
    """A recorded check (its junit case counts its metrics) and a metric repeated three times."""
    reps = [Metric("app.lat", 10.0 + i % 4 + r * 0.5, "us", {"repeat": r, "size": 4096}) for r in range(3)]
    rec_check = CheckResult("ckpt", "fio", Status.RECORDED, "wrote 1 GiB", "2026-11-29T10:00:02Z", 1.0,
                            (Metric("ckpt.bw", 2.0 + i / 100, "GB/s", {"job": "w&r"}), *reps))
    return replace(rec, checks=(*rec.checks, rec_check))


def make_fleet(root: Path, n: int) -> None:
    """n nodes with runs (one slow, one failed), one whose job died, one pending, one unreadable."""
    nodes = [f"n{i:03d}" for i in range(n)]
    for i, nd in enumerate(nodes):
        bw = 30.0 if i == 7 else 60.0 if i == 3 else 100.0 + i % 5
        d = layout.node_dir(root, nd) / f"{nd}-20261129T100000Z"
        d.mkdir(parents=True)
        results.write(d, _extra(record(nd, bw, cpus=64 + i % 2), i))
    extra = ["gone", "waiting", "broken", "odd", "nounit"]
    bad = layout.node_dir(root, "broken") / "broken-20261129T100000Z"
    bad.mkdir(parents=True)
    (bad / "results.json").write_text('{"format_version": 1, "checks": [{"id": 1}]}')
    for nd, edit in (("odd", _odd), ("nounit", _no_unit)):  # hand-edited files: refused alike both ways
        d = layout.node_dir(root, nd) / f"{nd}-20261129T100000Z"
        d.mkdir(parents=True)
        results.write(d, record(nd, 101.0))
        doc = json.loads((d / "results.json").read_text())
        edit(doc["checks"][1]["metrics"][0])
        (d / "results.json").write_text(json.dumps(doc))
    jobs = {nd: NodeJob(nd, str(100 + i)) for i, nd in enumerate([*nodes, *extra])}
    done = {nd: SeenJob(JobInfo(jobs[nd].job_id or "", "FAILED" if nd == "n007" else "COMPLETED", "", nd,
                                "h", 0, 0), "2026-11-29T10:31:00Z") for nd in [*nodes, *extra[2:]]}
    done["gone"] = SeenJob(JobInfo(jobs["gone"].job_id or "", "NODE_FAIL", "", "gone", "h", 1, 0), "t")
    done["waiting"] = SeenJob(JobInfo(jobs["waiting"].job_id or "", "PENDING", "Priority", "", "h", None, 0),
                              "t")
    layout.save_manifest(root, Manifest("/s.yaml", "stream", None, (*nodes, *extra), "2026-11-29T10:00:00Z",
                                        jobs))
    layout.save_jobs(root, done)


def _odd(metric: dict[str, Any]) -> None:
    """Labels as a list of pairs with a nested value, the value as text: the schema refuses the labels."""
    metric["labels"] = [["gpu", 0], ["path", {"a": [1, 2]}]]
    metric["value"] = "101.5"


def _no_unit(metric: dict[str, Any]) -> None:
    del metric["unit"]


def _full_load_run(run_dir: Path) -> tuple[RunRecord | None, list[Any], str]:
    """The reference: whole records, as `load_record` builds them."""
    rec, why = collect.load_record(run_dir)
    return rec, collect.metric_rows(rec) if rec is not None else [], why


def _outputs(root: Path, out: Path) -> dict[str, str]:
    rep = commands.analyse_dir(root, poll=False)
    out.mkdir()
    paths = fleet_report.write(out, rep)
    texts = {k: p.read_text() for k, p in paths.items()}
    texts["prom"] = prom.exposition([s for n in rep.nodes for s in fleet_report.fleet_samples(rep, n.node)])
    return texts


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(dispatch, "utcnow", lambda: "2026-11-30T00:00:00Z")
    root = tmp_path / "fleet"
    make_fleet(root, 24)
    return root


def test_streamed_outputs_are_those_of_whole_records(fleet: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    streamed = _outputs(fleet, tmp_path / "streamed")
    monkeypatch.setattr(collect, "load_run", _full_load_run)
    whole = _outputs(fleet, tmp_path / "whole")
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
