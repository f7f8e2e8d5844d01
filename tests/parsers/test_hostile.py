"""Every parse kind against hostile input (issue #26.11): JSON nested past the recursion limit,
digits that str.isdigit accepts and int() does not ('⒍'), numbers no float holds, one very long
progress segment, a million '{'. A parser answers with a ParseResult (finite metrics when valid)
or with the harness's own error; it never raises anything else, and it is never quadratic."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import HarnessError
from harness.parsers import base
from harness.parsers.base import ParseResult, json_objects
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data"
KINDS = sorted(parsers())
SEEDS = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix != ".md" and p.stat().st_size < 300_000)
DEEP = 5000  # past the interpreter's recursion limit (1000)
ODD_DIGITS = "⒍٣５²𝟗"  # a digit to str.isdigit (or \d), not always to int()


def _own(kind: str) -> list[Path]:
    stem = kind.split("-")[0]
    return [p for p in SEEDS if p.parent.name == kind or p.parent.name.startswith(stem)] or SEEDS[:3]


def _judge(kind: str, text: str) -> ParseResult | None:
    """The parser's answer, held to the contract; None when it raised the harness's own error."""
    try:
        result = parsers()[kind](text)
    except HarnessError:
        return None
    assert isinstance(result, ParseResult), f"{kind} returned {type(result).__name__}"
    if not result.valid:
        assert result.problems, f"{kind}: invalid without saying why"
    for m in result.metrics:
        assert isinstance(m.value, (int, float)) and math.isfinite(m.value), f"{kind}: {m}"
    json.dumps(result.to_dict(), allow_nan=False)
    return result


def _deep_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


HOSTILE = {
    "deep object": lambda text: _deep_object(DEEP),
    "deep object spliced in": lambda text: (text[: len(text) // 2] + _deep_object(DEEP)
                                            + text[len(text) // 2:]),
    "deep array": lambda text: "[" * DEEP + "]" * DEEP,
    "deep value in a real document": lambda text: text.replace(": ", ": " + "[" * DEEP + "0" + "]" * DEEP, 1),
    "odd digits": lambda text: "".join(ODD_DIGITS[int(c) % len(ODD_DIGITS)] if c in "0123456789"
                                       and (i % 3 == 0) else c for i, c in enumerate(text)),
    "every digit odd": lambda text: text.translate(str.maketrans("0123456789", "⒍" * 10)),
    "huge numbers": lambda text: "".join(("9" * 400 if c == "1" else "-" + "9" * 400 if c == "2" else c)
                                         for c in text[:20000]),
    "more digits than int() reads": lambda text: text.replace("0", "9" * 5000, 3),
    "one long segment": lambda text: " ".join(text.splitlines()[:40]) * 50,
    "a million braces": lambda text: "{" * 20_000 + text,
    "control bytes": lambda text: text.replace("\n", "\x00\x1b[2J\n", 20),
}


@pytest.mark.parametrize("how", sorted(HOSTILE))
@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_on_hostile_variants_of_its_own_output(kind: str, how: str) -> None:
    for seed in _own(kind)[:1]:
        _judge(kind, HOSTILE[how](seed.read_text(errors="replace")))


NUMBER = re.compile(r"\d+")
SPOTS = 60  # numbers respelt in each file, spread over it
# the kinds whose samples are not in a folder of their name: SYNTHETIC protocol lines of the
# harness's own engines (as tests/engines writes them), and p2pBandwidthLatencyTest's captures
_ENGINE_LINES = {
    "builtin-burn": [{"event": "start", "backend": "torch", "dtype": "bf16", "size": 8192, "devices": [0, 1]},
                     {"event": "result", "gpu": 0, "iterations": 120, "errors": 0, "verified": 119,
                      "mem_errors": 0, "seconds": 60, "tflops": 412.5, "tflops_wall": 398.25},
                     {"event": "error", "gpu": 1, "message": "hung: not ready 6 s after"}, {"event": "done"}],
    "builtin-copy": [{"event": "start", "backend": "torch", "size": 512, "iterations": 2, "devices": [0, 1],
                      "plan": [["host_to_device_memcpy_ce", "cpu", "gpu0"],
                               ["host_to_device_memcpy_ce", "cpu", "gpu1"]]},
                     {"event": "result", "test": "host_to_device_memcpy_ce", "src": "cpu", "dst": "gpu0",
                      "bytes": 512, "iterations": 2, "seconds": 1e-6, "gbps": 1.024}, {"event": "done"}],
}


def _texts(kind: str) -> list[str]:
    if kind in _ENGINE_LINES:
        return ["\n".join(json.dumps(e) for e in _ENGINE_LINES[kind]) + "\n"]
    if kind == "p2p":
        return [p.read_text(errors="replace") for p in SEEDS
                if p.parent.name == "cuda-samples" and p.name.startswith("p2pBandwidthLatencyTest")]
    return [p.read_text(errors="replace") for p in _own(kind)]


@pytest.mark.parametrize("kind", KINDS)
def test_any_one_number_too_long_for_int_or_float_is_not_a_crash(kind: str) -> None:
    """Every file of a kind's own, one number at a time (up to SPOTS of them, spread over the file)
    respelt with 5,000 digits (int() refuses past 4,300) and with 400 (a float past 1e308, inf):
    the parser still answers by the contract. Hypothesis found such numbers one parser at a time;
    this walks them all."""
    texts = _texts(kind)
    assert texts, f"{kind}: no sample to respell"
    for text in texts:
        spans = [m.span() for m in NUMBER.finditer(text)]
        for a, b in spans[::max(1, len(spans) // SPOTS)]:
            for digits in (5000, 400):
                _judge(kind, text[:a] + "9" * digits + text[b:])


@st.composite
def hostile(draw: st.DrawFn) -> tuple[str, str]:
    kind = draw(st.sampled_from(KINDS))
    seed = draw(st.sampled_from(_own(kind)))
    text = seed.read_text(errors="replace")
    for how in draw(st.lists(st.sampled_from(sorted(HOSTILE)), min_size=1, max_size=2)):
        text = HOSTILE[how](text)
    cut = draw(st.integers(0, len(text)))
    return kind, text[:cut] if draw(st.booleans()) else text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(case=hostile())
def test_hostile_inputs_never_raise_and_metrics_stay_finite(case: tuple[str, str]) -> None:
    _judge(*case)


@pytest.mark.parametrize("kind", ["fio", "iperf3", "redfish-power", "nvme-smart", "smartctl"])
def test_json_nested_past_the_recursion_limit_is_invalid_not_a_crash(kind: str) -> None:
    result = _judge(kind, _deep_object(100_000))
    assert result is not None and not result.valid


def test_a_digit_int_cannot_read_is_not_a_gpu_index() -> None:
    text = (DATA / "nvbandwidth" / "nvbandwidth_v0.10.0_8x_h100_d2d_memcpy_read_ce.txt").read_text()
    assert _judge("nvbandwidth", text.replace("         7\n", "         ⒍\n", 1)) is not None
    assert _judge("nvbandwidth", text.replace("\n 7 ", "\n ⒍ ", 1)) is not None


@pytest.mark.parametrize("name", ["nvidia-smi_default_table_10x_a40_550.127.05.txt",
                                  "nvidia-smi_default_table_2x_a100_pcie_535.129.03_mig_on_gpu0.txt"])
def test_a_number_too_long_for_int_is_not_a_gpu_mig_or_process_id(name: str) -> None:
    """int() refuses 4,301 digits and more (Python's limit): a GPU index, MIG row or process id
    that long is not one (hypothesis found the GPU index in CI's rehearsal)."""
    text = (DATA / "nvidia-smi" / name).read_text()
    long = "9" * 5000
    for old, new in (("|   0  ", f"|   {long}  "), ("|   1  ", f"|   1{long}  "),
                     ("|  0   ", f"|  {long}   "), ("  0    0 ", f"  {long}    0 ")):
        result = _judge("nvidia-smi", text.replace(old, new))
        assert result is not None


@pytest.mark.parametrize("field, raw", [("avail_spare", "9" * 400), ("spare_thresh", "-" + "9" * 400),
                                        ("data_units_read", 1e305), ("power_on_hours", 10 ** 400),
                                        ("media_errors", "0x" + "f" * 300)])
def test_nvme_numbers_no_float_holds_are_named_not_inf(field: str, raw: object) -> None:
    doc = {"critical_warning": 0, "avail_spare": 100, "spare_thresh": 10, field: raw}
    result = _judge("nvme-smart", json.dumps(doc))
    assert result is not None and not result.valid
    assert any(p.startswith(field) or field.split("_")[0] in p for p in result.problems), result.problems


def test_json_objects_decodes_only_balanced_spans() -> None:
    """A million '{' cost the old reader a decode (and an error message scanning the whole text
    before it) at every brace; now the text is scanned once and nothing is handed to json."""
    calls = []
    real = base.json.JSONDecoder.raw_decode

    def counting(self: base.json.JSONDecoder, s: str, idx: int = 0) -> tuple[object, int]:
        calls.append(len(s) - idx)
        return real(self, s, idx)

    base.json.JSONDecoder.raw_decode = counting  # type: ignore[method-assign]
    try:
        assert list(json_objects("{" * 20_000 + '{"a": {"b": 1}}' + "{" * 20_000)) == [{"a": {"b": 1}}]
        assert list(json_objects('{"a": {"b": 1}, oops}{"c": 2}')) == [{"b": 1}, {"c": 2}]
    finally:
        base.json.JSONDecoder.raw_decode = real  # type: ignore[method-assign]
    assert len(calls) <= 4, len(calls)


_BOUNDED = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_CPU, (int(sys.argv[2]), int(sys.argv[2])))
    from harness.parsers.registry import parsers
    text = sys.stdin.read()
    print(parsers()[sys.argv[1]](text).valid)
""")


@pytest.mark.parametrize("kind, text", [
    ("gpu-burn", "proc'd: 1 (2 Gflop/s) " * 45_000),
    ("gpu-burn", "10.0%  proc'd: " + "1" * 300_000 + " errors: 0   temps: 40 C"),
    ("gpu-burn", "10.0%  proc'd: 1 (2 Gflop/s)   errors: 0   temps: 4" + " " * 300_000 + "- 5 C"),
    ("fio", "{" * 1_000_000),
])
def test_long_hostile_inputs_parse_within_a_cpu_limit(kind: str, text: str) -> None:
    """Inputs the old parsers took minutes to hours over (quadratic); a CPU-time limit far above
    what a linear parser needs (benchmarks/bench_parser_hostile.py measures it) bounds the run."""
    limit = 60
    proc = subprocess.run([sys.executable, "-c", _BOUNDED, kind, str(limit)], input=text, text=True,
                          capture_output=True, timeout=limit * 4)
    assert proc.returncode == 0, f"{kind}: killed or failed (rc {proc.returncode}): {proc.stderr[-300:]}"
    assert proc.stdout.strip() == "False"
