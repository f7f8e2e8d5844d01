"""The iperf3 JSON parser on every real sample in tests/data/iperf3."""

from __future__ import annotations

from pathlib import Path

import pytest
from samples import covers, real_samples

from harness.parsers import iperf3
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data" / "iperf3"
SAMPLES = real_samples("iperf3")
FWD, REV = "forward", "reverse"

# file -> (valid, problems, {(metric, side or None): value}, selected details)
EXPECTED: dict[str, tuple[bool, tuple[str, ...], dict, dict]] = {
    "cloudpilot-iperf3.9-tcp-10s-omit3-retransmits.json": (
        True, (), {("net.tcp_bw", "sender", FWD): 1707098116.1419148 / 8e9,
                   ("net.tcp_bw", "receiver", FWD): 1706646362.2936916 / 8e9,
                   ("net.tcp_retransmits", None, FWD): 540.0},
        {"version": "iperf 3.9", "omit": 3, "duration": 10, "remote": "168.1.194.92", "port": 5500}),
    "cloudpilot-iperf3.9-tcp-10KB-bytes-mode-zero-received-leading-junk.json": (
        False, ("the receiver counted 0 bytes: nothing was measured (test too short?)",),
        {("net.tcp_bw", "sender", FWD): 12612602.524983905 / 8e9, ("net.tcp_bw", "receiver", FWD): 0.0,
         ("net.tcp_retransmits", None, FWD): 0.0},
        {"bytes": 10240, "congestion": "cubic"}),
    "selfhealing-iperf3.1.3-udp-10000-blocks-loss-0.69pct.json": (
        True, (), {("net.udp_bw", None, FWD): 834711189.017002 / 8e9, ("net.udp_loss", None, FWD): 0.690276,
                   ("net.udp_jitter", None, FWD): 92.0},
        {"protocol": "UDP", "version": "iperf 3.1.3"}),
    "omnt-issue34-iperf3-json-stream-error-server-busy.jsonl": (
        False, ("iperf3: the server is busy running a test. try again later",), {}, {}),
    "esnet-iperf-issue1143-FRAGMENT-client-tail-trailing-nonjson-error.txt": (
        False, ("iperf3: error - unable to send control message: Broken pipe",), {}, {}),
    "esnet-iperf-issue1143-FRAGMENT-server-tail-error-select-failed.txt": (
        False, ("iperf3: error - select failed: Bad file descriptor",), {}, {}),
    "iperf3.12-debian-loopback-tcp-2-streams-reverse-2s.json": (
        True, (), {("net.tcp_bw", "sender", REV): 20287224376.93062 / 8e9,
                   ("net.tcp_bw", "receiver", REV): 20287050478.406464 / 8e9,
                   ("net.tcp_retransmits", None, REV): 8.0},
        {"streams": 2, "reverse": True, "remote": "127.0.0.1", "congestion": "bbr", "intervals": 2}),
    "iperf3.12-debian-connection-refused.json": (
        False, ("iperf3: unable to connect to server: Connection refused",), {}, {"version": "iperf 3.12"}),
}


test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample(path):
    valid, problems, values, details = EXPECTED[path.name]
    result = iperf3.parse(path.read_text(errors="replace"))
    assert (result.kind, result.valid, result.problems) == ("iperf3", valid, problems)
    got = {(m.name, m.labels.get("side"), m.labels["direction"]): m.value for m in result.metrics}
    assert got == pytest.approx(values, rel=1e-12)
    assert {k: result.details.get(k) for k in details} == details
    for m in result.metrics:
        assert m.unit == {"net.tcp_retransmits": "count", "net.udp_loss": "%", "net.udp_jitter": "us"}.get(
            m.name, "GB/s")


def test_an_error_after_complete_results_makes_the_run_invalid():
    text = (DATA / "cloudpilot-iperf3.9-tcp-10s-omit3-retransmits.json").read_text()
    result = iperf3.parse(text + "iperf3: error - unable to receive results: Bad file descriptor\n")
    assert not result.valid and len(result.metrics) == 3
    assert result.problems == ("iperf3: error - unable to receive results: Bad file descriptor",)


def test_a_run_cut_before_the_end_summary_is_invalid():
    text = (DATA / "iperf3.12-debian-loopback-tcp-2-streams-reverse-2s.json").read_text()
    cut = text[: text.index('"end":')] + '"end": {}}'
    result = iperf3.parse(cut)
    assert result.problems == ("no end summary: the test did not finish",) and result.metrics == ()


@pytest.mark.parametrize("text", ["", "iperf3: command not found\n", '{"fio version": "3.33"}', "[1, 2]"])
def test_not_iperf3(text):
    result = iperf3.parse(text)
    assert not result.valid and result.metrics == ()
    assert result.problems == ("not iperf3 JSON output (run iperf3 with -J)",)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_never_raises_on_any_prefix(path):
    text = path.read_text(errors="replace")
    for end in range(0, len(text) + 1, max(1, len(text) // 400)):
        result = iperf3.parse(text[:end])
        assert result.valid or result.problems


def test_registered():
    assert parsers()["iperf3"] is iperf3.parse
