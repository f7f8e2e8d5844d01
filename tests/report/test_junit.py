"""JUnit XML: parses, counts match, failures say measured vs expected, errors are not failures."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

import report_samples as samples

from harness.model import CheckResult, Evaluation, Outcome, Status
from harness.report.junit import render_junit


def parse(text: str) -> ET.Element:
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    return ET.fromstring(text.encode("utf-8"))


def cases(root: ET.Element, classname: str) -> list[ET.Element]:
    return [c for c in root.iter("testcase") if c.get("classname") == classname]


def test_counts_match_testcases() -> None:
    root = parse(render_junit(samples.record()))
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    tcs = suite.findall("testcase")
    assert suite.get("name") == "h100-acceptance" and suite.get("hostname") == "gpu-node-017"
    assert suite.get("timestamp") == "2024-05-01T10:00:00" and suite.get("time") == "1050.200"
    n = {tag: sum(1 for c in tcs if c.find(tag) is not None) for tag in ("failure", "error", "skipped")}
    assert int(suite.get("tests", "")) == len(tcs) == 12
    assert int(suite.get("failures", "")) == n["failure"] == 1
    assert int(suite.get("errors", "")) == n["error"] == 2
    assert int(suite.get("skipped", "")) == n["skipped"] == 2
    assert root.get("tests") == "12" and root.get("failures") == "1" and root.get("errors") == "2"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["verdict"] == "REJECTED" and props["profile"] == "h100-sxm5"
    for c in tcs:
        float(c.get("time", ""))


def test_failure_message_has_measured_and_expected() -> None:
    root = parse(render_junit(samples.record()))
    (tc,) = [c for c in cases(root, "fio-seqread") if c.find("failure") is not None]
    assert tc.get("name") == "fio.bw{device=nvme0n1,rw=read}"
    f = tc.find("failure")
    assert f is not None and f.get("type") == "fail"
    msg = f.get("message", "")
    assert msg.startswith("measured 1.23 GB/s, expected >= 6.12 GB/s")
    assert "-81.9%" in msg and "reference 6.80 GB/s" in msg
    assert "below lower bound" in (f.text or "")


def test_warn_xfail_xpass_pass_with_note() -> None:
    root = parse(render_junit(samples.record()))
    by_name = {c.get("name"): c for c in root.iter("testcase")}
    for name, word in (("gpu.temp_max [max]", "WARN"), ("gpu.tflops{gpu=3}", "XFAIL"),
                       ("nccl.avg_busbw", "XPASS")):
        tc = by_name[name]
        assert [ch.tag for ch in tc] == ["system-out"], name
        assert (tc.findtext("system-out") or "").startswith(word)
    assert "GPU 3 on RMA list" in (by_name["gpu.tflops{gpu=3}"].findtext("system-out") or "")


def test_error_evaluation_and_errored_check() -> None:
    root = parse(render_junit(samples.record()))
    (missing,) = [c for c in cases(root, "fio-seqread") if c.find("error") is not None]
    err = missing.find("error")
    assert err is not None and err.get("message") == "metric missing"
    (ib,) = cases(root, "ib-write-bw")
    err = ib.find("error")
    assert ib.get("name") == "run" and err is not None
    assert err.get("message") == "ib_write_bw exited 1" and err.get("type") == "errored"
    assert "no RDMA device mlx5_0 found" in (err.text or "")
    assert "server side never connected" in (err.text or "")


def test_skipped_not_run_and_plain_pass() -> None:
    root = parse(render_junit(samples.record()))
    (dcgm,) = cases(root, "dcgm-diag")
    sk = dcgm.find("skipped")
    assert sk is not None and sk.get("message") == "dcgmi not installed"
    (stress,) = cases(root, "stress-cpu")
    sk = stress.find("skipped")
    assert sk is not None and sk.get("message") == "not run: run interrupted before this check"
    (inv,) = cases(root, "inventory")
    assert inv.get("name") == "run" and len(inv) == 0


def test_failed_check_without_failing_evaluation_still_fails() -> None:
    c = CheckResult("odd", "k", Status.FAILED, "3 XID errors", duration_s=2.0)
    root = parse(render_junit(replace(samples.record(), checks=(c,))))
    (tc,) = root.iter("testcase")
    f = tc.find("failure")
    assert f is not None and f.get("message") == "3 XID errors"
    assert root.get("failures") == "1"


def test_control_characters_stripped_and_hostile_text_round_trips() -> None:
    bad = "a\x00b\x07c\x1bd\x0be\ufffef" + samples.EVIL
    ev = Evaluation(metric="gpu.xid", labels={"gpu": bad}, outcome=Outcome.FAIL, severity="fail",
                    measured=3.0, unit="count", reference=None, low=None, high=0.0, reduce="each",
                    message=bad)
    checks = (CheckResult("c" + bad, "k", Status.ERRORED, bad, problems=(bad,)),
              CheckResult("d", "k", Status.FAILED, evaluations=(ev,)),
              CheckResult("e", "k", Status.SKIPPED, bad))
    rec = replace(samples.record(evil="\x01"), checks=checks)
    text = render_junit(rec)
    assert not any(ch in text for ch in "\x00\x01\x07\x1b\x0b\ufffe")
    root = parse(text)
    clean = "abcdef" + samples.EVIL
    tcs = list(root.iter("testcase"))
    assert tcs[0].get("classname") == "c" + clean
    err = tcs[0].find("error")
    assert err is not None and err.get("message") == clean and clean in (err.text or "")
    assert tcs[1].get("name") == "gpu.xid{gpu=" + clean + "}"
    f = tcs[1].find("failure")
    assert f is not None and f.get("message") == "measured 3, expected <= 0"
    assert (f.text or "").startswith(clean)
    sk = tcs[2].find("skipped")
    assert sk is not None and sk.get("message") == clean
    assert root.find("testsuite") is not None


def test_empty_run_is_untested_and_not_green() -> None:
    root = parse(render_junit(replace(samples.record(), checks=(), started="not a date")))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == "1" and "timestamp" not in suite.attrib
    (case,) = root.findall("testsuite/testcase")
    err = case.find("error")
    assert (case.get("classname"), case.get("name")) == ("run", "verdict") and err is not None
    assert err.get("type") == "untested"
    assert err.get("message") == "UNTESTED: no check judged anything: no checks"
    assert suite.get("errors") == "1" and suite.get("failures") == "0"


def test_a_recorded_check_passes_and_says_it_was_not_judged() -> None:
    (tc,) = cases(parse(render_junit(samples.record())), "mem-bw")
    assert tc.get("name") == "run" and [c.tag for c in tc] == ["system-out"]
    out = tc.findtext("system-out") or ""
    assert out.startswith("RECORDED, not judged: 1 metric(s) measured, no expectation applies")
    assert "stream triad" in out


def test_a_run_of_recorded_and_skipped_checks_gets_one_untested_error() -> None:
    rec = samples.record()
    only = replace(rec, checks=tuple(c for c in rec.checks if c.status.value in ("recorded", "skipped")))
    root = parse(render_junit(only))
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["verdict"] == "UNTESTED"
    errors = [c for c in root.iter("testcase") if c.find("error") is not None]
    assert [(c.get("classname"), c.get("name")) for c in errors] == [("run", "verdict")]
    msg = errors[0].find("error").get("message")  # type: ignore[union-attr]
    assert msg.startswith("UNTESTED: no check judged anything (1 recorded, 1 skipped); dcgm-diag skipped (")
    assert "but profile h100-sxm5 expects it: dcgm.result >= 1 count" in msg
