"""`harness baseline capture`: profiles from real fio runs, direction-aware bands, provenance,
and the property that a baseline never fails the runs it was captured from."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from clihelp import harness
from historyhelp import derive, gpus, judge, load, quick_runs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.checks.registry import kinds
from harness.config import load_profile
from harness.config.loader import LoadedProfile
from harness.errors import UsageError
from harness.history import baseline
from harness.model import CheckResult, Metric, Outcome, RunRecord, Status


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return quick_runs(tmp_path_factory.mktemp("golden"), 3)


def test_capture_from_real_runs_writes_a_valid_profile_they_pass(golden: list[Path], tmp_path: Path):
    out = tmp_path / "profiles" / "golden-vm.yaml"
    out.parent.mkdir()
    r = harness("baseline", "capture", *map(str, golden), "--name", "golden-vm", "--output", str(out))
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stdout
    assert harness("validate", str(out)).returncode == 0

    text = out.read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    records = [load(d) for d in golden]
    assert f"from 3 accepted run(s): {records[0].run_id}, {records[1].run_id}, {records[2].run_id}" \
        in header[1]
    assert any(line.startswith(f"# nodes: {records[0].host} (system serial") for line in header)
    assert any("kernel" in line for line in header if line.startswith("# software:"))
    doc = yaml.safe_load(text)
    assert doc["sources"][0].startswith("harness baseline capture ")

    prof = load_profile(out)
    by = {(e.metric, tuple(sorted(e.labels.items()))): e for e in prof.profile.expectations}
    key = (("job", "randread_4k"), ("rw", "read"))
    values = [m.value for r in records for c in r.checks for m in c.metrics
              if m.name == "fio.iops" and m.labels.get("job") == "randread_4k"]
    if ("fio.iops", key) in by:
        iops = by[("fio.iops", key)]
        assert iops.check == "fio" and iops.upper is None and iops.lower is not None and iops.lower >= 0.05
        assert min(values) <= iops.reference <= max(values)  # the median of three
    else:  # real runs on a busy machine may disagree beyond the cap: then it is a warning
        assert "fio/fio.iops{job=randread_4k,rw=read}: not baselined" in r.stderr, (values, r.stderr)
    if ("fio.clat_p99", key) in by:
        p99 = by[("fio.clat_p99", key)]
        assert p99.lower is None and p99.upper is not None and p99.upper >= 0.25  # latency: upper only
        assert p99.severity == "warn"  # a latency tail
    cores = by[("host.cpu_cores", ())]
    assert cores.min == cores.max == records[0].checks[0].metrics[0].value  # inventory count: exact
    assert by[("host.memory", ())].lower == 0.01

    for rec in records:
        outcomes = {e.outcome for e in judge(prof, rec)}
        assert outcomes <= {Outcome.PASS}, [e.message for e in judge(prof, rec) if e.outcome != Outcome.PASS]


def test_capture_extends_a_profile_and_only_overrides_what_was_measured(golden: list[Path],
                                                                         tmp_path: Path):
    out = tmp_path / "site.yaml"
    r = harness("baseline", "capture", *map(str, golden), "--name", "site-vm", "--output", str(out),
                "--extends", "generic")
    assert r.returncode == 0, r.stderr
    prof = load_profile(out)
    assert prof.chain == ("site-vm", "generic")
    checks = {e.check for e in prof.profile.expectations}
    assert {"fio", "fio-quick", "inventory"} <= checks  # generic's fio-quick rules are kept
    assert prof.profile.hardware.memory_min_bytes == 2147483648  # parent's hardware block


def test_capture_refuses_rejected_runs_and_existing_files(golden: list[Path], tmp_path: Path):
    out = tmp_path / "p.yaml"
    out.write_text("name: keep\n")
    r = harness("baseline", "capture", *map(str, golden), "--name", "p", "--output", str(out))
    assert r.returncode == 2 and "exists; pass --force" in r.stderr
    assert out.read_text() == "name: keep\n"
    bad = replace(load(golden[0]), checks=(*load(golden[0]).checks,
                                           CheckResult("x", "command", Status.FAILED)))
    with pytest.raises(UsageError, match="accepted runs only"):
        baseline.capture([bad], "p")
    r = harness("baseline", "capture", str(tmp_path), "--name", "p", "--output", str(tmp_path / "q.yaml"))
    assert r.returncode == 2 and "not a run directory" in r.stderr
    r = harness("baseline", "capture", str(golden[0]), "--name", "bad name!", "--output",
                str(tmp_path / "r.yaml"))
    assert r.returncode == 2 and "profile name 'bad name!'" in r.stderr


def test_a_baseline_from_fewer_than_three_golden_runs_is_refused(golden: list[Path], tmp_path: Path):
    """Issue #25 item 8: two runs (whose equal counts give a MAD of 0) used to make a baseline."""
    out = tmp_path / "two.yaml"
    r = harness("baseline", "capture", *map(str, golden[:2]), "--name", "two", "--output", str(out))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "a baseline needs at least 3 golden runs, got 2" in r.stderr
    assert not out.exists()
    assert baseline.MIN_RUNS == 3


def test_gpu_runs_give_hardware_and_per_gpu_bands(golden: list[Path], tmp_path: Path):
    base = load(golden[0])

    def tflops(scale: float):
        return lambda rec: [Metric("gpu.tflops", 800.0 * scale + i, "TFLOPS", {"gpu": i}) for i in range(8)]

    runs = [derive(base, f"n-{k}", f"2026-01-0{k + 1}T00:00:00Z", gpu_list=gpus(), extra=tflops(s))
            for k, s in enumerate((1.0, 0.97, 1.02))]
    cap = baseline.capture(runs, "h200-golden", now=None)
    assert cap.doc["hardware"] == {"gpu": {"models": ["NVIDIA H200"], "count": 8}}
    out = tmp_path / "h200-golden.yaml"
    baseline.write(cap, out, kinds())
    prof = load_profile(out)
    g3 = next(e for e in prof.profile.expectations if e.metric == "gpu.tflops" and e.labels == {"gpu": 3})
    assert g3.reference == 803.0 and g3.lower is not None and g3.upper is None
    assert "1753724031847" in out.read_text()  # GPU serials in the provenance header
    for rec in runs:
        assert {e.outcome for e in judge(prof, rec)} == {Outcome.PASS}


# ---------------------------------------------------------------- property

_METRICS = [("fio.iops", "IOPS"), ("fio.clat_p99", "us"), ("gpu.tflops", "TFLOPS"), ("gpu.temp_max", "C"),
            ("gpu.count", "count"), ("gpu.ecc_corrected", "count"), ("host.memory", "B"),
            ("gpu.power_mean", "W"), ("gpu.pcie_gen", "count"), ("power.headroom_pct", "%")]
_value = st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_infinity=False)


def _records(table: list[list[list[float]]]) -> list[RunRecord]:
    """table[run][metric][repeat] -> records with one check holding every metric."""
    out = []
    for r, per_metric in enumerate(table):
        ms = []
        for (name, unit), reps in zip(_METRICS, per_metric, strict=True):
            for k, v in enumerate(reps):
                labels: dict[str, str | int] = {"gpu": 0}
                if len(reps) > 1:
                    labels["repeat"] = k + 1
                ms.append(Metric(name, v, unit, labels))
        chk = CheckResult("c1", "command", Status.PASSED, metrics=tuple(ms))
        out.append(RunRecord(f"run-{r}", "node", {"name": "s"}, {"name": "p"}, f"2026-01-0{r + 1}T00:00:00Z",
                             "", 1.0, {"host": {"hostname": "node"}}, (chk,), "test"))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(3, 4).flatmap(lambda runs: st.integers(1, 3).flatmap(
    lambda reps: st.lists(st.lists(st.lists(_value, min_size=reps, max_size=reps),
                                   min_size=len(_METRICS), max_size=len(_METRICS)),
                          min_size=runs, max_size=runs))))
def test_a_baseline_never_fails_the_runs_it_came_from(table: list[list[list[float]]]) -> None:
    records = _records(table)
    cap = baseline.capture(records, "prop")
    from harness.config.models import Profile

    prof = LoadedProfile(Path("prop.yaml"), Profile.model_validate(yaml.safe_load(cap.text())), ("prop",))
    for rec in records:
        evs = judge(prof, rec)
        bad = [e.message for e in evs if e.outcome != Outcome.PASS]
        assert not bad, bad
    # every directed metric judged, on its worse side only
    for e in prof.profile.expectations:
        if e.reference is not None and e.metric in ("fio.iops", "gpu.tflops"):
            assert e.upper is None and e.lower is not None and math.isfinite(e.lower)
        if e.reference is not None and e.metric in ("fio.clat_p99", "gpu.temp_max"):
            assert e.lower is None and e.upper is not None
    assert not any(e.metric == "gpu.power_mean" for e in prof.profile.expectations)


def test_a_disagreement_warning_says_it_once_with_formatted_numbers() -> None:
    """It read 'not baselined, the golden runs the golden runs' values span 100 to 1e+05 us'."""
    table = [[[v] if name == "fio.clat_p99" else [1.0] for name, _ in _METRICS]
             for v in (100.0, 110.0, 100.0, 5000.0, 100000.0)]
    cap = baseline.capture(_records(table), "spread")
    (warning,) = [w for w in cap.warnings if "fio.clat_p99" in w]
    assert warning.startswith("c1/fio.clat_p99{gpu=0}: not baselined: the golden runs' values span 100 us to "
                              "100 ms around a median of"), warning
    assert "golden runs the golden" not in warning and "e+" not in warning
