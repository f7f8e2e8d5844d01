"""The fleet's junit.xml, one <testsuite> per node, built node by node as the runs stream past.

Each node's suite is rendered while its run is in memory and kept as compressed text; its place
in the file (the `id`, worst node first) is filled in when the fleet is sorted. Every testcase's
classname starts with its node (`gpu001.nccl`), so each (classname, name) pair is distinct across
the fleet: GitLab merges testcases that share one.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from harness.fleet.collect import NodeOutcome, NodeStatus
from harness.report import junit as run_junit
from harness.report.junit import xml_text

INDENT = "  "
_ID = "#"  # placeholder of the suite's id until the node's place is known
_ID_ATTR = f' id="{_ID}"'


@dataclass(frozen=True)
class SuiteXml:
    """One node's <testsuite>, indented as a child of <testsuites>, zlib-compressed."""

    data: bytes
    tests: int
    failures: int
    errors: int

    def text(self, index: int) -> str:
        # the suite's own start tag comes first and an attribute value cannot hold a bare quote,
        # so the first ' id="#"' is the suite's
        return zlib.decompress(self.data).decode("utf-8").replace(_ID_ATTR, f' id="{index}"', 1)


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


def node_suite(n: NodeOutcome) -> SuiteXml:
    """The node's own run as a testsuite named after the node, plus a case for a job problem."""
    suite = run_junit.junit_tree(n.record).find("testsuite") if n.record is not None else None
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
    suite.set("id", _ID)
    props = suite.find("properties")
    if props is None:
        props = ET.Element("properties")
        suite.insert(0, props)
    for key, value in (("node_status", n.status.value), ("node_reason", n.reason),
                       ("job_id", n.job_id or ""), ("job_state", n.job_state)):
        ET.SubElement(props, "property", name=key, value=xml_text(value))
    text = indented(suite, 1)
    return SuiteXml(zlib.compress(text.encode("utf-8"), 1), *(int(suite.get(a, "0"))
                                                             for a in ("tests", "failures", "errors")))


def _cdata(text: str) -> str:
    """Character data escaped as ElementTree escapes it."""
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    return text


def _attr(text: str) -> str:
    """An attribute value escaped as ElementTree escapes it: as character data, and quotes and
    line breaks too."""
    text = _cdata(text)
    for raw, entity in _ATTR_MORE:
        if raw in text:
            text = text.replace(raw, entity)
    return text


_ATTR_MORE = (('"', "&quot;"), ("\r", "&#13;"), ("\n", "&#10;"), ("\t", "&#09;"))


def indented(el: ET.Element, level: int) -> str:
    """ET.indent(el, INDENT, level) then ET.tostring(el) without its tail, in one pass and without
    changing `el`: the very text, at a third of the cost (a fleet renders one suite a node)."""
    out: list[str] = []
    _write(el, level, out)
    return "".join(out)


def _write(el: ET.Element, depth: int, out: list[str]) -> None:
    tag = el.tag
    out.append("<" + tag + "".join(f' {k}="{_attr(v)}"' for k, v in el.items()))
    text = el.text
    n = len(el)
    if n:
        inner, outer = "\n" + INDENT * (depth + 1), "\n" + INDENT * depth
        out.append(">" + _cdata(text if text and text.strip() else inner))
        for i, child in enumerate(el):
            _write(child, depth + 1, out)
            tail = child.tail
            out.append(_cdata(tail) if tail and tail.strip() else inner if i < n - 1 else outer)
        out.append("</" + tag + ">")
    elif text:
        out.append(">" + _cdata(text) + "</" + tag + ">")
    else:
        out.append(" />")


def render(name: str, suites: Sequence[SuiteXml]) -> str:
    """One <testsuites> with the nodes' suites in the order given."""
    return "".join(render_chunks(name, suites))


def render_chunks(name: str, suites: Sequence[SuiteXml]) -> Iterator[str]:
    """render in pieces, a node's suite at a time (never the whole file in memory)."""
    root = ET.Element("testsuites", name=name)
    for attr in ("tests", "failures", "errors"):
        root.set(attr, str(sum(getattr(s, attr) for s in suites)))
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    if not suites:
        yield ET.tostring(root, encoding="unicode") + "\n"
        return
    ET.SubElement(root, "x")
    ET.indent(root, space=INDENT)
    start, end = ET.tostring(root, encoding="unicode").split("<x />")
    yield start
    for i, s in enumerate(suites):
        yield (f"\n{INDENT}" if i else "") + s.text(i)
    yield end + "\n"
