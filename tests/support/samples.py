"""Real captured samples in tests/data/<tool>/, and the test that each one has expectations.

A parser test module lists its samples and declares the coverage test in one line:

    SAMPLES = real_samples("fio")
    test_every_sample_has_expectations = covers(SAMPLES, EXPECTED)

A sample added without expectations, or an expectation whose file was renamed or deleted, fails
that test with both lists named.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
PROVENANCE = "SOURCES.md"


def real_samples(folder: str, pattern: str = "*", root: Path = DATA) -> list[Path]:
    """The captures in root/folder whose names match `pattern`, sorted, without SOURCES.md."""
    return sorted(p for p in (root / folder).glob(pattern) if p.is_file() and p.name != PROVENANCE)


def sample_names(folder: str, pattern: str = "*", root: Path = DATA) -> list[str]:
    """The file names of real_samples(folder, pattern, root)."""
    return [p.name for p in real_samples(folder, pattern, root)]


def _name(sample: Path | str) -> str:
    return sample.name if isinstance(sample, Path) else sample


def uncovered(samples: Iterable[Path | str], *expected: Iterable[str]) -> str:
    """What is wrong between the samples and the expectations' keys, in words; "" when they match."""
    have = {_name(s) for s in samples}
    want: set[str] = set().union(*(set(e) for e in expected))
    missing, unexpected = sorted(have - want), sorted(want - have)
    lines = []
    if not have:
        lines.append("no samples found (wrong folder or pattern?)")
    if missing:
        lines.append(f"{len(missing)} sample(s) without expectations (add them to this test):")
        lines += [f"  {n}" for n in missing]
    if unexpected:
        lines.append(f"{len(unexpected)} expectation(s) without a sample (file renamed or deleted?):")
        lines += [f"  {n}" for n in unexpected]
    return "\n".join(lines)


def covers(samples: Iterable[Path | str], *expected: Iterable[str]) -> Callable[[], None]:
    """A test function: every sample has expectations in one of `expected` and every expectation a sample.

    `expected` are the mappings (or sets) whose keys are sample file names; their union must equal
    the samples' names. They are read when the test runs.
    """

    def test() -> None:
        problem = uncovered(samples, *expected)
        if problem:
            raise AssertionError(problem)

    test.__doc__ = "Every real sample has expectations here, and every expectation names a sample."
    return test
