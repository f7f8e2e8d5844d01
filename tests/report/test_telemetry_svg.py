"""The report's telemetry charts: pure SVG from a series, throttling shaded, texts escaped."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.errors import RecordError
from harness.model import CheckResult, Status
from harness.report import telemetry_svg
from harness.run import sampler as telemetry
from harness.series.telemetry import Series, load

PC = 0x4


def series(n: int = 6, gpus: int = 2, lost: dict | None = None) -> Series:
    t = tuple(float(i) for i in range(n))
    cols = {g: {"temp": tuple(60.0 + g + i for i in range(n)),
                "power": tuple(500.0 + 10 * g for _ in range(n)),
                "sm_clock": tuple(1980.0 for _ in range(n)),
                "reasons": tuple(PC if (g == 1 and 2 <= i < 4) else 0 for i in range(n))}
            for g in range(gpus)}
    return Series(1.0, t, cols, lost or {})


def test_three_panels_one_line_per_gpu_and_a_shaded_throttle_span():
    html = telemetry_svg.charts_html(series())
    svgs = re.findall(r"<svg.*?</svg>", html)
    assert len(svgs) == 3
    for svg in svgs:
        root = ET.fromstring(svg)  # well-formed markup
        assert len(root.findall("polyline")) == 2
    shade = r'<rect x="([\d.]+)" y="20" width="([\d.]+)"[^>]*fill-opacity="0.12"><title>([^<]*)</title>'
    shades = re.findall(shade, svgs[0])
    assert [s[2] for s in shades] == ["GPU 1: power_cap 2.0-4.0 s"]
    x, w = float(shades[0][0]), float(shades[0][1])
    plot_w = telemetry_svg.W - telemetry_svg.LEFT - telemetry_svg.RIGHT
    assert x == telemetry_svg.LEFT + 2 / 5 * plot_w and round(w, 1) == round(2 / 5 * plot_w, 1)
    assert "GPU temperature (C)" in svgs[0] and "Power (W)" in svgs[1] and "SM clock (MHz)" in svgs[2]
    assert "http" not in html and "<script" not in html


def test_long_series_are_thinned_and_empty_ones_draw_nothing():
    svg = telemetry_svg.panel(series(n=2000, gpus=1), "temp", "T", "C", [])
    (points,) = re.findall(r'points="([^"]*)"', svg)
    assert len(points.split()) <= telemetry_svg.MAX_POINTS
    assert telemetry_svg.panel(series(), "mem_temp", "HBM", "C", []) == ""  # no such column
    assert telemetry_svg.charts_html(Series(1.0, (0.0,), {0: {"temp": (50.0,)}})) == ""  # one sample


def test_lost_gpu_note_is_escaped():
    html = telemetry_svg.charts_html(series(lost={1: (3.0, "<b>gone</b>")}))
    assert "GPU 1 stopped answering at 3.0 s: &lt;b&gt;gone&lt;/b&gt;" in html


def test_figure_reads_the_saved_series_and_refuses_paths_outside_the_run(tmp_path: Path):
    saved = telemetry.save(series(), tmp_path / "raw" / "burn")
    rel = str(saved.relative_to(tmp_path))
    check = CheckResult("burn", "gpu_burn", Status.PASSED, details={"telemetry": {"file": rel}})
    fig = telemetry_svg.telemetry_figure(check, tmp_path)
    assert fig is not None and str(fig).count("<svg") == 3
    assert telemetry_svg.telemetry_figure(check, None) is None
    outside = CheckResult("x", "gpu_burn", Status.PASSED, details={"telemetry": {"file": "../../etc/passwd"}})
    assert telemetry_svg.telemetry_figure(outside, tmp_path) is None
    (tmp_path / "raw" / "burn" / "telemetry.json").write_text("{not json")
    with pytest.raises(RecordError, match=r"raw/burn/telemetry\.json: cannot read"):  # one line, exit 2
        telemetry_svg.telemetry_figure(check, tmp_path)
    (tmp_path / "raw" / "burn" / "telemetry.json").unlink()
    assert telemetry_svg.telemetry_figure(check, tmp_path) is None  # missing: no chart, no error


@pytest.mark.parametrize(("column", "values", "field", "why"), [
    ("temp", [50, "hot"], "gpus.0.temp.1", "should be a valid integer or a valid number"),
    ("temp", [50, True], "gpus.0.temp.1", "valid integer"),
    ("power", [1e300, 2.0], "gpus.0.power.0", "less than or equal to 1000000000000"),
    ("power", [1.0], "gpus.0.power", "1 value(s) for 2 time(s)"),
])
def test_a_tampered_series_is_one_error_naming_the_field(tmp_path: Path, column: str, values: list,
                                                         field: str, why: str):
    saved = telemetry.save(series(n=2), tmp_path / "raw" / "burn")
    doc = json.loads(saved.read_text())
    doc["gpus"]["0"][column] = values
    saved.write_text(json.dumps(doc))
    with pytest.raises(RecordError) as e:
        load(saved)
    assert e.value.field == field and why in str(e.value) and str(saved) in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_nan_and_bad_gpu_keys_are_refused(tmp_path: Path):
    saved = telemetry.save(series(n=2), tmp_path / "raw" / "burn")
    doc = json.loads(saved.read_text())
    saved.write_text(json.dumps({**doc, "t": [0.0, float("nan")]}))
    with pytest.raises(RecordError, match=r"t\.1: should be a finite number"):
        load(saved)
    saved.write_text(json.dumps({**doc, "gpus": {"x": {}}}))
    with pytest.raises(RecordError, match=r"gpus\.x: String should match pattern"):
        load(saved)


def test_a_check_over_in_two_samples_gets_no_lines_but_keeps_its_lost_gpu_note():
    assert telemetry_svg.charts_html(series(n=2)) == ""
    html = telemetry_svg.charts_html(series(n=2, lost={1: (0.0, "GPU is lost")}))
    assert "<svg" not in html and "GPU 1 stopped answering at 0.0 s: GPU is lost" in html
    assert "<svg" in telemetry_svg.charts_html(series(n=3))
