"""The HTML report: every status and outcome renders, tool and machine text is escaped, no network."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
import report_samples as samples

from harness.model import CheckResult, Outcome, RunRecord, Status, ToolRun
from harness.numfmt import digits_for, fmt_band, fmt_bytes, fmt_delta, fmt_duration, fmt_num, fmt_value
from harness.report.fmt import fmt_time
from harness.report.html import TAIL_BYTES, inventory_view, read_tail, render_html
from harness.report.outputs import write_reports

ALLOWED_TAGS = {
    "html", "head", "meta", "link", "title", "style", "body", "main", "h1", "h2", "h3", "p", "div", "span",
    "strong", "b", "code", "pre", "dl", "dt", "dd", "table", "colgroup", "col", "thead", "tbody", "tr", "th",
    "td", "a",
    "details", "summary", "ul", "li", "footer", "section", "svg", "circle", "path",
    "text",  # axis labels of inline SVG charts (report/charts.py)
}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def tags_of(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    p = _Tags()
    p.feed(html)
    return p.tags


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    samples.write_raw(tmp_path)
    return tmp_path


def test_every_status_and_outcome_renders(run_dir: Path) -> None:
    rec = samples.record()
    assert {c.status for c in rec.checks} == set(Status)
    assert {e.outcome for c in rec.checks for e in c.evaluations} == set(Outcome)
    html = render_html(rec, run_dir)
    for s in Status:
        assert f'class="badge b-{s.value}"' in html
    for o in Outcome:
        assert f'class="badge b-{o.value}"' in html
    assert "verdict-REJECTED" in html and ">REJECTED<" in html
    assert "GPU 3 on RMA list, ticket 4711" in html  # xfail reason
    assert "warn-level" in html  # severity warn
    assert "≥ 6.12 GB/s" in html and "[665, 735] TFLOPS" in html and "≤ 75 C" in html
    assert "-81.9 %" in html and "-12.5 %" in html
    assert "1,234,567" in html  # uncovered metric with thousands separators
    assert "fio.iops" in html and "nccl.time" in html
    assert "chosen because 8 × NVIDIA H100" in html
    assert "SYS-821GE-TNHR" in html and "S64HNE0T123456" in html
    assert "3.49 TiB" in html  # binary, as every byte count in the report
    assert "GPU-3f0c0007-9a1b-4c2d-8e7f-0123456789ab" in html and "96.00.99.00.01" in html
    assert "400 Gb/s" in html and "2 TiB" in html and "17 min 30 s" in html
    assert "all_reduce_perf -b 8 -e 8G -f 2 -g 8" in html
    assert "no exit code" in html and "timed out" in html
    assert set(t for t, _ in tags_of(html)) <= ALLOWED_TAGS


@pytest.mark.parametrize("checks, interrupted, verdict", [
    ((Status.PASSED, Status.WARNED, Status.SKIPPED), False, "ACCEPTED"),
    ((Status.PASSED, Status.RECORDED), False, "ACCEPTED"),
    ((Status.RECORDED, Status.SKIPPED), False, "UNTESTED"),
    ((Status.SKIPPED, Status.SKIPPED), False, "UNTESTED"),
    ((Status.SKIPPED, Status.NOT_RUN), False, "INCOMPLETE"),
    ((Status.PASSED, Status.NOT_RUN), False, "INCOMPLETE"),
    ((Status.PASSED,), True, "INCOMPLETE"),
    ((Status.PASSED, Status.ERRORED), False, "ERRORED"),
    ((Status.FAILED, Status.ERRORED), False, "REJECTED"),
])
def test_verdict_banner(checks: tuple[Status, ...], interrupted: bool, verdict: str) -> None:
    rec = replace(samples.record(), interrupted=interrupted,
                  checks=tuple(CheckResult(f"c{i}", "k", s) for i, s in enumerate(checks)))
    html = render_html(rec, None)
    assert f'class="verdict verdict-{verdict}"' in html
    assert f'<div class="word">{verdict}</div>' in html


def test_untested_banner_says_why_and_a_recorded_check_is_not_a_pass() -> None:
    rec = samples.record()
    rec = replace(rec, checks=tuple(c for c in rec.checks if c.status in (Status.RECORDED, Status.SKIPPED)))
    html = render_html(rec, None)
    assert '<div class="word">UNTESTED</div>' in html and "Not accepted, nothing failed" in html
    assert "no check judged anything (1 recorded, 1 skipped)" in html
    assert "Skipped, but profile h100-sxm5 expects it: dcgm.result &gt;= 1 count" in html
    assert "Recorded, not judged" in html and 'class="badge b-recorded"' in html
    assert '<div class="count"><b>1</b><span>recorded</span></div>' in html


def test_hostile_strings_are_escaped(tmp_path: Path) -> None:
    samples.write_raw(tmp_path, evil=samples.EVIL)
    rec = samples.record(evil=samples.EVIL)
    html = render_html(rec, tmp_path)
    for raw in samples.HOSTILE[:2]:
        assert raw not in html
    assert "<script" not in html.lower() and "<img" not in html.lower()
    esc = "&lt;script&gt;alert(1)&lt;/script&gt; &#34;&gt;&lt;img src=x onerror=alert(2)&gt; {{ 7*7 }}"
    for context in ("gpu-node-017", "device=nvme0n1", "nvme0n1 read below spec", "below lower bound",
                    "Couldn&#39;t get device mlx5_0", "no RDMA device mlx5_0 found", "dcgmi not installed",
                    "matched gpu.name", "--name=seqread", "NCCL 2.21 small-message regression"):
        assert context + esc in html, context
    assert "{{ 7*7 }}" in html and ">49<" not in html
    for tag, attrs in tags_of(html):
        assert tag in ALLOWED_TAGS
        assert not [a for a, _ in attrs if a.startswith("on")], (tag, attrs)


def test_hostile_inventory_keys_and_labels_are_escaped() -> None:
    inv = {"host": {"hostname": "<b>x</b>"}, "<i>odd</i>": {"<u>k</u>": "<s>v</s>"},
           "gpus": [{"name": "<script>x</script>", "<em>col</em>": 1}], "weird": ["<a href=x>", 3]}
    rec = replace(samples.record(), inventory=inv)
    html = render_html(rec, None)
    for bad in ("<b>x", "<i>odd", "<u>k", "<s>v", "<script>x", "<em>col", "<a href=x>"):
        assert bad not in html
    assert "&lt;u&gt;k&lt;/u&gt;" in html and "&lt;em&gt;col&lt;/em&gt;" in html


def test_no_network_references(run_dir: Path) -> None:
    evil = ' <img src="https://evil.example/x.png"> <link href=//cdn.example/x.css> url(http://x)'
    rec = samples.record(evil=evil)
    html = render_html(rec, run_dir)
    assert "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:" in html
    tag_urls = [(t, a, v) for t, attrs in tags_of(html) for a, v in attrs
                if a in ("src", "href", "srcset", "action", "poster", "data", "background")]
    for tag, attr, value in tag_urls:
        assert value is not None
        assert value.startswith(("#", "data:")), (tag, attr, value)
    style = html[html.index("<style>"):html.index("</style>")]
    assert "@import" not in style and "http" not in style
    assert re.findall(r"url\(", style) == []
    clean = render_html(samples.record(), run_dir)
    assert "http://" not in clean and "https://" not in clean


def test_large_output_shows_its_tail(tmp_path: Path) -> None:
    samples.write_raw(tmp_path, big=5000)
    path = tmp_path / "raw/nccl/stdout.txt"
    size = path.stat().st_size
    assert size > TAIL_BYTES
    text, omitted, total = read_tail(path)
    assert total == size and omitted + len(text.encode()) == size
    assert TAIL_BYTES - 512 < len(text.encode()) <= TAIL_BYTES
    assert text.startswith("iteration ")  # cut at a line boundary
    html = render_html(samples.record(), tmp_path)
    assert f"… {omitted:,} bytes omitted" in html
    assert "iteration 00004999 ok" in html and "iteration 00000000 ok" not in html


def test_read_tail_small_file(tmp_path: Path) -> None:
    p = tmp_path / "out"
    p.write_bytes(b"a\x1b[1;31mred\x1b[0m\r\nnul\x00here\n\xff")
    text, omitted, size = read_tail(p)
    assert omitted == 0 and size == p.stat().st_size
    assert text == "ared\nnul\ufffdhere\n\ufffd"


def test_missing_unreadable_and_outside_files(tmp_path: Path) -> None:
    samples.write_raw(tmp_path)
    (tmp_path / "raw/nccl/stdout.txt").unlink()
    (tmp_path / "raw/nccl/stderr.txt").unlink()
    (tmp_path / "raw/nccl/stderr.txt").mkdir()  # a directory cannot be read as a file
    html = render_html(samples.record(), tmp_path)
    assert html.count("file missing") == 2  # nccl stdout and ib stderr
    assert "unreadable: Is a directory" in html
    assert "not shown: path lies outside the run directory" in html
    assert "root:" not in html
    no_dir = render_html(samples.record(), None)
    assert "not available: no run directory given" in no_dir


def test_empty_and_partial_inventory_render() -> None:
    for inv in ({}, {"host": {"hostname": "n1"}}, {"cpu": {"threads": 8}, "memory": {}},
                {"gpus": [], "nics": [{"name": "eth0"}], "extra": {"a": [1, 2]}, "note": None},
                {"gpus": 8, "host": "n2", "block_devices": ["sda", {"name": "sdb"}]}):
        rec = replace(samples.record(), inventory=inv, checks=())
        html = render_html(rec, None)
        assert "No checks in this run." in html and ">UNTESTED<" in html  # nothing measured: never accepted
    assert ">GPUs</dt><dd>8<" in html and ">Host</dt><dd>n2<" in html and ">sdb<" in html


def test_write_reports(tmp_path: Path) -> None:
    samples.write_raw(tmp_path)
    write_reports(samples.record(), tmp_path)
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert (tmp_path / "junit.xml").read_text().startswith("<?xml")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_import_is_cheap() -> None:
    code = "import sys, harness.report; assert 'jinja2' not in sys.modules, 'jinja2 imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_roundtrip_through_json(run_dir: Path) -> None:
    rec = samples.record()
    assert render_html(RunRecord.from_dict(rec.to_dict()), run_dir) == render_html(rec, run_dir)


def test_tool_run_without_files() -> None:
    c = CheckResult("x", "k", Status.PASSED, tool_runs=(ToolRun(("true",), 0, 0.01, "", ""),))
    html = render_html(replace(samples.record(), checks=(c,)), None)
    assert html.count("no file recorded") == 2


@pytest.mark.parametrize("v, out", [
    (None, "—"), (0, "0"), (2.0, "2"), (1.2345, "1.23"), (12.345, "12.3"), (123.45, "123"),
    (999.7, "1,000"), (1234.5, "1,234"), (1234567.0, "1,234,567"), (0.0123456, "0.0123"),
    (0.000412, "0.000412"), (36960.4, "36,960"), (-3.5, "-3.50"), (13.96, "14.0"), (0.05 * 100, "5"),
    (float("nan"), "NaN"), (float("inf"), "∞"),
])
def test_fmt_num(v: float | None, out: str) -> None:
    assert fmt_num(v) == out


def test_formatters() -> None:
    assert fmt_band(1.0, 2.0, "GB/s") == "[1, 2] GB/s"
    assert fmt_band(1.5, None, "GB/s") == "≥ 1.5 GB/s"
    assert fmt_band(None, 80.0, "C") == "≤ 80 C"
    assert fmt_band(None, 80.0, "C", ascii_=True) == "<= 80 C"
    assert fmt_band(None, None, "W") == "any"
    assert fmt_band(0, 0, "count") == "[0, 0]"
    assert fmt_band(1e12, None, "B") == "≥ 931 GiB"
    assert fmt_delta(-12.345) == "-12.3 %" and fmt_delta(4.0) == "+4.0 %" and fmt_delta(None) == "—"
    assert fmt_duration(3.14) == "3.1 s" and fmt_duration(65) == "1 min 05 s"
    assert fmt_duration(7385) == "2 h 03 min"
    assert fmt_bytes(3_840_755_982_336, si=True) == "3.84 TB" and fmt_bytes(512) == "512 B"
    assert fmt_value(5, "count") == "5" and fmt_value(12.5, "%") == "12.5 %"
    assert fmt_time("2024-05-01T12:00:00Z") == "2024-05-01 12:00:00 UTC"
    assert fmt_time("2024-05-01T14:00:00+02:00") == "2024-05-01 12:00:00 UTC"
    assert fmt_time("garbage") == "garbage" and fmt_time("") == "—"
    # a measured value close to its bound gets the digits to tell them apart
    assert digits_for(1.996, (2.0,)) == 4 and fmt_num(1.996, 4) == "1.996"
    assert digits_for(None, (2.0,)) == 3 and digits_for(2.0, (2.0,)) == 3


def test_node_identity_reads_as_words_not_json_or_dotted_keys() -> None:
    """This VM's own inventory (no GPU): notes as text, known extra fields with their names."""
    inv = {"host": {"hostname": "vm", "os": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.18.44-fc-v595",
                    "arch": "x86_64"},
           "system": {"vendor": None, "product": None, "serial": None, "board_serial": None},
           "cpu": {"model": "AMD EPYC", "sockets": 1, "threads": 2, "online": 2, "numa_nodes": 1},
           "memory": {"total_bytes": 25276514304},
           "notes": ["NVML not loadable: NVML Shared Library Not Found", "no BMC"]}
    identity = dict(inventory_view(inv, "vm")["identity"])
    assert identity["Notes"] == "NVML not loadable: NVML Shared Library Not Found; no BMC"
    assert identity["Board serial"] == "—" and identity["CPUs online"] == "2"
    assert identity["CPU"] == "AMD EPYC — 1 socket, 2 threads, 1 NUMA node"
    assert not [k for k in identity if "." in k]
    gpus = inventory_view({"gpus": [{"index": 0, "name": "NVIDIA H200", "memory_bytes": 150754820096}]},
                          "n")["tables"][0]
    assert gpus["headers"][-1] == "Memory" and gpus["rows"] == [["0", "NVIDIA H200", "140 GiB"]]
