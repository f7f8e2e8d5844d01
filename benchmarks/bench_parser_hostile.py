#!/usr/bin/env python3
"""What hostile input costs the parsers (issue #26.11): time to parse N and 2N of each input,
and their ratio (about 2 when linear, about 4 when quadratic). The old json_objects took 271 s
on a million "{" and the old gpu-burn progress regex 18 s on one 320 KB segment.

    python benchmarks/bench_parser_hostile.py [--size 200000]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.parsers.base import json_objects  # noqa: E402
from harness.parsers.registry import parsers  # noqa: E402

CASES: dict[str, tuple[str, Callable[[int], str]]] = {
    "json_objects on '{' x N": ("", lambda n: "{" * n),
    "json_objects on '{\"a\":' x N": ("", lambda n: '{"a":' * (n // 5)),
    "json_objects on '{}' x N": ("", lambda n: "{}" * (n // 2)),
    "gpu-burn: one segment of repeated proc'd": ("gpu-burn", lambda n: "proc'd: 1 (2 Gflop/s) " * (n // 22)),
    "gpu-burn: proc'd with a long number": ("gpu-burn", lambda n: "proc'd: " + "1" * n + " errors: 0"),
    "gpu-burn: temps with a long blank": ("gpu-burn", lambda n: "proc'd: 1 (2 Gflop/s) errors: 0 temps: 4"
                                           + " " * n + "- 5 C"),
    "fio on JSON nested N/5 deep": ("fio", lambda n: '{"a":' * (n // 5) + "1" + "}" * (n // 5)),
}


def _time(kind: str, text: str) -> float:
    """The best of three runs, in seconds."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        if kind:
            parsers()[kind](text)
        else:
            sum(1 for _ in json_objects(text))
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=200_000, help="N characters (default 200000)")
    n = ap.parse_args().size
    parsers()["gpu-burn"]("")  # load the parsers before timing
    print(f"{'input':48} {'N s':>8} {'2N s':>8} {'ratio':>6}")
    for name, (kind, make) in CASES.items():
        one, two = _time(kind, make(n)), _time(kind, make(2 * n))
        print(f"{name:48} {one:8.3f} {two:8.3f} {two / max(one, 1e-9):6.2f}")


if __name__ == "__main__":
    main()
