"""The one number syntax (harness.units, harness.config.numbers): sizes as fio reads them,
durations, fractions and percents, quantities in a multiple of the catalogue's unit, YAML 1.2."""

from __future__ import annotations

import pytest
from clihelp import harness
from pydantic import ValidationError

from harness.config.driftrules import DriftRule
from harness.config.models import Expectation, Hardware, SiblingBand
from harness.config.yamlload import parse_yaml
from harness.errors import ConfigError
from harness.units import canonical, parse_duration, parse_fraction, parse_quantity, parse_size


@pytest.mark.parametrize(("text", "n"), [
    ("4k", 4096), ("4K", 4096), ("4KB", 4096), ("4KiB", 4096), ("4kb", 4096), ("4 KB", 4096),
    ("1M", 1 << 20), ("1MB", 1 << 20), ("16GiB", 16 << 30), ("1.5G", 3 << 29), ("512", 512),
    ("512B", 512), (".5k", 512), ("1T", 1 << 40), (4096, 4096),
])
def test_sizes_read_as_fio_reads_them(text: str | int, n: int) -> None:
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["inf", "infG", "1e300P", "nan", "-4k", "4kx", "k", "", "4 K B",
                                  "99999999999P", True])
def test_bad_or_huge_sizes_are_value_errors(text: object) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_size(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "secs"), [
    (90, 90.0), ("90", 90.0), ("90s", 90.0), ("500ms", 0.5), ("2m", 120.0), ("10min", 600.0),
    ("1h", 3600.0), ("1h30m", 5400.0), ("1 h 30 m", 5400.0), ("2d", 172800.0), (1.5, 1.5),
])
def test_durations(text: str | float, secs: float) -> None:
    assert parse_duration(text) == secs


@pytest.mark.parametrize("text", ["10x", "s", "1h30", "-5s", "inf", "nan", "", True, float("inf")])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)  # type: ignore[arg-type]


def test_fractions_above_one_need_a_percent_sign() -> None:
    assert parse_fraction("15%") == pytest.approx(0.15) and parse_fraction(0.15) == 0.15
    assert parse_fraction("150%") == pytest.approx(1.5)
    with pytest.raises(ValueError, match=r"write 15% for 15 percent, or 0\.15"):
        parse_fraction(15)
    assert parse_fraction(1.5, above_one=True) == 1.5


@pytest.mark.parametrize(("text", "unit", "value"), [
    ("900 MB/s", "GB/s", 0.9), ("37ms", "us", 37000.0), ("1.2kW", "W", 1200.0), ("5", "W", 5.0),
    ("2 Gb/s", "GB/s", 0.25), ("1.98 GHz", "MHz", 1980.0), ("1e3", "IOPS", 1000.0),
])
def test_quantities_convert_to_the_catalogue_unit(text: str, unit: str, value: float) -> None:
    assert parse_quantity(text, unit) == pytest.approx(value)


@pytest.mark.parametrize(("text", "words"), [("5 W", "in W, not GB/s"), ("3 furlongs", "unknown unit"),
                                             ("inf", "expected a number"), ("1e400 GB/s", "finite")])
def test_bad_quantities(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_quantity(text, "GB/s")


def test_canonical_units() -> None:
    assert canonical("MB/s") == ("GB/s", 1e-3) and canonical("kW") == ("W", 1e3)
    assert canonical("ms") == ("us", 1e3) and canonical("GB/s") == ("GB/s", 1.0)
    with pytest.raises(ValueError, match="unknown unit"):
        canonical("MB/h")


def test_expectation_in_a_multiple_unit_is_converted() -> None:
    e = Expectation(metric="fio.bw", unit="MB/s", reference=1500, lower="10%")  # type: ignore[arg-type]
    assert (e.unit, e.reference, e.lower) == ("GB/s", pytest.approx(1.5), pytest.approx(0.1))
    e = Expectation(metric="fio.clat_p99", unit="us", max="37 ms")  # type: ignore[arg-type]
    assert e.max == pytest.approx(37000)
    e = Expectation(metric="x", unit="ms", reference=0, upper=2)  # absolute when the reference is 0
    assert (e.unit, e.upper) == ("us", pytest.approx(2000))


def test_a_latency_rule_in_seconds_is_converted_to_the_metrics_microseconds(tmp_path) -> None:
    e = Expectation(metric="fio.clat_p99", unit="s", max=0.01)
    assert (e.unit, e.max) == ("us", pytest.approx(10000))
    e = Expectation(metric="fio.clat_p99", unit="s", max="20 ms")  # type: ignore[arg-type]
    assert (e.unit, e.max) == ("us", pytest.approx(20000))
    # a duration metric in s keeps its own unit
    assert Expectation(metric="fio.persist_time", unit="s", max=5).unit == "s"
    suite = tmp_path / "s.yaml"
    suite.write_text("name: t\nchecks:\n  - id: f\n    kind: fio\n    expect:\n"
                     "      - {metric: fio.clat_p99, max: 0.01, unit: s}\n")
    r = harness("validate", str(suite))
    assert r.returncode == 0, r.stderr


def test_a_sibling_offset_is_converted_with_its_rule() -> None:
    """'+ 2 ms' of the median is 2000 us, not 2 us (the band's offset was left in the rule's unit)."""
    e = Expectation(metric="fio.clat_p99", unit="ms", sibling={"max_above": 2, "vary": ["job"]})  # type: ignore[arg-type]
    assert e.unit == "us" and e.sibling is not None and e.sibling.max_above == pytest.approx(2000)
    e = Expectation(metric="gpu.temp_max", unit="C", sibling={"max_above": 10})  # type: ignore[arg-type]
    assert e.sibling is not None and e.sibling.max_above == 10


def test_lower_fifteen_meant_fifteen_percent_is_refused() -> None:
    with pytest.raises(ValidationError, match="write 15% for 15 percent"):
        Expectation(metric="fio.iops", unit="IOPS", reference=72000, lower=15)
    ok = Expectation(metric="fio.iops", unit="IOPS", reference=72000, lower="15%")  # type: ignore[arg-type]
    assert ok.lower == pytest.approx(0.15)


def test_sizes_percents_and_ratios_in_profiles() -> None:
    assert Hardware(memory_min_bytes="16GiB").memory_min_bytes == 16 << 30  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="not a size"):
        Hardware(memory_min_bytes="inf")  # type: ignore[arg-type]
    assert SiblingBand(min_ratio="95%").min_ratio == pytest.approx(0.95)  # type: ignore[arg-type]
    assert SiblingBand(max_ratio="115%").max_ratio == pytest.approx(1.15)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="write 95% for 95 percent"):
        SiblingBand(min_ratio=95)
    assert DriftRule(metric="fio.bw", max_drop_pct="10%").max_drop_pct == pytest.approx(10)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "col", "words"), [
    ("a: [disabled, no]", 15, "'no' is the string 'no' in YAML 1.2 but false in YAML 1.1"),
    ("a: off", 4, "but false in YAML 1.1"),
    ("a: yes", 4, "but true in YAML 1.1"),
    ("a: 010", 4, "'010' is 10 in YAML 1.2 but octal 8 in YAML 1.1"),
    ("a: 1_000", 4, "a string in YAML 1.2 but a number in YAML 1.1"),
    ("a: 1:20", 4, "a string in YAML 1.2"),
])
def test_yaml11_readings_that_differ_are_located_errors(text: str, col: int, words: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_yaml(text, "f.yaml")
    (p,) = e.value.problems
    assert (p.file, p.line, p.col) == ("f.yaml", 1, col) and words in p.message


def test_yaml12_scalars() -> None:
    data, _ = parse_yaml("a: [1e3, 0o17, 0x10, 1.5, 'no', true, False, 5, '010', ~]", "f.yaml")
    assert data == {"a": [1000.0, 15, 16, 1.5, "no", True, False, 5, "010", None]}
