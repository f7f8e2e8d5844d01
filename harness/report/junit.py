"""JUnit XML for CI test reporters (Jenkins, GitLab, GitHub): one testcase per evaluation.

A failed expectation is a <failure>; a tool or environment problem is an <error>, never a
failure; warnings and known issues pass with a note in <system-out>. A recorded check (measured,
no rule to judge) is a passing "run" case whose <system-out> starts "RECORDED". An UNTESTED run
adds one <error type="untested"> case, "verdict": a report with nothing judged must not look green.
A check --only/--skip left out is a skipped case whose message names the option and who expects it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import datetime, timezone

from harness.model import CheckResult, Evaluation, Outcome, RunRecord, Status
from harness.report.audit import is_audit_evaluation
from harness.report.fmt import expectation_text, fmt_expected, fmt_labels

# characters XML 1.0 forbids, even escaped
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(s: object) -> str:
    """Text with the characters XML 1.0 cannot carry removed."""
    return _ILLEGAL.sub("", str(s))


def _timestamp(iso: str) -> str | None:
    """UTC timestamp without zone, as the JUnit schema wants it; None when unparsable."""
    try:
        t = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is not None:
        t = t.astimezone(timezone.utc).replace(tzinfo=None)
    return t.isoformat(timespec="seconds")


def _case(suite: ET.Element, check: CheckResult, name: str, time_s: float) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=xml_text(check.id), name=xml_text(name),
                         time=f"{max(time_s, 0.0):.3f}")


def _child(parent: ET.Element, tag: str, text: str = "", **attrs: str) -> None:
    el = ET.SubElement(parent, tag, {k: xml_text(v) for k, v in attrs.items()})
    if text:
        el.text = xml_text(text)


def _case_name(ev: Evaluation, twins: int) -> str:
    """metric{labels} [reduce]; with the rule's bound when another rule of the check has the same
    name (host.shm_bytes >= 256 MiB and >= 1 GiB are two cases a CI reporter must tell apart)."""
    name = ev.metric + fmt_labels(ev.labels) + ("" if ev.reduce == "each" else f" [{ev.reduce}]")
    if twins > 1:
        bound = fmt_expected(ev)
        name += f" ({bound if bound != 'any' else ev.severity}{', warn' if ev.severity == 'warn' else ''})"
    return name


def _what(ev: Evaluation) -> tuple[str, str]:
    """(what was measured against what was expected, said once; the finding's own sentence, when it
    says more). A config fact's rule words both itself ('found 8 MiB, expected unlimited')."""
    if is_audit_evaluation(ev) and ev.message:
        return ev.message, ""
    if ev.low is None and ev.high is None and ev.message:  # a finding with nothing to compare to
        return ev.message, ""
    what = expectation_text(ev)
    said = not ev.message or ev.message.startswith(("measured ", "found "))
    return what, "" if said else ev.message


def _eval_case(suite: ET.Element, check: CheckResult, ev: Evaluation, time_s: float,
               twins: int) -> str | None:
    """Add one evaluation's testcase; return the JUnit result it counts as (or None for a pass)."""
    case = _case(suite, check, _case_name(ev, twins), time_s)
    what, more = _what(ev)
    source = f"expectation from {ev.source}" if ev.source else ""
    body = "\n".join(x for x in (more, what, source) if x)
    if ev.outcome is Outcome.FAIL:
        _child(case, "failure", body, message=what, type="fail")
        return "failure"
    if ev.outcome is Outcome.ERROR:
        msg = ev.message or "metric missing or unusable"
        _child(case, "error", "\n".join(x for x in (msg, "" if what == msg else what, source) if x),
               message=msg, type="error")
        return "error"
    note = {Outcome.WARN: f"WARN (not a failure): {what}",
            Outcome.XFAIL: f"XFAIL, known issue: {ev.xfail or ''}\n{what}",
            Outcome.XPASS: f"XPASS: passed although marked as known issue ({ev.xfail or ''})\n{what}",
            }.get(ev.outcome, what)
    _child(case, "system-out", "\n".join(x for x in (note, more) if x))
    return None


def _check_cases(suite: ET.Element, check: CheckResult) -> list[str | None]:
    """Add a check's testcases; return what each counts as."""
    problems = "\n".join(f"- {p}" for p in check.problems)
    if check.status is Status.ERRORED:
        case = _case(suite, check, "run", check.duration_s)
        msg = check.message or "the check could not run"
        body = "\n".join(x for x in (msg, problems) if x)
        _child(case, "error", body, message=msg, type="errored")
        if check.evaluations:
            _child(case, "system-out", "\n".join(
                f"{e.metric}{fmt_labels(e.labels)}: {e.outcome.value}, {expectation_text(e)}"
                for e in check.evaluations))
        return ["error"]
    if check.status in (Status.SKIPPED, Status.NOT_RUN):
        case = _case(suite, check, "run", 0.0)
        reason = check.message or ("skipped" if check.status is Status.SKIPPED else "")
        if check.status is Status.NOT_RUN:
            reason = f"not run: {reason}" if reason else "not run"
        _child(case, "skipped", message=reason)
        return ["skipped"]
    n = len(check.evaluations)
    names = Counter((e.metric, tuple(sorted(e.labels.items())), e.reduce) for e in check.evaluations)
    kinds = [_eval_case(suite, check, e, check.duration_s / n,
                        names[(e.metric, tuple(sorted(e.labels.items())), e.reduce)])
             for e in check.evaluations]
    if check.status is Status.FAILED and "failure" not in kinds:
        case = _case(suite, check, "run", 0.0 if n else check.duration_s)
        msg = check.message or "check failed"
        _child(case, "failure", "\n".join(x for x in (msg, problems) if x), message=msg, type="fail")
        kinds.append("failure")
    elif not n:
        case = _case(suite, check, "run", check.duration_s)
        recorded = (f"RECORDED, not judged: {len(check.metrics)} metric(s) measured, no expectation "
                    "applies" if check.status is Status.RECORDED else "")
        out = "\n".join(x for x in (recorded, check.message, problems) if x)
        if out:
            _child(case, "system-out", out)
        kinds.append(None)
    return kinds


def render_junit(record: RunRecord) -> str:
    """The run as a JUnit XML document (one testsuite)."""
    root = junit_tree(record)
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def junit_tree(record: RunRecord) -> ET.Element:
    """The run's <testsuites> with its one <testsuite>, not indented (the fleet's junit takes the
    suite from it as it is)."""
    root = ET.Element("testsuites", name=xml_text(record.suite.get("name", "harness")))
    suite = ET.SubElement(root, "testsuite", name=xml_text(record.suite.get("name", "harness")),
                          hostname=xml_text(record.host), id="0")
    stamp = _timestamp(record.started)
    if stamp:
        suite.set("timestamp", stamp)
    props = ET.SubElement(suite, "properties")
    for key, value in (("verdict", record.verdict), ("run_id", record.run_id),
                       ("profile", record.profile.get("name", "")),
                       ("profile_reason", record.profile.get("reason", "")),
                       ("harness_version", record.harness_version)):
        ET.SubElement(props, "property", name=key, value=xml_text(value or ""))
    kinds = [k for c in record.checks for k in _check_cases(suite, c)]
    for lo in record.left_out:  # a check an option left out: skipped, saying by which option
        case = ET.SubElement(suite, "testcase", classname=xml_text(lo.id), name="run", time="0.000")
        _child(case, "skipped", message=lo.text)
        kinds.append("skipped")
    if record.verdict == "UNTESTED":
        case = ET.SubElement(suite, "testcase", classname="run", name="verdict", time="0.000")
        why = "UNTESTED: " + "; ".join(record.untested)
        _child(case, "error", "\n".join(record.untested), message=why, type="untested")
        kinds.append("error")
    counts = {"tests": len(kinds), "failures": kinds.count("failure"), "errors": kinds.count("error"),
              "skipped": kinds.count("skipped")}
    time_s = f"{record.duration_s:.3f}"
    for el in (root, suite):
        el.attrib.update({k: str(v) for k, v in counts.items()}, time=time_s)
    root.attrib.pop("skipped")  # not part of the <testsuites> schema
    return root
