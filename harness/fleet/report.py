"""Fleet outputs: fleet.json, one junit.xml with a testsuite per node, fleet.html; written atomically.

In junit.xml every testcase's classname starts with its node (`gpu001.nccl`), so each
(classname, name) pair is distinct across the fleet: GitLab merges testcases that share one.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness.fleet.analysis import FleetReport
from harness.fleet.collect import NodeOutcome, NodeStatus
from harness.fleet.html import render_html
from harness.fleet.stats import Outlier
from harness.fsutil import atomic_write_json, atomic_write_text
from harness.report import junit as run_junit
from harness.report import prometheus as prom
from harness.report.junit import xml_text

FORMAT_VERSION = 1
JSON_NAME, JUNIT_NAME, HTML_NAME = "fleet.json", "junit.xml", "fleet.html"


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


def _job_case(suite: ET.Element, n: NodeOutcome) -> None:
    """A testcase for the Slurm job itself: an error when it failed, skipped while not done."""
    case = ET.SubElement(suite, "testcase", classname="slurm", name="job", time="0.000")
    count = "skipped" if n.status in (NodeStatus.PENDING, NodeStatus.RUNNING) else "errors"
    if count == "skipped":
        ET.SubElement(case, "skipped", message=xml_text(f"{n.status.value.lower()}: {n.reason}"))
    else:
        err = ET.SubElement(case, "error", message=xml_text(n.reason), type="job")
        err.text = xml_text(n.reason)
    for attr in ("tests", count):
        suite.set(attr, str(int(suite.get(attr, "0")) + 1))


def _node_suite(root: ET.Element, n: NodeOutcome, index: int) -> None:
    """The node's own run as a testsuite named after the node, plus a case for a job problem."""
    # parsing the XML run_junit.render_junit just produced: trusted input
    own = run_junit.render_junit(n.record) if n.record is not None else None
    suite = ET.fromstring(own).find("testsuite") if own is not None else None  # noqa: S314
    if suite is None:
        suite = ET.Element("testsuite", tests="0", failures="0", errors="0", skipped="0", time="0.000")
    job_failed = any(e.check == "slurm-job" for e in n.evidence)
    if n.record is None or job_failed:
        _job_case(suite, n)
    node = xml_text(n.node)
    for case in suite.iter("testcase"):
        case.set("classname", f"{node}.{case.get('classname', '')}")
    suite.set("name", node)
    suite.set("hostname", xml_text(n.node))
    suite.set("id", str(index))
    props = suite.find("properties")
    if props is None:
        props = ET.Element("properties")
        suite.insert(0, props)
    for key, value in (("node_status", n.status.value), ("node_reason", n.reason),
                       ("job_id", n.job_id or ""), ("job_state", n.job_state)):
        ET.SubElement(props, "property", name=key, value=xml_text(value))
    root.append(suite)


def render_junit(report: FleetReport) -> str:
    """One <testsuites> with a <testsuite> per node."""
    root = ET.Element("testsuites", name=f"fleet {report.suite}")
    for i, n in enumerate(report.nodes):
        _node_suite(root, n, i)
    for attr in ("tests", "failures", "errors"):
        root.set(attr, str(sum(int(s.get(attr, "0")) for s in root)))
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(fleet_dir: Path, report: FleetReport) -> dict[str, Path]:
    """Write fleet.json, junit.xml and fleet.html into the fleet directory."""
    paths = {"json": fleet_dir / JSON_NAME, "junit": fleet_dir / JUNIT_NAME, "html": fleet_dir / HTML_NAME}
    atomic_write_json(paths["json"], fleet_dict(report))
    atomic_write_text(paths["junit"], render_junit(report))
    atomic_write_text(paths["html"], render_html(report))
    return paths


def fleet_samples(report: FleetReport, node: str) -> list[prom.Sample]:
    """One node's Prometheus samples in a fleet: its run (if any), its fleet status and its outliers."""
    out: list[prom.Sample] = []
    outcome = next(n for n in report.nodes if n.node == node)
    uuids: dict[str, str] = {}
    if outcome.record is not None:
        out += prom.run_samples(outcome.record, node)
        uuids = prom.gpu_uuids(outcome.record.inventory)
    out += [prom.Sample("harness_fleet_node_status", (("node", node), ("status", s.value)),
                        1.0 if outcome.status is s else 0.0) for s in NodeStatus]
    for o in report.outliers_of(node):
        labels = {k: v for k, v in o.key.labels if k != prom.SWEEP}
        base = (("node", node), ("check", o.key.check), ("metric", prom.family(o.key.metric, o.key.unit)))
        out.append(prom.Sample("harness_fleet_outlier_zscore",
                               tuple(sorted(base + prom.label_pairs(labels, uuids))), o.z))
    return out
