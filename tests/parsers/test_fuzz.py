"""Every parse kind against every real output in tests/data/, intact and mutated (hypothesis).

The kinds come from the registry at run time, so parsers added later are fuzzed too. A parser
answers with ParseResult(valid=False, problems) or with finite metrics that results.json can
hold; it never raises. Mutations: truncation, shuffled/duplicated/dropped lines, flipped
bytes, numbers swapped for huge/NaN/negative text, splices of two outputs, empty, binary.
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harness.parsers.base import ParseResult
from harness.parsers.registry import parsers

DATA = Path(__file__).parents[1] / "data"
SEEDS = sorted(p for p in DATA.rglob("*") if p.is_file())
KINDS = sorted(parsers())
COUNTS = {"intact": 0, "mutated": 0}
NUMBER = re.compile(rb"\d+(?:\.\d+)?")
SWAPS = [b"1e999", b"-1e999", b"nan", b"NaN", b"inf", b"-0", b"99999999999999999999999999999",
         b"-12", b"0", b"0.0000000001", b"1,5", b"N/A", b"[N/A]", b""]


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")  # as `harness parse` and the checks read files


def _judge(kind: str, text: str) -> ParseResult:
    t0 = time.monotonic()
    result = parsers()[kind](text)
    assert time.monotonic() - t0 < 10, f"{kind}: parsing {len(text)} characters took too long"
    assert isinstance(result, ParseResult), f"{kind} returned {type(result).__name__}"
    if not result.valid:
        assert result.problems and all(isinstance(p, str) and p for p in result.problems), \
            f"{kind}: invalid without saying why"
    for m in result.metrics:
        assert isinstance(m.value, (int, float)) and not isinstance(m.value, bool), (kind, m)
        assert math.isfinite(m.value), f"{kind}: non-finite metric {m} cannot go into results.json"
        assert m.name and isinstance(m.unit, str), (kind, m)
    json.dumps(result.to_dict(), allow_nan=False)  # what results.json and `harness parse` write
    return result


def test_registry_and_corpus_are_there() -> None:
    assert "fio" in KINDS and len(SEEDS) >= 8


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_on_every_real_output(kind: str) -> None:
    """Intact outputs of every tool (mostly another tool's: the wrong-input case)."""
    for seed in SEEDS:
        _judge(kind, _decode(seed.read_bytes()))
        COUNTS["intact"] += 1


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    seed = draw(st.sampled_from(SEEDS), label="seed")
    data = seed.read_bytes()
    rnd = draw(st.randoms(use_true_random=False), label="rng")
    ops = draw(st.lists(st.sampled_from(["truncate", "shuffle", "dup", "drop", "flip", "numbers",
                                         "splice", "empty", "binary", "crlf"]), min_size=1, max_size=3),
               label="ops")
    for op in ops:
        event(f"mutation {op}")
        lines = data.splitlines(keepends=True)
        if op == "truncate":
            data = data[: rnd.randint(0, len(data))]
        elif op == "shuffle":
            rnd.shuffle(lines)
            data = b"".join(lines)
        elif op == "dup" and lines:
            i = rnd.randrange(len(lines))
            data = b"".join(lines[:i] + [lines[i]] * rnd.randint(2, 50) + lines[i + 1:])
        elif op == "drop" and lines:
            i = rnd.randrange(len(lines))
            data = b"".join(lines[:i] + lines[i + rnd.randint(1, 20):])
        elif op == "flip" and data:
            buf = bytearray(data)
            for _ in range(rnd.randint(1, 16)):
                buf[rnd.randrange(len(buf))] ^= rnd.randint(1, 255)
            data = bytes(buf)
        elif op == "numbers":
            data = NUMBER.sub(lambda m: rnd.choice(SWAPS) if rnd.random() < 0.3 else m.group(0), data)
        elif op == "splice":
            other = draw(st.sampled_from(SEEDS), label="other").read_bytes()
            data = data[: rnd.randint(0, len(data))] + other[rnd.randint(0, len(other)):]
        elif op == "empty":
            data = b""
        elif op == "binary":
            data = rnd.randbytes(rnd.randint(1, 4096))
        elif op == "crlf":
            data = data.replace(b"\n", b"\r\n")
    return draw(st.sampled_from(KINDS), label="kind"), data


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(case=mutated())
def test_mutated_outputs_never_raise(case: tuple[str, bytes]) -> None:
    kind, data = case
    result = _judge(kind, _decode(data))
    event(f"{kind}: {'valid' if result.valid else 'invalid'}")
    COUNTS["mutated"] += 1


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KINDS), seed=st.sampled_from(SEEDS), rnd=st.randoms(use_true_random=False))
def test_mutations_of_each_kinds_own_outputs(kind: str, seed: Path, rnd: random.Random) -> None:
    """Half the corpus belongs to other tools; here every kind also gets its own tool's output
    (same directory name as the kind when there is one), mildly broken, to reach deep code."""
    own = [p for p in SEEDS if p.parent.name == kind or p.parent.name.startswith(kind.split("-")[0])]
    data = rnd.choice(own or [seed]).read_bytes()
    lines = data.splitlines(keepends=True)
    for _ in range(rnd.randint(1, 3)):
        if lines:
            i = rnd.randrange(len(lines))
            lines[i] = NUMBER.sub(lambda m: rnd.choice(SWAPS), lines[i], count=1) if rnd.random() < 0.6 \
                else lines[i][: rnd.randint(0, len(lines[i]))]
    _judge(kind, _decode(b"".join(lines)))
    COUNTS["mutated"] += 1


def test_counts_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(f"\nparser fuzz: {len(KINDS)} kinds x {len(SEEDS)} real outputs; inputs parsed: {COUNTS}",
              file=sys.stderr)
