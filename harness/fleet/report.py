"""Fleet outputs: fleet.json, one junit.xml with a testsuite per node (fleet.junit), fleet.html;
written atomically; and each node's Prometheus samples."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.fleet import junit as fleet_junit
from harness.fleet.analysis import FleetReport
from harness.fleet.collect import NodeOutcome, NodeStatus
from harness.fleet.html import html_chunks
from harness.fleet.stats import Outlier
from harness.fsutil import atomic_write_chunks, atomic_write_json
from harness.platform import forked

if TYPE_CHECKING:
    from harness.report import prometheus as prom

FORMAT_VERSION = 1
JSON_NAME, JUNIT_NAME, HTML_NAME = "fleet.json", "junit.xml", "fleet.html"
ASIDE_MIN = 400  # nodes from which fleet.html is rendered in a forked child beside fleet.json and junit.xml
ASIDE_TIMEOUT_S = 300.0  # the child's rendering, at most; then it is stopped and the parent renders
ASIDE_STOP_S = 2.0  # a stopped child's time to unwind (its temporary file removed) before SIGKILL


def outlier_dict(o: Outlier) -> dict[str, Any]:
    dev = o.deviation_pct
    return {"node": o.node, "sku": o.key.sku, "check": o.key.check, "metric": o.key.metric,
            "unit": o.key.unit, "labels": dict(o.key.labels), "value": o.value, "median": o.median,
            "sigma": o.sigma, "z": round(o.z, 3), "better": o.better, "nodes_in_series": o.n,
            "deviation_pct": None if dev is None else round(dev, 2)}


def node_dict(n: NodeOutcome, report: FleetReport) -> dict[str, Any]:
    return {"node": n.node, "status": n.status.value, "reason": n.reason, "job_id": n.job_id,
            "job_state": n.job_state, "run_dir": n.run_dir, "sku": n.sku,
            "drain_reason": n.drain_reason or None,
            "evidence": [{"check": e.check, "what": e.what, "detail": e.detail, "kind": e.kind}
                         for e in n.evidence],
            "outliers": [outlier_dict(o) for o in report.outliers_of(n.node)]}


def fleet_dict(report: FleetReport) -> dict[str, Any]:
    """fleet.json: verdict, counts, nodes worst first, nodes to drain, outliers."""
    s = report.settings
    return {
        "format_version": FORMAT_VERSION, "suite": report.suite, "profile": report.profile,
        "submitted": report.submitted, "generated": report.generated, "verdict": report.verdict,
        "counts": report.counts, "nodes_total": len(report.nodes),
        "drain": [{"node": n.node, "reason": n.drain_reason} for n in report.to_drain],
        "outlier_nodes": report.outlier_nodes,
        "outlier_settings": {"threshold": s.threshold, "min_nodes": s.min_nodes, "min_rel": s.min_rel},
        "nodes": [node_dict(n, report) for n in report.nodes],
        "outliers": [outlier_dict(o) for o in report.outliers],
    }


def render_junit(report: FleetReport) -> str:
    """One <testsuites> with a <testsuite> per node, worst node first."""
    return "".join(junit_chunks(report))


def junit_chunks(report: FleetReport) -> Iterator[str]:
    """render_junit in pieces, to be written as they come."""
    suites = report.junit
    if len(suites) != len(report.nodes):  # a report built without them
        suites = tuple(fleet_junit.node_suite(replace(n, record=report.record_of(n))) for n in report.nodes)
    return fleet_junit.render_chunks(f"fleet {report.suite}", suites)


def write(fleet_dir: Path, report: FleetReport) -> dict[str, Path]:
    """Write fleet.json, junit.xml and fleet.html into the fleet directory.

    A large fleet's fleet.html is rendered by a forked child while the parent writes the other two
    (the second core is idle otherwise). A child that fails or overruns leaves the rendering to the
    parent, so the files are the same either way.
    """
    paths = {"json": fleet_dir / JSON_NAME, "junit": fleet_dir / JUNIT_NAME, "html": fleet_dir / HTML_NAME}

    def write_html() -> None:
        atomic_write_chunks(paths["html"], html_chunks(report))

    child = forked.start(write_html) if len(report.nodes) >= ASIDE_MIN else None
    try:
        atomic_write_json(paths["json"], fleet_dict(report))
        atomic_write_chunks(paths["junit"], junit_chunks(report))
    except BaseException:
        if child is not None:
            child.end(0.0, term_s=ASIDE_STOP_S)
        raise
    if child is None or child.end(ASIDE_TIMEOUT_S, term_s=ASIDE_STOP_S) != 0:
        write_html()
    return paths


def fleet_samples(report: FleetReport, node: str) -> list[prom.Sample]:
    """One node's Prometheus samples in a fleet: its run (if any), its fleet status and its outliers."""
    from harness.report import prometheus as prom  # start-up: only when exporting

    out: list[prom.Sample] = []
    outcome = next(n for n in report.nodes if n.node == node)
    uuids: dict[str, str] = {}
    record = report.record_of(outcome)
    if record is not None:
        out += prom.run_samples(record, node)
        uuids = prom.gpu_uuids(record.inventory)
    out += [prom.Sample("harness_fleet_node_status", (("node", node), ("status", s.value)),
                        1.0 if outcome.status is s else 0.0) for s in NodeStatus]
    for o in report.outliers_of(node):
        labels = {k: v for k, v in o.key.labels if k != prom.SWEEP}
        base = (("node", node), ("check", o.key.check), ("metric", prom.family(o.key.metric, o.key.unit)))
        out.append(prom.Sample("harness_fleet_outlier_zscore",
                               tuple(sorted(base + prom.label_pairs(labels, uuids))), o.z))
    return out
